#include "cuda_path.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "kda_kernels.cuh"

namespace densefeed::kda_decode {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw CudaPathError(std::string(what) + ": " + cudaGetErrorString(err));
  }
}

// cudaMalloc'd memory freed on every exit path.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    check(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes), "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  template <typename T>
  void upload(const std::vector<T>& host) {
    check(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class Event {
 public:
  Event() { check(cudaEventCreate(&e_), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace

CudaRunResult run_cuda(Version version, const BatchInputs& in, const StepOptions& options, bool bench,
                       unsigned warmup, unsigned iters) {
  const auto& sp = in.spec;
  if (sp.dim_k != static_cast<std::size_t>(kCudaDim) || sp.dim_v != static_cast<std::size_t>(kCudaDim)) {
    throw std::invalid_argument("the CUDA kernels are written for K = V = 128");
  }
  const std::size_t B = sp.batch, H = sp.heads, K = sp.dim_k, V = sp.dim_v;
  check(cudaSetDevice(0), "cudaSetDevice");
  DeviceBuffer q(in.q.size() * 2), k(in.k.size() * 2), g(in.g_raw.size() * 2), v(in.v.size() * 2),
      beta(in.beta.size() * 2), a_log(in.a_log.size() * 4), dt_bias(in.dt_bias.size() * 4),
      s_in(in.state.size() * 4), s_out(B * H * K * V * 4), o(B * H * V * 4);
  q.upload(in.q);
  k.upload(in.k);
  g.upload(in.g_raw);
  v.upload(in.v);
  beta.upload(in.beta);
  a_log.upload(in.a_log);
  dt_bias.upload(in.dt_bias);
  s_in.upload(in.state);

  KdaDecodeArgs args;
  args.q = q.as<const __nv_bfloat16>();
  args.k = k.as<const __nv_bfloat16>();
  args.g_raw = g.as<const __nv_bfloat16>();
  args.v = v.as<const __nv_bfloat16>();
  args.beta = beta.as<const __nv_bfloat16>();
  args.a_log = a_log.as<const float>();
  args.dt_bias = dt_bias.as<const float>();
  args.state_in = s_in.as<const float>();
  args.state_out = s_out.as<float>();
  args.o = o.as<float>();
  args.batch = static_cast<int>(B);
  args.heads = static_cast<int>(H);
  args.scale = 1.0f / std::sqrt(static_cast<float>(K));
  args.lower_bound = options.lower_bound;

  // 0xFF bytes: every fp32 element a NaN.
  const auto poison = [&] {
    check(cudaMemsetAsync(s_out.as<void>(), 0xFF, s_out.bytes()), "cudaMemsetAsync (poison state)");
    check(cudaMemsetAsync(o.as<void>(), 0xFF, o.bytes()), "cudaMemsetAsync (poison o)");
  };
  CudaRunResult result;
  if (!bench) {
    poison();
    check(launch_kda_decode(version, args, nullptr), "kernel launch");
    check(cudaDeviceSynchronize(), "kernel");
  } else {
    int l2_bytes = 0;
    check(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, 0), "cudaDeviceGetAttribute(L2)");
    DeviceBuffer flush(2 * static_cast<std::size_t>(l2_bytes));
    Event start, stop;
    for (unsigned it = 0; it < warmup + iters; ++it) {
      poison();
      check(cudaMemsetAsync(flush.as<void>(), static_cast<int>(it & 0xFF), flush.bytes()), "cudaMemsetAsync (L2 flush)");
      check(cudaEventRecord(start.get()), "cudaEventRecord");
      check(launch_kda_decode(version, args, nullptr), "kernel launch");
      check(cudaEventRecord(stop.get()), "cudaEventRecord");
      check(cudaEventSynchronize(stop.get()), "kernel");
      float ms = 0.0f;
      check(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime");
      if (it >= warmup) result.samples_ms.push_back(ms);
    }
  }
  result.o.resize(B * H * V);
  result.state.resize(B * H * K * V);
  check(cudaMemcpy(result.o.data(), o.as<void>(), o.bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy o to host");
  check(cudaMemcpy(result.state.data(), s_out.as<void>(), s_out.bytes(), cudaMemcpyDeviceToHost),
        "cudaMemcpy state to host");
  return result;
}

}  // namespace densefeed::kda_decode
