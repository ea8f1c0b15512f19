// A C entry point to the KDA decode kernels for bench/fla_bench.py, which
// loads it with ctypes and times v0 and v3 in the same process, with the same
// code (CUDA events, CUDA graphs, torch.profiler kernel durations), as fla's
// Triton kernel.
#include "kda_kernels.cuh"

namespace kd = densefeed::kda_decode;

// version 0: v0, 3: v3; `args` as kd::KdaDecodeArgs; `stream` a cudaStream_t
// (torch.cuda.Stream.cuda_stream). Returns the cudaError_t of the launch.
extern "C" int kda_decode_launch(int version, const kd::KdaDecodeArgs* args, void* stream) {
  if (args == nullptr || (version != 0 && version != 3)) return static_cast<int>(cudaErrorInvalidValue);
  return static_cast<int>(kd::launch_kda_decode(version == 0 ? kd::Version::v0 : kd::Version::v3, *args,
                                                static_cast<cudaStream_t>(stream)));
}

// sizeof(KdaDecodeArgs), so the ctypes mirror can check its layout.
extern "C" int kda_decode_args_size() { return static_cast<int>(sizeof(kd::KdaDecodeArgs)); }
