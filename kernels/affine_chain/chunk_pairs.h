// Reduction of a run of tokens to its affine pair under the gated delta rule
// (Yang, Kautz, Hatamizadeh, "Gated Delta Networks", 2024; the per-channel decay
// of KDA, Kimi Linear 2025):
//   S_t = A_t S_{t-1} + beta_t k_t v_t^T,   A_t = (I - beta_t k_t k_t^T) Diag(alpha_t),
// with S of shape K x V. Over a run of n tokens, S_n = M S_0 + H with
//   M = A_n ... A_1 (K x K), H = the state after the run started from S_0 = 0 (K x V).
// Everything here is fp64: it is the exact side of every comparison.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "inputs.h"

namespace densefeed::affine_chain {

// The affine pair (M, H) of a run of tokens; S_after = M S_before + H.
struct AffinePair64 {
  std::vector<double> transition;    // M: [K, K] row-major
  std::vector<double> contribution;  // H: [K, V] row-major
};

// X <- A_t X for token i of `block`, X of shape [K, n] row-major (n = K for a
// transition, V for a state). A_t is applied as a row scaling by alpha_t followed
// by a rank-1 update, O(K n), never as a K x K matrix. `w` is scratch of n doubles.
void apply_transition(const TokenBlock& block, std::size_t i, std::span<double> x, std::size_t n,
                      std::span<double> w);

// One step of the per-token recurrence for token i of `block`:
// S <- A_t S + beta_t k_t v_t^T, S of shape [K, V] row-major. O(K V).
void gated_delta_step(const TokenBlock& block, std::size_t i, std::span<double> state);

// The affine pair of all tokens of `block` (typically one chunk of <= 64 tokens):
// M = A_n ... A_1 from M = I, H from the zero state, both in fp64, O(n K (K + V)).
AffinePair64 reduce_tokens(const TokenBlock& block);

}  // namespace densefeed::affine_chain
