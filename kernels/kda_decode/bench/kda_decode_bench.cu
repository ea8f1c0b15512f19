// kda_decode_bench: kernel times of the KDA decode step's v0 and v3 on one GPU,
// beside a device-to-device copy of the same state bytes and an empty kernel,
// all in the same run (issue 6, "Targets"). Not a harness: it prints a table
// and writes JSON for kernels/RESULTS.md; correctness is the gate's job
// (gates/kda-decode.yaml), this only checks that v0 and v3 agree on the GPU.
//
//   kda_decode_bench [--batches 1,8,32,128,512] [--heads 64] [--json PATH]
//
// Method (METHOD.md): inputs are random (never zeros), generated on the GPU.
// Every batch size gets R distinct sets of inputs and states, R chosen so the
// sets together are >= 1 GiB (>= 2 sets), and launches rotate over them, so
// the state comes from HBM, not L2 (50 MB on the H200). Two timings per
// kernel, median over repetitions:
//   event: CUDA events around one launch (includes the launch latency the GPU
//          sees; at small batches this is mostly launch);
//   graph: one CUDA graph of N launches over the rotating sets, events around
//          each replay, time / N: the per-launch cost inside a graph, the
//          figure to set beside an empty kernel's at B = 1 and 8.
// The copy is cudaMemcpyAsync D2D of exactly the state's bytes between two of
// the same rotating buffers, timed the same two ways; bandwidth counts bytes
// read plus bytes written.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kda_kernels.cuh"

namespace {

namespace kd = densefeed::kda_decode;

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "kda_decode_bench: %s at %s:%d: %s\n", #call, __FILE__, __LINE__,      \
                   cudaGetErrorString(err_));                                                      \
      std::exit(3);                                                                                \
    }                                                                                              \
  } while (0)

constexpr int kDim = kd::kCudaDim;
constexpr std::size_t kRotateBytes = std::size_t{1} << 30;

__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [lo, hi) from (seed, i): splitmix64, as inputs.cpp draws them.
__device__ __forceinline__ float uniform(unsigned long long seed, unsigned long long i, float lo, float hi) {
  const unsigned long long z = mix64(seed + (i + 1) * 0x9E3779B97F4A7C15ull);
  return lo + (hi - lo) * static_cast<float>((z >> 40) * (1.0 / 16777216.0));
}

__global__ void fill_f32(float* x, std::size_t n, unsigned long long seed, float lo, float hi) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    x[i] = uniform(seed, i, lo, hi);
  }
}

__global__ void fill_bf16(__nv_bfloat16* x, std::size_t n, unsigned long long seed, float lo, float hi) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    x[i] = __float2bfloat16_rn(uniform(seed, i, lo, hi));
  }
}

__global__ void log_f32(float* x, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = logf(x[i]);
}

__global__ void empty_kernel() {}

// max |a - b| over n floats, into *out (as an atomicMax on the bits of a
// non-negative float, which orders like the float).
__global__ void max_abs_diff(const float* a, const float* b, std::size_t n, unsigned* out) {
  float m = 0.0f;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float d = fabsf(a[i] - b[i]);
    m = (d != d) ? __int_as_float(0x7f800000) : fmaxf(m, d);
  }
  atomicMax(out, __float_as_uint(m));
}

struct Set {
  __nv_bfloat16 *q, *k, *g, *v, *beta;
  float *state_in, *state_out, *o;
};

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  const std::size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

double minimum(const std::vector<double>& x) { return *std::min_element(x.begin(), x.end()); }

struct Timing {
  double event_us = 0, event_min_us = 0, graph_us = 0, graph_min_us = 0;
};

// `launch(i)` enqueues launch i (on set i % R) on `stream`.
template <typename Launch>
Timing time_launches(Launch launch, int reps, int graph_n, int graph_reps, cudaStream_t stream) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch(i);  // warm-up
  CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ev;
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(a, stream));
    launch(i);
    CHECK(cudaEventRecord(b, stream));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    ev.push_back(1000.0 * ms);
  }
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < graph_n; ++i) launch(i);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, stream));  // warm-up
  CHECK(cudaStreamSynchronize(stream));
  std::vector<double> gr;
  for (int i = 0; i < graph_reps; ++i) {
    CHECK(cudaEventRecord(a, stream));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaEventRecord(b, stream));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    gr.push_back(1000.0 * ms / graph_n);
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return {median(ev), minimum(ev), median(gr), minimum(gr)};
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return fallback;
}

