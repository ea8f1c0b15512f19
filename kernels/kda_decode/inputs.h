// Deterministic inputs of one KDA decode step (issue 6): per (batch b, head h)
// the layer's bf16 activations q, k, g_raw, v and beta and the fp32 state S0,
// plus the per-head fp32 parameters A_log and dt_bias. Every number is a pure
// function of (seed, stream, index, element) through a counter-based
// generator, so the reference and the candidate, in separate processes, see
// the same bits. This file is frozen by gates/kda-decode.yaml.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace densefeed::kda_decode {

// Sizes of one decode step. K = dim_k (key / state rows), V = dim_v (value /
// state columns); the harnesses set both from --dim.
struct InputSpec {
  std::uint64_t seed = 0;
  std::size_t batch = 1;
  std::size_t heads = 64;
  std::size_t dim_k = 128;
  std::size_t dim_v = 128;
};

// Per-head parameters of the lower-bound gate (fla/layers/kda.py,
// KimiDeltaAttention.__init__):
//   a_log:   A_log[h] = log(U(1, 16)) as upstream initialises it, fp32.
//   dt_bias: [K], fp32. Upstream initialises it to zeros and training moves it;
//            drawn here from U(-1, 1) so the bias term is exercised.
struct HeadParams {
  float a_log = 0.0f;
  std::vector<float> dt_bias;
};

// One (b, h) of the step, as the layer hands it to the kernel:
//   q, k, g_raw: [K] bf16 bits, N(0, 1) rounded to bf16 (round to nearest even);
//   v:           [V] bf16 bits, N(0, 1);
//   beta:        bf16 bits of sigmoid(N(0, 1)) (post-sigmoid, as the layer's
//                b_proj(x).sigmoid() gives it);
//   state:       [K, V] row-major fp32, U(-1, 1) rounded to fp32.
struct HeadInputs {
  std::vector<std::uint16_t> q, k, g_raw, v;
  std::uint16_t beta = 0;
  std::vector<float> state;
};

// The whole batch, row-major over (b, h, element): what the candidate uploads.
//   q, k, g_raw [B, H, K], v [B, H, V], beta [B, H] (bf16 bits);
//   a_log [H], dt_bias [H, K], state [B, H, K, V] (fp32).
struct BatchInputs {
  InputSpec spec;
  std::vector<std::uint16_t> q, k, g_raw, v, beta;
  std::vector<float> a_log, dt_bias, state;
};

// Throws std::invalid_argument naming the field if a size is 0.
void check_spec(const InputSpec& spec);

// Head h's gate parameters. h < spec.heads.
HeadParams head_params(const InputSpec& spec, std::size_t h);

// (b, h)'s inputs, written into `out` (its vectors are resized, so a caller can
// reuse one HeadInputs across heads).
void head_inputs(const InputSpec& spec, std::size_t b, std::size_t h, HeadInputs& out);

// Runs work(first, last) over [0, n) cut into contiguous ranges, one per
// thread (up to the machine's cores, at most 16), and waits for all. For
// per-(b, h) work that writes disjoint slices: the result does not depend on
// the number of threads.
void parallel_over(std::size_t n, const std::function<void(std::size_t, std::size_t)>& work);

// Every (b, h) and head parameter, as head_params() and head_inputs() give them.
// Throws std::invalid_argument from check_spec; std::bad_alloc if it does not fit.
BatchInputs batch_inputs(const InputSpec& spec);

}  // namespace densefeed::kda_decode
