// The candidate's CPU path of one KDA decode step (issue 6), fp32 throughout,
// in the two structures the gate compares (reference.h gives the math):
//   v0: as fla's fused_recurrent_kda_fwd_kernel is launched (BV = 32): every
//       V-tile of 32 columns recomputes the q/k L2 normalisation and the gate;
//   v3: the tiles merged: normalisation and gate once per (b, h).
// Per column the arithmetic and its order are the same in both, so v0 and v3
// give the same bits; only the redundant work differs. This path is what CI
// runs; the CUDA path (cuda_path.h) has the same two versions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "inputs.h"

namespace densefeed::kda_decode {

enum class Version { v0, v3 };

// "v0", "v3".
std::string_view to_string(Version version);
// Inverse of to_string; nullopt for any other text.
std::optional<Version> parse_version(std::string_view text);

// Columns of one upstream program (fused_recurrent_kda_fwd: BV = 32).
inline constexpr std::size_t kTileV = 32;

// The batch's inputs wherever they are held (BatchInputs, or a benchmark
// driver's buffers, kda_decode_kernel.h): the same layout, as pointers.
struct BatchView {
  InputSpec spec;
  const std::uint16_t* q = nullptr;      // [B, H, K] bf16 bits
  const std::uint16_t* k = nullptr;      // [B, H, K]
  const std::uint16_t* g_raw = nullptr;  // [B, H, K]
  const std::uint16_t* v = nullptr;      // [B, H, V]
  const std::uint16_t* beta = nullptr;   // [B, H]
  const float* a_log = nullptr;          // [H]
  const float* dt_bias = nullptr;        // [H, K]
  const float* state = nullptr;          // [B, H, K, V]

  BatchView() = default;
  // Implicit: every function over a batch takes a BatchInputs as it is.
  BatchView(const BatchInputs& in)
      : spec(in.spec), q(in.q.data()), k(in.k.data()), g_raw(in.g_raw.data()), v(in.v.data()), beta(in.beta.data()),
        a_log(in.a_log.data()), dt_bias(in.dt_bias.data()), state(in.state.data()) {}
};

// What a step may change beyond the inputs. lower_bound 0 makes every decay
// exp(0) = 1: the harness's deliberately wrong mode (KDA_DECODE_FAULT=skip-decay),
// which the gate must call red.
struct StepOptions {
  float lower_bound = -5.0f;
};

// Per-row factors of one (b, h), fp32, each [K]:
//   k:     k / sqrtf(sum(k^2) + 1e-6f)
//   q:     q / sqrtf(sum(q^2) + 1e-6f) * K^-0.5
//   decay: expf(lower_bound * sigmoid(expf(A_log[h]) * (g_raw + dt_bias[h])))
struct RowFactors {
  std::vector<float> k, q, decay;
};

// Fills `out` for (b, h) of `in` (sums in index order, no FMA contraction).
void row_factors(const BatchView& in, std::size_t b, std::size_t h, const StepOptions& options,
                 RowFactors& out);

// Columns [c0, c1) of (b, h): decay, delta-rule update and output, fp32.
// Writes o[c] for c in [c0, c1) (o points at (b, h)'s [V] row) and those
// columns of (b, h)'s new state (state_out points at its [K, V] block).
void update_columns(const BatchView& in, std::size_t b, std::size_t h, const RowFactors& f,
                    std::size_t c0, std::size_t c1, float* o, float* state_out);

// The whole batch: o [B, H, V] and state_out [B, H, K, V], fp32.
void decode_step_cpu(Version version, const BatchView& in, const StepOptions& options, float* o,
                     float* state_out);

}  // namespace densefeed::kda_decode