std::string json_timing(const Timing& t) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "{\"event_us\": %.3f, \"event_min_us\": %.3f, \"graph_us\": %.3f, \"graph_min_us\": %.3f}",
                t.event_us, t.event_min_us, t.graph_us, t.graph_min_us);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<int> batches = parse_list(arg(argc, argv, "--batches", "1,8,32,128,512"));
  const int H = std::stoi(arg(argc, argv, "--heads", "64"));
  const std::string json_path = arg(argc, argv, "--json", "");
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0, runtime = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  std::printf("device %s, %d SMs, L2 %d MB, driver API %d, runtime %d\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20, driver, runtime);
  for (kd::Version ver : {kd::Version::v0, kd::Version::v3}) {
    std::printf("%s: %d threads/block at B = 1 and %d at B = 8 (H = %d), %d blocks/SM resident (one-block v3)\n",
                std::string(kd::to_string(ver)).c_str(), kd::kda_decode_threads(ver, 1, H),
                kd::kda_decode_threads(ver, 8, H), H, kd::kda_decode_blocks_per_sm(ver));
  }
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // A large copy: the device's copy ceiling in this run.
  double big_copy_gbs = 0;
  {
    const std::size_t bytes = std::size_t{2} << 30;
    void *x, *y;
    CHECK(cudaMalloc(&x, bytes));
    CHECK(cudaMalloc(&y, bytes));
    CHECK(cudaMemset(x, 1, bytes));
    const Timing t = time_launches(
        [&](int) { CHECK(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, stream)); }, 10, 2, 5, stream);
    big_copy_gbs = 2.0 * bytes / (t.event_us * 1e-6) / 1e9;
    std::printf("D2D copy of 2 GiB: %.1f us, %.0f GB/s (read + write)\n", t.event_us, big_copy_gbs);
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
  }

  float *a_log, *dt_bias;
  CHECK(cudaMalloc(&a_log, H * sizeof(float)));
  CHECK(cudaMalloc(&dt_bias, static_cast<std::size_t>(H) * kDim * sizeof(float)));
  fill_f32<<<1, 64>>>(a_log, H, 7, 1.0f, 16.0f);
  log_f32<<<1, 64>>>(a_log, H);
  fill_f32<<<64, 128>>>(dt_bias, static_cast<std::size_t>(H) * kDim, 8, -1.0f, 1.0f);
  CHECK(cudaGetLastError());

  std::ostringstream json;
  json << "{\"device\": \"" << prop.name << "\", \"sms\": " << prop.multiProcessorCount
       << ", \"driver_api\": " << driver << ", \"runtime\": " << runtime
       << ", \"big_copy_gbs\": " << big_copy_gbs << ", \"batches\": [";
  std::printf("\n%5s %4s %9s | %9s %9s | %9s %9s | %9s %9s | %9s %9s | %7s %7s | %7s %9s %9s %6s %6s\n", "B", "R", "state MB",
              "v0 ev", "v0 graph", "v3 ev", "v3 graph", "copy ev", "copy gr", "empty ev", "empty gr", "v3/v0", "v3/v0 g",
              "diff", "v3 GB/s", "copy GB/s", "v3/cp", "v3/cp g");
  bool first = true;
  for (const int B : batches) {
    const std::size_t bh = static_cast<std::size_t>(B) * H;
    const std::size_t state_n = bh * kDim * kDim;
    const std::size_t state_bytes = state_n * sizeof(float);
    const int R = static_cast<int>(std::min<std::size_t>(64, std::max<std::size_t>(2, (kRotateBytes + 2 * state_bytes - 1) / (2 * state_bytes))));
    std::vector<Set> sets(R);
    for (int r = 0; r < R; ++r) {
      Set& s = sets[r];
      CHECK(cudaMalloc(&s.q, bh * kDim * 2));
      CHECK(cudaMalloc(&s.k, bh * kDim * 2));
      CHECK(cudaMalloc(&s.g, bh * kDim * 2));
      CHECK(cudaMalloc(&s.v, bh * kDim * 2));
      CHECK(cudaMalloc(&s.beta, bh * 2));
      CHECK(cudaMalloc(&s.state_in, state_bytes));
      CHECK(cudaMalloc(&s.state_out, state_bytes));
      CHECK(cudaMalloc(&s.o, bh * kDim * sizeof(float)));
      const unsigned long long seed = 1000ull * B + 10ull * r;
      fill_bf16<<<256, 256>>>(s.q, bh * kDim, seed + 1, -2.0f, 2.0f);
      fill_bf16<<<256, 256>>>(s.k, bh * kDim, seed + 2, -2.0f, 2.0f);
      fill_bf16<<<256, 256>>>(s.g, bh * kDim, seed + 3, -2.0f, 2.0f);
      fill_bf16<<<256, 256>>>(s.v, bh * kDim, seed + 4, -2.0f, 2.0f);
      fill_bf16<<<256, 256>>>(s.beta, bh, seed + 5, 0.05f, 0.95f);
      fill_f32<<<1024, 256>>>(s.state_in, state_n, seed + 6, -1.0f, 1.0f);
      CHECK(cudaMemset(s.state_out, 0xFF, state_bytes));
      CHECK(cudaGetLastError());
    }
    CHECK(cudaDeviceSynchronize());
    int forced_split = 0;  // v3's blocks per (b, h) in args_of; 0: its own choice
    const auto args_of = [&](int i) {
      const Set& s = sets[i % R];
      kd::KdaDecodeArgs a;
      a.q = s.q; a.k = s.k; a.g_raw = s.g; a.v = s.v; a.beta = s.beta;
      a.a_log = a_log; a.dt_bias = dt_bias;
      a.state_in = s.state_in; a.state_out = s.state_out; a.o = s.o;
      a.batch = B; a.heads = H;
      a.v3_split = forced_split;
      return a;
    };
    // v0 and v3 on set 0 must agree to fp32 rounding.
    float* ref_state;
    float* ref_o;
    CHECK(cudaMalloc(&ref_state, state_bytes));
    CHECK(cudaMalloc(&ref_o, bh * kDim * sizeof(float)));
    CHECK(kd::launch_kda_decode(kd::Version::v0, args_of(0), stream));
    CHECK(cudaMemcpyAsync(ref_state, sets[0].state_out, state_bytes, cudaMemcpyDeviceToDevice, stream));
    CHECK(cudaMemcpyAsync(ref_o, sets[0].o, bh * kDim * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    CHECK(cudaMemsetAsync(sets[0].state_out, 0xFF, state_bytes, stream));
    CHECK(cudaMemsetAsync(sets[0].o, 0xFF, bh * kDim * sizeof(float), stream));
    CHECK(kd::launch_kda_decode(kd::Version::v3, args_of(0), stream));
    unsigned* d_diff;
    CHECK(cudaMalloc(&d_diff, 2 * sizeof(unsigned)));
    CHECK(cudaMemsetAsync(d_diff, 0, 2 * sizeof(unsigned), stream));
    max_abs_diff<<<1024, 256, 0, stream>>>(ref_state, sets[0].state_out, state_n, d_diff);
    max_abs_diff<<<64, 256, 0, stream>>>(ref_o, sets[0].o, bh * kDim, d_diff + 1);
    unsigned h_diff[2];
    CHECK(cudaMemcpyAsync(h_diff, d_diff, sizeof h_diff, cudaMemcpyDeviceToHost, stream));
    CHECK(cudaStreamSynchronize(stream));
    float diff_state, diff_o;
    std::memcpy(&diff_state, &h_diff[0], 4);
    std::memcpy(&diff_o, &h_diff[1], 4);
    CHECK(cudaFree(d_diff));
    CHECK(cudaFree(ref_state));
    CHECK(cudaFree(ref_o));

    const int reps = B <= 8 ? 200 : B <= 128 ? 60 : 20;
    const int graph_n = std::max(R, 8);
    const int graph_reps = B <= 128 ? 30 : 10;
    const Timing v0 = time_launches([&](int i) { CHECK(kd::launch_kda_decode(kd::Version::v0, args_of(i), stream)); },
                                    reps, graph_n, graph_reps, stream);
    const Timing v3 = time_launches([&](int i) { CHECK(kd::launch_kda_decode(kd::Version::v3, args_of(i), stream)); },
                                    reps, graph_n, graph_reps, stream);
    const Timing copy = time_launches(
        [&](int i) {
          const Set& s = sets[i % R];
          CHECK(cudaMemcpyAsync(s.state_out, s.state_in, state_bytes, cudaMemcpyDeviceToDevice, stream));
        },
        reps, graph_n, graph_reps, stream);
    // Where v3 splits (B * H below the SM count), also the one-block-per-(b, h)
    // kernel, so the split's effect is measured, not assumed.
    Timing v3_one{};
    const bool splits = kd::kda_decode_blocks(kd::Version::v3, B, H) > static_cast<long long>(bh);
    if (splits) {
      forced_split = 1;
      v3_one = time_launches([&](int i) { CHECK(kd::launch_kda_decode(kd::Version::v3, args_of(i), stream)); },
                             reps, graph_n, graph_reps, stream);
      forced_split = 0;
    }
    const Timing empty = time_launches([&](int) { empty_kernel<<<1, 128, 0, stream>>>(); CHECK(cudaGetLastError()); },
                                       reps, graph_n, graph_reps, stream);
    // Fewest bytes the step must move: state read + written, q k g v beta (bf16)
    // and o (fp32) per (b, h), A_log and dt_bias per head.
    const double bytes = 2.0 * state_bytes + bh * (4.0 * kDim * 2 + 2 + kDim * 4.0) + H * (4.0 + kDim * 4.0);
    const double v3_gbs = bytes / (v3.event_us * 1e-6) / 1e9;
    const double copy_gbs = 2.0 * state_bytes / (copy.event_us * 1e-6) / 1e9;
    const double v3_gbs_graph = bytes / (v3.graph_us * 1e-6) / 1e9;
    const double copy_gbs_graph = 2.0 * state_bytes / (copy.graph_us * 1e-6) / 1e9;
    std::printf("%5d %4d %9.1f | %9.2f %9.2f | %9.2f %9.2f | %9.2f %9.2f | %9.2f %9.2f | %7.3f %7.3f | %7.1e %9.0f %9.0f %6.3f %6.3f\n",
                B, R, state_bytes / 1e6, v0.event_us, v0.graph_us, v3.event_us, v3.graph_us, copy.event_us,
                copy.graph_us, empty.event_us, empty.graph_us, v0.event_us / v3.event_us, v0.graph_us / v3.graph_us,
                std::max(diff_state, diff_o), v3_gbs, copy_gbs, v3_gbs / copy_gbs, v3_gbs_graph / copy_gbs_graph);
    if (splits) {
      std::printf("      B = %d: v3 splits each (b, h) over 2 blocks; forced to one block per (b, h): ev %.2f us, graph %.2f us\n",
                  B, v3_one.event_us, v3_one.graph_us);
    }
    json << (first ? "" : ", ") << "{\"batch\": " << B << ", \"heads\": " << H << ", \"sets\": " << R
         << ", \"graph_launches\": " << graph_n << ", \"state_bytes\": " << state_bytes << ", \"bytes_moved\": " << bytes
         << ", \"v0\": " << json_timing(v0) << ", \"v3\": " << json_timing(v3) << ", \"copy\": " << json_timing(copy)
         << ", \"empty\": " << json_timing(empty) << ", \"v3_blocks\": " << kd::kda_decode_blocks(kd::Version::v3, B, H)
         << ", \"v3_one_block_per_head\": " << (splits ? json_timing(v3_one) : std::string("null")) << ", \"v0_v3_max_abs_diff_state\": " << diff_state
         << ", \"v0_v3_max_abs_diff_o\": " << diff_o << ", \"v3_gbs\": " << v3_gbs << ", \"copy_gbs\": " << copy_gbs
         << ", \"v3_gbs_graph\": " << v3_gbs_graph << ", \"copy_gbs_graph\": " << copy_gbs_graph
         << "}";
    first = false;
    for (Set& s : sets) {
      CHECK(cudaFree(s.q)); CHECK(cudaFree(s.k)); CHECK(cudaFree(s.g)); CHECK(cudaFree(s.v)); CHECK(cudaFree(s.beta));
      CHECK(cudaFree(s.state_in)); CHECK(cudaFree(s.state_out)); CHECK(cudaFree(s.o));
    }
  }
  json << "]}\n";
  std::printf("\ncolumns: times in us (median); ev = CUDA events around one launch, gr = per launch inside a CUDA graph;\n"
              "v3/v0 = v0 time / v3 time (speedup of v3); diff = max |v0 - v3| over o and state on the GPU;\n"
              "v3 GB/s = fewest bytes the step moves / v3 event time; copy GB/s = 2 x state bytes / copy event time;\n"
              "v3/cp = their ratio (events), v3/cp g = the same ratio from the graph times\n");
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << json.str();
  }
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
