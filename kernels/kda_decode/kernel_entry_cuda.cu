// The CUDA half of libkda_decode_kernel.so (kernel_entry.cpp): the problem's
// device pointers into KdaDecodeArgs, one launch on the legacy default stream.
#include <cmath>
#include <cstdio>

#include "kda_decode_kernel.h"
#include "kda_kernels.cuh"

int kda_decode_cuda_launch(densefeed::kda_decode::Version version, const densefeed_kda_decode_problem& p) {
  namespace kd = densefeed::kda_decode;
  if (p.dim_k != static_cast<uint64_t>(kd::kCudaDim) || p.dim_v != static_cast<uint64_t>(kd::kCudaDim)) {
    if (p.error != nullptr && p.error_size > 0) std::snprintf(p.error, p.error_size, "the CUDA kernels are written for K = V = 128");
    return static_cast<int>(cudaErrorInvalidValue);
  }
  kd::KdaDecodeArgs args;
  args.q = reinterpret_cast<const __nv_bfloat16*>(p.q);
  args.k = reinterpret_cast<const __nv_bfloat16*>(p.k);
  args.g_raw = reinterpret_cast<const __nv_bfloat16*>(p.g_raw);
  args.v = reinterpret_cast<const __nv_bfloat16*>(p.v);
  args.beta = reinterpret_cast<const __nv_bfloat16*>(p.beta);
  args.a_log = p.a_log;
  args.dt_bias = p.dt_bias;
  args.state_in = p.state_in;
  args.state_out = p.state_out;
  args.o = p.o;
  args.batch = static_cast<int>(p.batch);
  args.heads = static_cast<int>(p.heads);
  args.scale = 1.0f / std::sqrt(static_cast<float>(p.dim_k));
  const cudaError_t err = kd::launch_kda_decode(version, args, nullptr);
  if (err != cudaSuccess && p.error != nullptr && p.error_size > 0) {
    std::snprintf(p.error, p.error_size, "kernel launch: %s", cudaGetErrorString(err));
  }
  return static_cast<int>(err);
}
