// The chunk reduction against the per-token recurrence built the slow, obvious
// way: A_t as a dense K x K matrix, S_t = A_t S_{t-1} + beta_t k_t v_t^T.
#include "chunk_pairs.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace densefeed::affine_chain {
namespace {

using Matrix = std::vector<double>;  // row-major

Matrix dense_transition(const TokenBlock& b, std::size_t t) {
  const std::size_t K = b.dim_k;
  Matrix a(K * K);
  for (std::size_t i = 0; i < K; ++i) {
    for (std::size_t j = 0; j < K; ++j) {
      const double proj = (i == j ? 1.0 : 0.0) - b.beta[t] * b.keys[t * K + i] * b.keys[t * K + j];
      a[i * K + j] = proj * b.alpha[t * K + j];
    }
  }
  return a;
}

Matrix multiply(const Matrix& a, const Matrix& b, std::size_t n, std::size_t k, std::size_t m) {
  Matrix c(n * m, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t p = 0; p < k; ++p)
      for (std::size_t j = 0; j < m; ++j) c[i * m + j] += a[i * k + p] * b[p * m + j];
  return c;
}

// S <- A_t S + beta_t k_t v_t^T with A_t dense.
void dense_step(const TokenBlock& b, std::size_t t, Matrix& s) {
  const std::size_t K = b.dim_k;
  const std::size_t V = b.dim_v;
  s = multiply(dense_transition(b, t), s, K, K, V);
  for (std::size_t i = 0; i < K; ++i)
    for (std::size_t j = 0; j < V; ++j)
      s[i * V + j] += b.beta[t] * b.keys[t * K + i] * b.values[t * V + j];
}

double rel_l2(const Matrix& x, const Matrix& ref) {
  double num = 0.0;
  double den = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

class ChunkPairsByRegime : public ::testing::TestWithParam<Regime> {};

TEST_P(ChunkPairsByRegime, PairEqualsPerTokenRecurrence) {
  InputSpec spec;
  spec.seed = 99;
  spec.regime = GetParam();
  spec.dim_k = 16;
  spec.dim_v = 24;
  const std::size_t K = spec.dim_k;
  const std::size_t V = spec.dim_v;
  const HeadInputs inputs(spec, 2);
  const TokenBlock block = inputs.tokens(130, 64);
  const AffinePair64 pair = reduce_tokens(block);

  Matrix m(K * K, 0.0);
  for (std::size_t i = 0; i < K; ++i) m[i * K + i] = 1.0;
  Matrix h(K * V, 0.0);
  Matrix s = inputs.initial_state(0);
  const Matrix s0 = s;
  for (std::size_t t = 0; t < block.count; ++t) {
    m = multiply(dense_transition(block, t), m, K, K, K);
    dense_step(block, t, h);
    dense_step(block, t, s);
  }
  EXPECT_LT(rel_l2(pair.transition, m), 1e-13);
  EXPECT_LT(rel_l2(pair.contribution, h), 1e-13);
  // The affine pair carries any initial state: S_n = M S_0 + H.
  Matrix via_pair = multiply(pair.transition, s0, K, K, V);
  for (std::size_t i = 0; i < via_pair.size(); ++i) via_pair[i] += pair.contribution[i];
  EXPECT_LT(rel_l2(via_pair, s), 1e-13);

  // gated_delta_step is the same recurrence, one token at a time.
  Matrix stepped = s0;
  for (std::size_t t = 0; t < block.count; ++t) gated_delta_step(block, t, stepped);
  EXPECT_LT(rel_l2(stepped, s), 1e-13);

  // The transition is not identity plus noise: over 64 tokens it moves far from I.
  Matrix identity(K * K, 0.0);
  for (std::size_t i = 0; i < K; ++i) identity[i * K + i] = 1.0;
  EXPECT_GT(rel_l2(pair.transition, identity), 0.1);
}

INSTANTIATE_TEST_SUITE_P(Regimes, ChunkPairsByRegime,
                         ::testing::Values(Regime::long_memory, Regime::fast_decay),
                         [](const auto& param_info) {
                           return param_info.param == Regime::long_memory ? "LongMemory"
                                                                          : "FastDecay";
                         });

TEST(ChunkPairs, ApplyTransitionMatchesDenseMatrix) {
  InputSpec spec;
  spec.seed = 5;
  spec.regime = Regime::fast_decay;
  spec.dim_k = 8;
  spec.dim_v = 8;
  const TokenBlock block = HeadInputs(spec, 0).tokens(0, 1);
  Matrix x(8 * 5);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<double>(i) + 0.5);
  const Matrix expected = multiply(dense_transition(block, 0), x, 8, 8, 5);
  std::vector<double> w(5);
  apply_transition(block, 0, x, 5, w);
  EXPECT_LT(rel_l2(x, expected), 1e-15);
}

}  // namespace
}  // namespace densefeed::affine_chain
