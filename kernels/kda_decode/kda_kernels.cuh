// The CUDA kernels of one KDA decode step (issue 6) for K = V = 128, and their
// launcher. C++17, CUDA headers only: included by the .cu files of the
// harness's GPU path and of the device benchmark.
//
// Math: reference.h (fla-core's fused_recurrent_kda_fwd_kernel with in-kernel
// q/k L2 normalisation and the lower-bound gate; naive_recurrent_kda).
//   v0: fla's launch, ported: grid (V / 32) * B * H programs of 4 warps, each
//       owning a [128, 32] tile of the state (Triton's blocked layout: a thread
//       holds 8 rows x 4 columns), each recomputing the q/k normalisation and
//       the gate of all 128 rows, with block-wide reductions (warp shuffles,
//       then shared memory across the 4 warps) for sum(q^2), sum(k^2), S^T k
//       and S^T q.
//   v3: the four tiles merged: one block of 4 warps per (b, h); warp w owns
//       columns [32w, 32w + 32) of all 128 rows (a thread: 32 rows x 4 columns,
//       128 fp32 registers); warp 0 computes the normalisation and the gate once
//       per (b, h) with one warp-level reduction and hands them to the block
//       through 1.5 KB of shared memory; S^T k and S^T q reduce inside each
//       warp (shuffles), never across warps. When B * H is below the SM count
//       (B = 1 at H = 64 on the H200), each (b, h) is split over two blocks of
//       2 warps (64 columns each), each computing the normalisation and gate
//       itself, so that the single partial wave reaches every SM: at B = 1 one
//       block per head left half the SMs idle and was bound by how fast one SM
//       moves 128 KiB (measured on the H200, kernels/RESULTS.md).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "decode_cpu.h"

namespace densefeed::kda_decode {

// The head dimension the kernels are written for (K = V).
inline constexpr int kCudaDim = 128;

// Device pointers of one step, row-major as BatchInputs: q, k, g_raw [B, H, K],
// v [B, H, V], beta [B, H] (bf16); a_log [H], dt_bias [H, K], state_in and
// state_out [B, H, K, V], o [B, H, V] (fp32). state_out must not alias state_in.
struct KdaDecodeArgs {
  const __nv_bfloat16* q = nullptr;
  const __nv_bfloat16* k = nullptr;
  const __nv_bfloat16* g_raw = nullptr;
  const __nv_bfloat16* v = nullptr;
  const __nv_bfloat16* beta = nullptr;
  const float* a_log = nullptr;
  const float* dt_bias = nullptr;
  const float* state_in = nullptr;
  float* state_out = nullptr;
  float* o = nullptr;
  int batch = 0;
  int heads = 0;
  float scale = 0.08838834764831845f;  // K^-0.5 at K = 128
  float lower_bound = -5.0f;
  float eps = 1e-6f;
  int v3_split = 0;  // v3's blocks per (b, h): 0 chooses (see above), 1 or 2 forces it (benchmark only)
};

// Launches `version` on `stream` (K = V = kCudaDim). Returns the launch's error
// (cudaErrorInvalidValue for batch or heads < 1); does not synchronise.
cudaError_t launch_kda_decode(Version version, const KdaDecodeArgs& args, cudaStream_t stream);

// Threads per block and blocks of a launch, for the benchmark's report.
int kda_decode_threads(Version version, int batch, int heads);
long long kda_decode_blocks(Version version, int batch, int heads);
// Blocks of `version` resident per SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor), 0 on error.
int kda_decode_blocks_per_sm(Version version);

}  // namespace densefeed::kda_decode
