// A GPU harness whose kernel's cost is set by an argument, to measure
// densefeed's benchmark decision on a real GPU (A/A and planted slowdowns).
// Speaks the harness protocol:
//   gate mode:  y = 2 x (x drawn from the seed) computed on the GPU after
//               `--work * --slowdown` dependent FMAs per element whose result
//               is multiplied by 0 (so it cannot be dropped, and y stays exact);
//               the reference role computes 2 x on the CPU in float64.
//   bench mode: per iteration, the L2 cache is flushed (a cudaMemsetAsync over
//               a buffer of the device's L2 size) outside the CUDA events that
//               time the kernel; samples.json gets the times in ms, the median
//               SM clock and the iterations seen throttled (NVML, loaded at run
//               time; both omitted without it).
//
//   gpu_spin_harness --role reference|candidate --n N --work W [--slowdown F] --seed S --out DIR
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gpu_spin_output.h"

namespace {

#define CHECK_CUDA(call)                                                                                   \
  do {                                                                                                     \
    cudaError_t err_ = (call);                                                                             \
    if (err_ != cudaSuccess) {                                                                             \
      std::fprintf(stderr, "gpu_spin_harness: CUDA error %s at line %d\n", cudaGetErrorString(err_), __LINE__); \
      std::exit(3);                                                                                        \
    }                                                                                                      \
  } while (0)

__global__ void spin(const float* x, float* y, std::size_t n, int work) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float acc = x[i];
  for (int k = 0; k < work; ++k) acc = fmaf(acc, 0.5f, x[i]);  // bounded, dependent chain
  y[i] = 2.0f * x[i] + 0.0f * acc;
}

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback = "") {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return fallback;
}

// NVML through dlopen: the clock and throttle reasons, when the driver has it.
struct Nvml {
  void* lib = nullptr;
  void* device = nullptr;
  int (*clock)(void*, int, unsigned*) = nullptr;
  int (*reasons)(void*, unsigned long long*) = nullptr;
  Nvml() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    auto handle = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    clock = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    reasons = reinterpret_cast<int (*)(void*, unsigned long long*)>(dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    int ordinal = 0;
    cudaGetDevice(&ordinal);
    if (!init || !handle || !clock || init() != 0 || handle(static_cast<unsigned>(ordinal), &device) != 0) device = nullptr;
  }
  bool ok() const { return device != nullptr; }
  double sm_clock_mhz() const {
    unsigned mhz = 0;
    return clock(device, 1 /* NVML_CLOCK_SM */, &mhz) == 0 ? mhz : 0;
  }
  // Any reason but "GPU idle" (0x1) and "applications clocks setting" (0x2).
  bool throttled() const {
    unsigned long long r = 0;
    return reasons && reasons(device, &r) == 0 && (r & ~0x3ull) != 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const std::string role = arg(argc, argv, "--role");
  const std::size_t n = std::stoull(arg(argc, argv, "--n", "16777216"));
  const int work = static_cast<int>(std::lround(std::stod(arg(argc, argv, "--work", "64")) *
                                                std::stod(arg(argc, argv, "--slowdown", "1"))));
  const std::uint64_t seed = std::stoull(arg(argc, argv, "--seed", "1"));
  const std::filesystem::path out = arg(argc, argv, "--out");
  const char* mode_env = std::getenv("DENSEFEED_MODE");
  const std::string mode = mode_env ? mode_env : "gate";

  std::vector<float> x(n);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  if (role == "reference") {
    std::vector<double> y(n);
    for (std::size_t i = 0; i < n; ++i) y[i] = 2.0 * static_cast<double>(x[i]);
    write_vector_npy((out / "y.npy").string(), y.data(), n);
    return 0;
  }

  float *dx, *dy;
  CHECK_CUDA(cudaMalloc(&dx, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dy, n * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dy, 0xFF, n * sizeof(float)));  // poison: NaN until written
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  if (mode == "gate") {
    spin<<<blocks, 256>>>(dx, dy, n, work);
    CHECK_CUDA(cudaGetLastError());
    std::vector<float> y(n);
    CHECK_CUDA(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    write_vector_npy((out / "y.npy").string(), y.data(), n);
    return 0;
  }
  if (mode != "bench") {
    std::fprintf(stderr, "gpu_spin_harness: DENSEFEED_MODE=%s is not supported (gate or bench)\n", mode.c_str());
    return 2;
  }
  const int warmup = std::max(1, std::atoi(std::getenv("DENSEFEED_WARMUP") ? std::getenv("DENSEFEED_WARMUP") : "1"));
  const int iters = std::max(1, std::atoi(std::getenv("DENSEFEED_ITERS") ? std::getenv("DENSEFEED_ITERS") : "10"));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  void* flush = nullptr;
  CHECK_CUDA(cudaMalloc(&flush, static_cast<std::size_t>(prop.l2CacheSize)));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  const Nvml nvml;
  std::vector<double> samples, clocks;
  std::size_t throttled = 0;
  for (int k = -warmup; k < iters; ++k) {
    CHECK_CUDA(cudaMemsetAsync(flush, k & 0xFF, static_cast<std::size_t>(prop.l2CacheSize)));
    CHECK_CUDA(cudaEventRecord(start));
    spin<<<blocks, 256>>>(dx, dy, n, work);
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    CHECK_CUDA(cudaGetLastError());
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (k < 0) continue;
    samples.push_back(ms);
    if (nvml.ok()) {
      clocks.push_back(nvml.sm_clock_mhz());
      throttled += nvml.throttled();
    }
  }
  std::ofstream s(out / "samples.json");
  s << "{\"unit\": \"ms\", \"samples\": [";
  for (std::size_t i = 0; i < samples.size(); ++i) s << (i ? ", " : "") << samples[i];
  s << "]";
  if (!clocks.empty()) {
    std::sort(clocks.begin(), clocks.end());
    s << ", \"sm_clock_mhz\": " << clocks[clocks.size() / 2] << ", \"throttled\": " << throttled;
  }
  s << ", \"device\": \"" << prop.name << "\"}\n";
  std::vector<float> y(n);  // the last timed iteration's output, checked by densefeed
  CHECK_CUDA(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  write_vector_npy((out / "y.npy").string(), y.data(), n);
  return 0;
}
