// densefeed-gpu-ceilings: measures one GPU's ceilings for `densefeed machine
// calibrate` (machine_ceilings.h) and prints them as one JSON object:
//
//   {"device": NAME, "uuid": "GPU-...", "copy_bytes_per_s": B, "fp32_flops_per_s": F,
//    "bf16_flops_per_s": G, "figures": {...}}
//
// - copy: cudaMemcpyAsync device to device of 1 GiB, 2 bytes counted per byte
//   copied (read + write), best of 20 timed with CUDA events after 3 warm-up
//   copies (the way nvbandwidth and the CUDA samples' bandwidthTest count a
//   device-to-device copy).
// - fp32 and bf16: cublasGemmEx of 8192 x 8192 x 8192 (2 * 8192^3 FLOP),
//   fp32 with CUBLAS_COMPUTE_32F (no TF32), bf16 inputs with fp32
//   accumulation (CUBLAS_COMPUTE_32F), best of 10 after 2 warm-up calls.
// Exits 0 with the JSON on stdout; 2 with a message on stderr when no GPU or
// a CUDA/cuBLAS call fails. Device: CUDA_VISIBLE_DEVICES's first GPU.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "densefeed-gpu-ceilings: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "densefeed-gpu-ceilings: %s: cuBLAS status %d\n", what, static_cast<int>(s));
    std::exit(2);
  }
}

template <class F>
float best_ms(int warmup, int reps, F&& f) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < warmup; ++i) f();
  check(cudaDeviceSynchronize(), "warm-up");
  float best = 1e30f;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(a), "cudaEventRecord");
    f();
    check(cudaEventRecord(b), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    if (ms < best) best = ms;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best;
}

}  // namespace

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "densefeed-gpu-ceilings: no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  char uuid[64];
  const unsigned char* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
                u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);

  const size_t bytes = size_t{1} << 30;
  void *src = nullptr, *dst = nullptr;
  check(cudaMalloc(&src, bytes), "cudaMalloc");
  check(cudaMalloc(&dst, bytes), "cudaMalloc");
  check(cudaMemset(src, 1, bytes), "cudaMemset");
  const float copy_ms = best_ms(3, 20, [&] { check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "copy"); });
  const double copy_bps = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3);
  cudaFree(src);
  cudaFree(dst);

  const int n = 8192;
  const double flop = 2.0 * n * static_cast<double>(n) * n;
  cublasHandle_t h;
  check(cublasCreate(&h), "cublasCreate");
  check(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");  // no TF32 for the fp32 rate
  const float one = 1, zero = 0;
  double rates[2] = {0, 0};
  for (int t = 0; t < 2; ++t) {
    const bool bf16 = t == 1;
    const size_t elem = bf16 ? 2 : 4;
    void *a = nullptr, *b = nullptr, *c = nullptr;
    check(cudaMalloc(&a, elem * n * n), "cudaMalloc");
    check(cudaMalloc(&b, elem * n * n), "cudaMalloc");
    check(cudaMalloc(&c, elem * n * n), "cudaMalloc");
    check(cudaMemset(a, 0, elem * n * n), "cudaMemset");
    check(cudaMemset(b, 0, elem * n * n), "cudaMemset");
    if (bf16) check(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    const cudaDataType type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const float ms = best_ms(2, 10, [&] {
      check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, type, n, b, type, n, &zero, c, type, n,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
    });
    rates[t] = flop / (ms * 1e-3);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
  }
  cublasDestroy(h);
  std::printf(
      "{\"device\": \"%s\", \"uuid\": \"%s\", \"copy_bytes_per_s\": %.6e, \"fp32_flops_per_s\": %.6e, \"bf16_flops_per_s\": %.6e, "
      "\"figures\": {\"copy_bytes\": %zu, \"copy_best_ms\": %.6f, \"gemm_n\": %d}}\n",
      prop.name, uuid, copy_bps, rates[0], rates[1], bytes, static_cast<double>(copy_ms), n);
  return 0;
}
