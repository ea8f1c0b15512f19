// One case of the harness on the GPU (--device cuda): every head's inputs and
// chunk pairs prepared on the CPU exactly as the CPU path prepares them
// (prepare_head), uploaded once, then run by the CUDA path (affine_chain_cuda.h)
// as often as asked.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "affine_chain.h"
#include "affine_chain_cuda.h"

namespace densefeed::affine_chain {

// The GPU precision of a chain/merge precision; throws LayoutError for fp64
// (which runs on the CPU only).
cuda::GpuPrecision to_gpu_precision(Precision precision);

class GpuCase {
 public:
  // Prepares and uploads `heads` heads (head h draws inputs as prepare_head
  // does). `accumulate`: how the TF32 precisions sum their MMA k-steps.
  // Throws LayoutError for fp64, an unpartitioned path on several shards, or
  // K / V the CUDA path does not support (K = 128, V % 32 == 0);
  // std::runtime_error for CUDA failures.
  GpuCase(const InputSpec& spec, const Layout& layout, CpPath path, Precision precision,
          std::size_t heads, cuda::MmaAccumulate accumulate = cuda::MmaAccumulate::residual);

  // One run of the path on every head; kernel time from CUDA events.
  cuda::GpuPhaseTimes run();

  // Final states of the last run, [sequences, heads, K, V] fp32 (the harness's
  // output layout).
  std::vector<float> finals() const;

 private:
  std::size_t heads_, sequences_, kv_;
  cuda::GpuPrecision precision_;
  cuda::MmaAccumulate accumulate_;
  std::unique_ptr<cuda::GpuChainRunner> runner_;
};

}  // namespace densefeed::affine_chain
