// The fp64 reference of one Kimi Delta Attention decode step (issue 6): the
// naive recurrence of fla-core, computed in double from the same bf16 / fp32
// input bits the candidate gets. Frozen by gates/kda-decode.yaml.
//
// Math, per (b, h), T = 1, with the kernel-side options the layer uses
// (fla-core 0.6.0, fla/ops/kda/fused_recurrent.py, fused_recurrent_kda_fwd_kernel
// with USE_QK_L2NORM_IN_KERNEL, USE_GATE_IN_KERNEL, HAS_A, HAS_BIAS,
// USE_LOWER_BOUND; the recurrence itself is fla/ops/kda/naive.py,
// naive_recurrent_kda; the gate is fla/ops/kda/gate.py,
// naive_kda_lowerbound_gate):
//   q  <- q / sqrt(sum(q^2) + eps) * scale,   scale = K^-0.5, eps = 1e-6
//   k  <- k / sqrt(sum(k^2) + eps)
//   g  =  lower_bound * sigmoid(exp(A_log[h]) * (g_raw + dt_bias[h])),  lower_bound = -5
//   S  <- diag(exp(g)) S                       (decay of the state's K rows)
//   u  =  beta * (v - S^T k)                   (delta rule)
//   S  <- S + k u^T
//   o  =  S^T q
#pragma once

#include <cstddef>

#include "inputs.h"

namespace densefeed::kda_decode {

// fla's in-kernel L2 normalisation: x / sqrt(sum(x^2) + 1e-6)
// (fused_recurrent_kda_fwd_kernel, USE_QK_L2NORM_IN_KERNEL).
inline constexpr double kL2NormEps = 1e-6;
// The forget gate's lower bound in log space, as GLM-5.3-Flash / Kimi Linear use
// it (issue 6; fla's naive_kda_lowerbound_gate default).
inline constexpr double kLowerBound = -5.0;

// One (b, h) in fp64: o [V] and the new state [K, V] (row-major), from the
// head's parameters and inputs (sizes K = in.q.size(), V = in.v.size()).
// `o` and `state_out` must hold V and K * V doubles.
void reference_head_step(const HeadParams& params, const HeadInputs& in, double* o, double* state_out);

}  // namespace densefeed::kda_decode
