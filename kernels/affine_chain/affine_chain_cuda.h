// The CUDA path of the context-parallel state passing (issue 6): the same
// algorithm as ChainRunner in affine_chain.cpp, as data the GPU walks.
//
// C++17 on purpose: this header is included by affine_chain_cuda.cu (nvcc,
// CMAKE_CUDA_STANDARD 17) and by the C++20 translation units that build the
// step programs from a chunk plan (cuda_step_program.h). No C++20 headers, no
// CUDA types.
//
// Every phase of the CPU path is one step program; a step updates a [K, N]
// state X (N = K for a transition chain, N = V for a state) as
//   X <- A_i X            (chain: A_i = M_c, precision under test)
//   X <- A_i X + B_i      (walks: M_c, H_c in fp32 IEEE; merge: M_r, H_r in the
//                          precision under test, the add in fp32)
// with the resets and records of ChainRunner. The GPU splits X into column
// slices (each column of X evolves on its own: (A X)[:, j] = A X[:, j]), one
// thread block per (head, task, slice), so the result does not depend on the
// slice width.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace densefeed::affine_chain::cuda {

// Products on the GPU.
//  ieee      fp32 SIMT, FMA-free (__fmul_rn then __fadd_rn), each output's sum in
//            ascending k from 0: the same operations in the same order as the
//            CPU path (-ffp-contract=off), so it equals the CPU bit for bit.
//            Every fp32 walk uses it.
//  ieee_fma  fp32 SIMT with fmaf (one rounding per term): what an fp32 GEMM
//            does; for the benchmark only (not bit-equal to the CPU path).
//  tf32      mma.sync m16n8k8 .tf32, fp32 bit patterns passed unconverted.
//  tf32_rn   operands converted with cvt.rna.tf32.f32 first.
//  tf32x3    hi = cvt.rna(x), lo = cvt.rna(x - hi); A_hi B_lo + A_lo B_hi +
//            A_hi B_hi per k-step in that order, summed as MmaAccumulate says.
enum class GpuPrecision : std::int32_t { ieee, ieee_fma, tf32, tf32_rn, tf32x3 };

// "ieee", "ieee-fma", "tf32", "tf32-rn", "tf32x3".
const char* to_string(GpuPrecision precision);

// How the TF32 precisions sum a K = 128 dot product of MMA k-steps (8 terms
// each). On the H200 the tensor core rounds the fp32 result of an MMA, C + 8
// products, toward zero (tf32_device_check.cu, kernels/RESULTS.md): a bias
// that a chain of products carries, where the CPU path's round-to-nearest
// errors cancel.
//  residual     (default) each k-step's large products S = sum of A_hi B_hi
//               terms as p = MMA(A, B, C = 0) and its residual
//               e = MMA(A, B, C = -p) (if the tensor core forms C + products
//               exactly before it rounds, e = S - p to 24 bits, so p + e is S
//               rounded to nearest); the running sum is fp32, rounded to nearest,
//               as on the CPU path. tf32x3's small terms are one MMA pair from
//               C = 0, added the same way. Two MMAs for one.
//  fp32         each k-step's MMA from C = 0, its result added to the running
//               fp32 sum (rounded to nearest): one truncation per k-step.
//  tensor_core  the running sum is the MMA's C operand (the usual way): one
//               truncation per MMA.
// The ieee precisions ignore it.
enum class MmaAccumulate : std::int32_t { residual, fp32, tensor_core };

// "residual", "fp32", "tensor-core".
const char* to_string(MmaAccumulate accumulate);

// Step fields: kNone where nothing happens.
inline constexpr std::int32_t kNone = -1;
// GpuStep::reset: set X = 0 and end the task (a sequence start inside a shard
// cuts its transition chain).
inline constexpr std::int32_t kResetZeroStop = -2;

struct GpuStep {
  std::int32_t matrix = kNone;  // index i of A_i (and B_i); kNone: no product
  std::int32_t reset = kNone;   // before the product: initial state of this sequence, or kResetZeroStop
  std::int32_t record = kNone;  // after the product: copy X into record slot `record`
};

