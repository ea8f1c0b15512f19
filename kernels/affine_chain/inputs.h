// Deterministic inputs of the affine_chain harness: per head h and global token
// index t a key, a value, a beta and per-channel decays, plus one initial state
// per (sequence, head). Every number is a pure function of (seed, head, token,
// element) -- or (seed, head, sequence, element) for initial states -- through a
// counter-based generator, so any segmentation (sequences, shards, chunks) and
// any process sees the same tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace densefeed::affine_chain {

// Input regime (issue 2): whether the carried state has long memory.
//  long_memory: keys in a per-head rank-32 subspace, decays in (1 - 1e-4, 1):
//               the state keeps most of its initial value across 10^4 tokens.
//  fast_decay:  full-rank keys, decays exp(-5 sigmoid(x)) in (exp(-5), 1) (the
//               KDA gate's range): the state forgets within a chunk or two.
enum class Regime { long_memory, fast_decay };

// "long-memory", "fast-decay".
std::string_view to_string(Regime regime);
// Inverse of to_string; nullopt for any other text.
std::optional<Regime> parse_regime(std::string_view text);

// Rank of the long-memory key subspace; for K <= 32 keys are full rank.
inline constexpr std::size_t kLongMemoryKeyRank = 32;
// Long-memory decays are drawn uniformly from (1 - kLongMemoryDecaySpan, 1).
inline constexpr double kLongMemoryDecaySpan = 1e-4;
// Fast-decay decays are exp(-kFastDecayScale * sigmoid(x)), x ~ N(0, 1).
inline constexpr double kFastDecayScale = 5.0;

struct InputSpec {
  std::uint64_t seed = 0;
  Regime regime = Regime::long_memory;
  std::size_t dim_k = 128;  // K, key / state rows
  std::size_t dim_v = 128;  // V, value / state columns
};

// Tokens [t0, t0 + count) of one head, fp64, row-major.
struct TokenBlock {
  std::size_t t0 = 0;
  std::size_t count = 0;
  std::size_t dim_k = 0;
  std::size_t dim_v = 0;
  std::vector<double> keys;    // [count, K], each row unit L2 norm
  std::vector<double> values;  // [count, V], N(0, 1)
  std::vector<double> beta;    // [count], sigmoid(N(0, 1)), in (0, 1)
  std::vector<double> alpha;   // [count, K], per-channel decay factors, see Regime
};

// The inputs of one head. Construction draws the head's key basis (long-memory:
// K x r Gaussian, Gram-Schmidt in fp64, r = min(32, K)); everything else is drawn
// on demand.
class HeadInputs {
 public:
  // Throws std::invalid_argument if dim_k or dim_v is 0.
  HeadInputs(const InputSpec& spec, std::size_t head);

  const InputSpec& spec() const { return spec_; }
  std::size_t head() const { return head_; }

  // Tokens [t0, t0 + count) of this head.
  TokenBlock tokens(std::size_t t0, std::size_t count) const;

  // Initial state S0 of `sequence` (its index in the batch) for this head:
  // [K, V] row-major, N(0, 1) entries rounded to fp32 so that the fp64 reference
  // and the fp32 paths start from the same state.
  std::vector<double> initial_state(std::size_t sequence) const;

  // Long-memory key basis: [K, r] row-major with orthonormal columns; empty in
  // fast-decay.
  const std::vector<double>& key_basis() const { return basis_; }
  // r: columns of key_basis(), 0 in fast-decay.
  std::size_t key_rank() const { return rank_; }

 private:
  InputSpec spec_;
  std::size_t head_;
  std::size_t rank_ = 0;
  std::vector<double> basis_;
};

}  // namespace densefeed::affine_chain
