#include "inputs.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace densefeed::affine_chain {
namespace {

// splitmix64's output mix (Steele, Lea, Flood, "Fast Splittable Pseudorandom
// Number Generators", OOPSLA 2014; constants as in Vigna's splitmix64.c,
// https://prng.di.unimi.it/splitmix64.c). A bijection of u64 with good avalanche.
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// splitmix64's increment, 2^64 / golden ratio.
constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;

// Separate streams so that, e.g., key element 3 and value element 3 of the same
// token are independent draws.
enum class Stream : std::uint64_t {
  key_basis = 1,
  key = 2,
  value = 3,
  beta = 4,
  alpha = 5,
  initial_state = 6,
};

// Counter-based draw: hashes the tuple word by word. Each absorption is a
// bijection of the running hash for a fixed word and of the word for a fixed
// hash, so distinct tuples collide no more than random 64-bit values would.
std::uint64_t counter_hash(std::uint64_t seed, Stream stream, std::uint64_t head,
                           std::uint64_t index, std::uint64_t element) {
  std::uint64_t h = seed;
  for (const std::uint64_t word : {static_cast<std::uint64_t>(stream), head, index, element}) {
    h = mix64((h ^ word) + kGamma);
  }
  return h;
}

// Top 53 bits to a double strictly inside (0, 1), so log() below is finite.
double to_open_unit(std::uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

// `count` N(0, 1) draws for (stream, head, index): elements 2p and 2p + 1 are the
// two outputs of one Box-Muller transform (Box & Muller, Ann. Math. Stat. 1958)
// of the uniforms hashed from elements 2p and 2p + 1.
void fill_normals(std::uint64_t seed, Stream stream, std::size_t head, std::size_t index,
                  double* out, std::size_t count) {
  for (std::size_t p = 0; 2 * p < count; ++p) {
    const double u1 = to_open_unit(counter_hash(seed, stream, head, index, 2 * p));
    const double u2 = to_open_unit(counter_hash(seed, stream, head, index, 2 * p + 1));
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * std::numbers::pi * u2;
    out[2 * p] = r * std::cos(theta);
    if (2 * p + 1 < count) out[2 * p + 1] = r * std::sin(theta);
  }
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

void normalize(double* x, std::size_t n) {
  double sq = 0.0;
  for (std::size_t i = 0; i < n; ++i) sq += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(sq);
  for (std::size_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

std::string_view to_string(Regime regime) {
  switch (regime) {
    case Regime::long_memory: return "long-memory";
    case Regime::fast_decay: return "fast-decay";
  }
  return "?";
}

std::optional<Regime> parse_regime(std::string_view text) {
  if (text == "long-memory") return Regime::long_memory;
  if (text == "fast-decay") return Regime::fast_decay;
  return std::nullopt;
}

HeadInputs::HeadInputs(const InputSpec& spec, std::size_t head) : spec_(spec), head_(head) {
  if (spec.dim_k == 0 || spec.dim_v == 0) {
    throw std::invalid_argument("HeadInputs: dim_k and dim_v must be positive");
  }
  if (spec.regime != Regime::long_memory) return;
  const std::size_t K = spec.dim_k;
  rank_ = std::min(kLongMemoryKeyRank, K);
  basis_.assign(K * rank_, 0.0);
  fill_normals(spec.seed, Stream::key_basis, head, 0, basis_.data(), basis_.size());
  // Modified Gram-Schmidt on the columns, each projection pass done twice
  // ("twice is enough": Giraud, Langou, Rozloznik 2005) so that the columns are
  // orthonormal to fp64 round-off.
  for (std::size_t j = 0; j < rank_; ++j) {
    for (int pass = 0; pass < 2; ++pass) {
      for (std::size_t q = 0; q < j; ++q) {
        double dot = 0.0;
        for (std::size_t i = 0; i < K; ++i) dot += basis_[i * rank_ + q] * basis_[i * rank_ + j];
        for (std::size_t i = 0; i < K; ++i) basis_[i * rank_ + j] -= dot * basis_[i * rank_ + q];
      }
    }
    double sq = 0.0;
    for (std::size_t i = 0; i < K; ++i) sq += basis_[i * rank_ + j] * basis_[i * rank_ + j];
    const double inv = 1.0 / std::sqrt(sq);
    for (std::size_t i = 0; i < K; ++i) basis_[i * rank_ + j] *= inv;
  }
}

TokenBlock HeadInputs::tokens(std::size_t t0, std::size_t count) const {
  const std::size_t K = spec_.dim_k;
  const std::size_t V = spec_.dim_v;
  const std::uint64_t seed = spec_.seed;
  TokenBlock b;
  b.t0 = t0;
  b.count = count;
  b.dim_k = K;
  b.dim_v = V;
  b.keys.resize(count * K);
  b.values.resize(count * V);
  b.beta.resize(count);
  b.alpha.resize(count * K);
  std::vector<double> scratch(std::max(K, rank_));
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t t = t0 + i;
    double* key = &b.keys[i * K];
    double* alpha = &b.alpha[i * K];
    if (spec_.regime == Regime::long_memory) {
      // k = normalize(B z), z ~ N(0, I_r): a random direction in the head's subspace.
      fill_normals(seed, Stream::key, head_, t, scratch.data(), rank_);
      for (std::size_t row = 0; row < K; ++row) {
        double acc = 0.0;
        for (std::size_t c = 0; c < rank_; ++c) acc += basis_[row * rank_ + c] * scratch[c];
        key[row] = acc;
      }
      for (std::size_t c = 0; c < K; ++c) {
        const double u = to_open_unit(counter_hash(seed, Stream::alpha, head_, t, c));
        alpha[c] = 1.0 - kLongMemoryDecaySpan * u;
      }
    } else {
      fill_normals(seed, Stream::key, head_, t, key, K);
      fill_normals(seed, Stream::alpha, head_, t, alpha, K);
      for (std::size_t c = 0; c < K; ++c) alpha[c] = std::exp(-kFastDecayScale * sigmoid(alpha[c]));
    }
    normalize(key, K);
    fill_normals(seed, Stream::value, head_, t, &b.values[i * V], V);
    double x = 0.0;
    fill_normals(seed, Stream::beta, head_, t, &x, 1);
    b.beta[i] = sigmoid(x);
  }
  return b;
}

std::vector<double> HeadInputs::initial_state(std::size_t sequence) const {
  std::vector<double> s(spec_.dim_k * spec_.dim_v);
  fill_normals(spec_.seed, Stream::initial_state, head_, sequence, s.data(), s.size());
  for (double& x : s) x = static_cast<double>(static_cast<float>(x));
  return s;
}

}  // namespace densefeed::affine_chain