enum class GpuInit : std::int32_t { identity, zero, initial_state, slot };

// One task: a contiguous run of steps from an initial X; with `store` != kNone
// the final X goes to store slot `store`.
struct GpuTask {
  std::int32_t first_step = 0;
  std::int32_t num_steps = 0;
  GpuInit init = GpuInit::zero;
  std::int32_t init_index = 0;  // sequence (initial_state) or slot (slot)
  std::int32_t store = kNone;
};

struct GpuProgram {
  std::vector<GpuTask> tasks;
  std::vector<GpuStep> steps;
};

// The four phases of ChainRunner::partitioned (one shard: the unpartitioned
// path, which has only the final walk).
//  chain       N = K: per shard r < R-1, M_r from I over its chunks (A = M_c),
//              stored in slot r of the shard transitions [R-1, K, K].
//  local       N = V: per shard r < R-1, H_r from 0 (A = M_c, B = H_c), stored
//              in slot r of the shard contributions [R-1, K, V].
//  merge       N = V: one task; records S_in(0) .. S_in(R-1) into the received
//              states [R, K, V] (A = M_r, B = H_r).
//  final_walk  N = V: per shard r from received slot r (A = M_c, B = H_c);
//              records every sequence's final state into finals [S, K, V].
struct GpuPrograms {
  std::size_t chunks = 0;
  std::size_t sequences = 0;
  std::size_t shards = 0;
  GpuProgram chain, local, merge, final_walk;
};

// Kernel time of one run, ms, from CUDA events around each phase.
struct GpuPhaseTimes {
  float chain_ms = 0;
  float local_ms = 0;
  float merge_ms = 0;
  float final_ms = 0;
  float total_ms = 0;  // first event to last: the four phases and the gaps between them
};

// Device-side state of the CUDA path for `heads` heads with one shared chunk
// plan. Supports K = 128 and V a multiple of 32 (the gate's K = V = 128); the
// constructor throws std::invalid_argument otherwise. Every CUDA failure throws
// std::runtime_error naming the call and the CUDA error.
class GpuChainRunner {
 public:
  GpuChainRunner(std::size_t dim_k, std::size_t dim_v, std::size_t heads, std::size_t chunks,
                 std::size_t sequences);
  ~GpuChainRunner();
  GpuChainRunner(const GpuChainRunner&) = delete;
  GpuChainRunner& operator=(const GpuChainRunner&) = delete;

  // Copies `count` chunk pairs of `head` into chunks [first, first + count):
  // transitions [count, K, K], contributions [count, K, V], fp32 row-major.
  void upload_pairs(std::size_t head, std::size_t first, std::size_t count, const float* transitions,
                    const float* contributions);
  // Benchmark helper: every chunk of every head becomes a copy of head 0's
  // chunk (c mod pool), by device copies (head 0's chunks [0, pool) must be
  // uploaded). Throws std::invalid_argument if pool is 0 or above the chunks.
  void tile_pairs_from_head0(std::size_t pool);
  // Initial states of `head`: [sequences, K, V] fp32.
  void upload_initial_states(std::size_t head, const float* initial_states);
  // Uploads the step programs (their chunk and sequence counts must match the
  // constructor's) and sizes the per-shard buffers; untimed.
  void set_programs(const GpuPrograms& programs);
  // One run of all four phases with chain and merge in `precision`; the final
  // states are poisoned with NaN first, so a state no step wrote shows.
  GpuPhaseTimes run(GpuPrecision precision, MmaAccumulate accumulate = MmaAccumulate::residual);
  // Final states of every head: [heads, sequences, K, V] fp32 into `out`.
  void download_finals(float* out) const;
  // "NVIDIA H200 (sm_90), driver 13.0" style description of device 0.
  static std::string device_description();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace densefeed::affine_chain::cuda
