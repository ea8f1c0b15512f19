// The candidate's GPU path of one KDA decode step: uploads the batch, runs v0
// or v3 (kda_kernels.cuh) and brings o and the new state back. Plain C++17
// interface with no CUDA types, so the C++20 harness includes it; built only
// when DENSEFEED_HAVE_CUDA.
#pragma once

#include <stdexcept>
#include <vector>

#include "decode_cpu.h"
#include "inputs.h"

namespace densefeed::kda_decode {

// A CUDA runtime failure (no device, out of memory, a failed launch); the
// message names the call and CUDA's error string.
class CudaPathError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CudaRunResult {
  std::vector<float> o;           // [B, H, V]
  std::vector<float> state;       // [B, H, K, V]
  std::vector<double> samples_ms; // bench: one kernel time per timed iteration
};

// Gate (bench == false): one launch; the device's output buffers are filled
// with NaN bits first, so an element the kernel does not write comes back NaN.
// Bench: warmup + iters launches; before each, outside the timed region, the
// outputs are poisoned again and the L2 cache is flushed (cudaMemsetAsync over
// twice its size), so the state is read from HBM; each launch is timed with
// CUDA events (ms). The outputs are the last iteration's.
// Requires K = V = 128 (kCudaDim); throws std::invalid_argument otherwise and
// CudaPathError on any CUDA failure.
CudaRunResult run_cuda(Version version, const BatchInputs& in, const StepOptions& options, bool bench,
                       unsigned warmup, unsigned iters);

}  // namespace densefeed::kda_decode
