#include "chunk_pairs.h"

#include <algorithm>
#include <cassert>

namespace densefeed::affine_chain {
namespace {

// X <- (I - b k k^T) Diag(alpha) X + b k u^T with u = addend (or 0 when null).
// Written so that X is read twice per token: first pass scales each row and
// accumulates w = k^T (Diag(alpha) X); second pass applies the rank-1 update
// with u - w folded into one vector.
// Vector-width clones as in affine_chain.cpp: same bits, chosen at load time.
__attribute__((target_clones("avx512f", "avx2", "default"))) void update_rows(
    const double* key, double beta, const double* alpha, const double* addend, double* x,
    std::size_t K, std::size_t n, double* w) {
  for (std::size_t j = 0; j < n; ++j) w[j] = 0.0;
  for (std::size_t r = 0; r < K; ++r) {
    double* row = x + r * n;
    const double a = alpha[r];
    const double k = key[r];
    for (std::size_t j = 0; j < n; ++j) {
      row[j] *= a;
      w[j] += k * row[j];
    }
  }
  // w <- u - w, so that X += b k (u - w)^T does both the projection and the write.
  for (std::size_t j = 0; j < n; ++j) w[j] = (addend ? addend[j] : 0.0) - w[j];
  for (std::size_t r = 0; r < K; ++r) {
    double* row = x + r * n;
    const double bk = beta * key[r];
    for (std::size_t j = 0; j < n; ++j) row[j] += bk * w[j];
  }
}

}  // namespace

void apply_transition(const TokenBlock& block, std::size_t i, std::span<double> x, std::size_t n,
                      std::span<double> w) {
  const std::size_t K = block.dim_k;
  assert(i < block.count && x.size() == K * n && w.size() >= n);
  update_rows(&block.keys[i * K], block.beta[i], &block.alpha[i * K], nullptr, x.data(), K, n,
              w.data());
}

void gated_delta_step(const TokenBlock& block, std::size_t i, std::span<double> state) {
  const std::size_t K = block.dim_k;
  const std::size_t V = block.dim_v;
  assert(i < block.count && state.size() == K * V);
  std::vector<double> w(V);
  update_rows(&block.keys[i * K], block.beta[i], &block.alpha[i * K], &block.values[i * V],
              state.data(), K, V, w.data());
}

AffinePair64 reduce_tokens(const TokenBlock& block) {
  const std::size_t K = block.dim_k;
  const std::size_t V = block.dim_v;
  AffinePair64 pair;
  pair.transition.assign(K * K, 0.0);
  for (std::size_t r = 0; r < K; ++r) pair.transition[r * K + r] = 1.0;
  pair.contribution.assign(K * V, 0.0);
  std::vector<double> w(std::max(K, V));
  for (std::size_t i = 0; i < block.count; ++i) {
    const double* key = &block.keys[i * K];
    const double* alpha = &block.alpha[i * K];
    update_rows(key, block.beta[i], alpha, nullptr, pair.transition.data(), K, K, w.data());
    update_rows(key, block.beta[i], alpha, &block.values[i * V], pair.contribution.data(), K, V,
                w.data());
  }
  return pair;
}

}  // namespace densefeed::affine_chain
