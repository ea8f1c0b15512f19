// Kernels and device buffers of the CUDA path (affine_chain_cuda.h).
//
// One kernel, step_kernel<P, W>, runs every phase: a thread block owns a
// [K = 128, W] column slice of X in shared memory and walks its task's steps,
// X <- A_i X (+ B_i). A_i (128 x 128 fp32, 64 KiB) is staged into shared
// memory with cp.async one step ahead (double buffer), since it does not depend
// on X; the product runs
//  - on the tensor cores (P = tf32, tf32_rn, tf32x3): mma.sync m16n8k8 .tf32
//    with fp32 accumulation, warp w owning rows [16 w, 16 w + 16) and all W
//    columns (fragment layouts: PTX ISA, "Matrix Fragments for mma.m16n8k8");
//  - on the fp32 cores (P = ieee, ieee_fma), each thread a TM x TN tile.
// Shared memory: 2 A tiles (2 x 128 x 132 floats) + X (128 x (W + 8) floats):
// 152 KiB (W = 32) .. 200 KiB (W = 128), one block per SM.
#include "affine_chain_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace densefeed::affine_chain::cuda {
namespace {

constexpr int kK = 128;           // rows of every state and transition
constexpr int kThreads = 256;     // 8 warps: one 16-row slab of A each
constexpr int kAStride = kK + 4;  // floats; A fragment reads hit banks 4 g + t: conflict-free
constexpr std::size_t kATileFloats = static_cast<std::size_t>(kK) * kAStride;

// X row stride in floats: W + 8 is 8 mod 32, so B fragment reads (rows t,
// columns g) hit banks 8 t + g: conflict-free.
template <int W>
__host__ __device__ constexpr int x_stride() {
  return W + 8;
}

template <int W>
constexpr std::size_t smem_bytes() {
  return (2 * kATileFloats + static_cast<std::size_t>(kK) * x_stride<W>()) * sizeof(float);
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorName(err) + " (" +
                             cudaGetErrorString(err) + ")");
  }
}

// Device pointers and per-head strides (floats) of one phase.
struct KernelArgs {
  const GpuStep* steps;
  const GpuTask* tasks;
  int n;  // columns of X and of every B_i / state (K or V)
  const float* a;
  std::size_t a_head;  // A_i = a + head * a_head + i * K * K
  const float* b;      // B_i = b + head * b_head + i * K * n; null: no add
  std::size_t b_head;
  const float* s0;  // initial states [S, K, n]
  std::size_t s0_head;
  const float* slots;  // init slots [*, K, n]
  std::size_t slots_head;
  float* record;  // record slots [*, K, n]
  std::size_t record_head;
  float* store;  // store slots [*, K, n]
  std::size_t store_head;
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// A_i (row-major 128 x 128) into a padded shared tile; 16 x 16 B per thread.
__device__ __forceinline__ void load_a_async(float* tile, const float* a) {
  for (int idx = threadIdx.x; idx < kK * kK / 4; idx += kThreads) {
    const int row = idx / (kK / 4), c4 = idx % (kK / 4);
    cp_async16(tile + row * kAStride + c4 * 4, a + row * kK + c4 * 4);
  }
}

// X slice <- rows of a [K, n] global matrix at columns [col0, col0 + W).
template <int W>
__device__ __forceinline__ void load_x(float* x, const float* g, int n, int col0) {
  constexpr int XS = x_stride<W>();
  for (int idx = threadIdx.x; idx < kK * W / 4; idx += kThreads) {
    const int row = idx / (W / 4), c4 = idx % (W / 4);
    *reinterpret_cast<float4*>(x + row * XS + c4 * 4) =
        *reinterpret_cast<const float4*>(g + static_cast<std::size_t>(row) * n + col0 + c4 * 4);
  }
}

template <int W>
__device__ __forceinline__ void store_x(const float* x, float* g, int n, int col0) {
  constexpr int XS = x_stride<W>();
  for (int idx = threadIdx.x; idx < kK * W / 4; idx += kThreads) {
    const int row = idx / (W / 4), c4 = idx % (W / 4);
    *reinterpret_cast<float4*>(g + static_cast<std::size_t>(row) * n + col0 + c4 * 4) =
        *reinterpret_cast<const float4*>(x + row * XS + c4 * 4);
  }
}

// X slice <- columns [col0, col0 + W) of I (identity) or of 0.
template <int W>
__device__ __forceinline__ void fill_x(float* x, int col0, bool identity) {
  constexpr int XS = x_stride<W>();
  for (int idx = threadIdx.x; idx < kK * W; idx += kThreads) {
    const int row = idx / W, col = idx % W;
    x[row * XS + col] = (identity && row == col0 + col) ? 1.0f : 0.0f;
  }
}

__device__ __forceinline__ std::uint32_t cvt_rna_tf32(float x) {
  std::uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// The operand as the tensor core gets it (hi), and for tf32x3 the low part.
// tf32x3 mirrors tf32x3_split in tf32.h: lo = 0 when hi is not finite.
template <GpuPrecision P>
__device__ __forceinline__ void split(float x, std::uint32_t& hi, std::uint32_t& lo) {
  if constexpr (P == GpuPrecision::tf32) {
    hi = __float_as_uint(x);  // unconverted: the point of this precision
  } else if constexpr (P == GpuPrecision::tf32_rn) {
    hi = cvt_rna_tf32(x);
  } else {
    hi = cvt_rna_tf32(x);
    const float h = __uint_as_float(hi);
    lo = (__float_as_uint(h) & 0x7FFFFFFFu) < 0x7F800000u ? cvt_rna_tf32(__fsub_rn(x, h)) : 0u;
  }
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const std::uint32_t (&a)[4],
                                         const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// X <- A X (+ B slice) on the tensor cores, the k-steps summed as S says
// (MmaAccumulate). Leaves X written and synchronised.
template <GpuPrecision P, int W, MmaAccumulate S>
__device__ __forceinline__ void product_mma(const float* a, float* x, const float* b, int n,
                                            int col0) {
  constexpr int XS = x_stride<W>();
  constexpr int NT = W / 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const int r = warp * 16 + g;
  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
#pragma unroll 2
  for (int kk = 0; kk < kK / 8; ++kk) {
    const float* ar = a + r * kAStride + kk * 8 + t;
    const float af[4] = {ar[0], ar[8 * kAStride], ar[4], ar[8 * kAStride + 4]};
    std::uint32_t ahi[4], alo[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) split<P>(af[i], ahi[i], alo[i]);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const float* xb = x + (kk * 8 + t) * XS + nt * 8 + g;
      std::uint32_t bhi[2], blo[2];
      split<P>(xb[0], bhi[0], blo[0]);
      split<P>(xb[4 * XS], bhi[1], blo[1]);
      if constexpr (S == MmaAccumulate::tensor_core) {
        if constexpr (P == GpuPrecision::tf32x3) {
          // Small terms first, as on the CPU path (affine_chain.cpp).
          mma_tf32(acc[nt], ahi, blo);
          mma_tf32(acc[nt], alo, bhi);
        }
        mma_tf32(acc[nt], ahi, bhi);
      } else {
        if constexpr (P == GpuPrecision::tf32x3) {
          float small[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          mma_tf32(small, ahi, blo);
          mma_tf32(small, alo, bhi);
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[nt][i] = __fadd_rn(acc[nt][i], small[i]);
        }
        float big[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        mma_tf32(big, ahi, bhi);
        if constexpr (S == MmaAccumulate::residual) {
          float res[4] = {-big[0], -big[1], -big[2], -big[3]};
          mma_tf32(res, ahi, bhi);
#pragma unroll
          for (int i = 0; i < 4; ++i) big[i] = __fadd_rn(big[i], res[i]);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][i] = __fadd_rn(acc[nt][i], big[i]);
      }
    }
  }
  __syncthreads();  // every warp has read X
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int col = nt * 8 + 2 * t;
    float v[4] = {acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]};
    if (b != nullptr) {
      const float2 b0 = *reinterpret_cast<const float2*>(b + static_cast<std::size_t>(r) * n + col0 + col);
      const float2 b1 =
          *reinterpret_cast<const float2*>(b + static_cast<std::size_t>(r + 8) * n + col0 + col);
      v[0] = __fadd_rn(v[0], b0.x);
      v[1] = __fadd_rn(v[1], b0.y);
      v[2] = __fadd_rn(v[2], b1.x);
      v[3] = __fadd_rn(v[3], b1.y);
    }
    *reinterpret_cast<float2*>(x + r * XS + col) = make_float2(v[0], v[1]);
    *reinterpret_cast<float2*>(x + (r + 8) * XS + col) = make_float2(v[2], v[3]);
  }
  __syncthreads();
}

// X <- A X (+ B slice) on the fp32 cores: each output's sum from 0 in
// ascending k, the product rounded then added (ieee: the CPU path's operations
// in its order, so equal bit for bit) or fused (ieee_fma).
template <GpuPrecision P, int W>
__device__ __forceinline__ void product_simt(const float* a, float* x, const float* b, int n,
                                             int col0) {
  constexpr int XS = x_stride<W>();
  constexpr int TN = W >= 64 ? 8 : 4;
  constexpr int CG = W / TN;          // column groups
  constexpr int RG = kThreads / CG;   // row groups
  constexpr int TM = kK / RG;
  const int tx = threadIdx.x % CG, ty = threadIdx.x / CG;
  float acc[TM][TN];
#pragma unroll
  for (int m = 0; m < TM; ++m)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[m][j] = 0.0f;
#pragma unroll 4
  for (int p = 0; p < kK; ++p) {
    float av[TM], bv[TN];
#pragma unroll
    for (int m = 0; m < TM; ++m) av[m] = a[(ty + RG * m) * kAStride + p];
#pragma unroll
    for (int j = 0; j < TN; ++j) bv[j] = x[p * XS + tx + CG * j];
#pragma unroll
    for (int m = 0; m < TM; ++m)
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        if constexpr (P == GpuPrecision::ieee_fma) {
          acc[m][j] = __fmaf_rn(av[m], bv[j], acc[m][j]);
        } else {
          acc[m][j] = __fadd_rn(acc[m][j], __fmul_rn(av[m], bv[j]));
        }
      }
  }
  __syncthreads();
#pragma unroll
  for (int m = 0; m < TM; ++m) {
    const int row = ty + RG * m;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int col = tx + CG * j;
      float v = acc[m][j];
      if (b != nullptr) v = __fadd_rn(v, b[static_cast<std::size_t>(row) * n + col0 + col]);
      x[row * XS + col] = v;
    }
  }
  __syncthreads();
}

// grid (slices = n / W, tasks, heads), kThreads threads, smem_bytes<W>().
template <GpuPrecision P, int W, MmaAccumulate S>
__global__ void __launch_bounds__(kThreads, 1) step_kernel(KernelArgs args) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  float* const a_tiles = smem;  // tile j at a_tiles + j * kATileFloats
  float* const x = smem + 2 * kATileFloats;
  const int col0 = blockIdx.x * W;
  const GpuTask task = args.tasks[blockIdx.y];
  const std::size_t head = blockIdx.z;
  const std::size_t kk = static_cast<std::size_t>(kK) * kK;
  const std::size_t kn = static_cast<std::size_t>(kK) * args.n;
  const GpuStep* steps = args.steps + task.first_step;

  switch (task.init) {
    case GpuInit::identity: fill_x<W>(x, col0, true); break;
    case GpuInit::zero: fill_x<W>(x, col0, false); break;
    case GpuInit::initial_state:
      load_x<W>(x, args.s0 + head * args.s0_head + task.init_index * kn, args.n, col0);
      break;
    case GpuInit::slot:
      load_x<W>(x, args.slots + head * args.slots_head + task.init_index * kn, args.n, col0);
      break;
  }
  const float* a_head = args.a + head * args.a_head;
  if (task.num_steps > 0 && steps[0].matrix >= 0) load_a_async(a_tiles, a_head + steps[0].matrix * kk);
  cp_async_commit();
  __syncthreads();
  for (int s = 0; s < task.num_steps; ++s) {
    const GpuStep step = steps[s];
    // The buffer of step s + 1 was last read in step s - 1, which ended in a barrier.
    if (s + 1 < task.num_steps && steps[s + 1].matrix >= 0) {
      load_a_async(a_tiles + ((s + 1) & 1) * kATileFloats, a_head + steps[s + 1].matrix * kk);
    }
    cp_async_commit();
    if (step.reset == kResetZeroStop) {
      fill_x<W>(x, col0, false);
      __syncthreads();
      break;
    }
    if (step.reset >= 0) {
      load_x<W>(x, args.s0 + head * args.s0_head + step.reset * kn, args.n, col0);
    }
    if (step.matrix >= 0) {
      cp_async_wait<1>();  // this thread's copies of step s's tile landed
      __syncthreads();     // everyone's, and any reset of X
      const float* b = args.b == nullptr ? nullptr : args.b + head * args.b_head + step.matrix * kn;
      if constexpr (P == GpuPrecision::ieee || P == GpuPrecision::ieee_fma) {
        product_simt<P, W>(a_tiles + (s & 1) * kATileFloats, x, b, args.n, col0);
      } else {
        product_mma<P, W, S>(a_tiles + (s & 1) * kATileFloats, x, b, args.n, col0);
      }
    } else {
      __syncthreads();
    }
    if (step.record >= 0) {
      store_x<W>(x, args.record + head * args.record_head + step.record * kn, args.n, col0);
    }
    __syncthreads();  // X is read by the record before the next step writes it
  }
  cp_async_wait<0>();
  if (task.store >= 0) {
    store_x<W>(x, args.store + head * args.store_head + task.store * kn, args.n, col0);
  }
}

template <GpuPrecision P, int W, MmaAccumulate S>
void launch_w(const KernelArgs& args, int tasks, int heads, cudaStream_t stream) {
  constexpr std::size_t smem = smem_bytes<W>();
  check(cudaFuncSetAttribute(step_kernel<P, W, S>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute(max dynamic shared memory)");
  const dim3 grid(args.n / W, tasks, heads);
  step_kernel<P, W, S><<<grid, kThreads, smem, stream>>>(args);
  check(cudaGetLastError(), "step_kernel launch");
}

template <GpuPrecision P, MmaAccumulate S>
void launch_p(const KernelArgs& args, int tasks, int heads, int sms, cudaStream_t stream) {
  // Slice width: one block per SM (shared memory), so a launch takes
  // ceil(blocks / SMs) waves, and a block's step costs about the A tile's load
  // (all of A for any W) plus W columns of arithmetic. Estimated cost per
  // step: waves x (load + W), with the load worth 64 columns on the tensor
  // cores and 16 on the fp32 cores (whose arithmetic is slower); ties go to
  // the wider slice (fewer re-reads of A).
  constexpr bool simt = P == GpuPrecision::ieee || P == GpuPrecision::ieee_fma;
  constexpr long load = simt ? 16 : 64;
  int best = 0;
  long best_cost = 0;
  for (int w : {128, 64, 32}) {
    if (args.n % w != 0) continue;
    const long blocks = static_cast<long>(args.n / w) * tasks * heads;
    const long cost = (blocks + sms - 1) / sms * (load + w);
    if (best == 0 || cost < best_cost) {
      best = w;
      best_cost = cost;
    }
  }
  if (best == 128) return launch_w<P, 128, S>(args, tasks, heads, stream);
  if (best == 64) return launch_w<P, 64, S>(args, tasks, heads, stream);
  launch_w<P, 32, S>(args, tasks, heads, stream);
}

template <GpuPrecision P>
void launch_tc(MmaAccumulate accumulate, const KernelArgs& args, int tasks, int heads, int sms,
               cudaStream_t stream) {
  switch (accumulate) {
    case MmaAccumulate::residual:
      return launch_p<P, MmaAccumulate::residual>(args, tasks, heads, sms, stream);
    case MmaAccumulate::fp32: return launch_p<P, MmaAccumulate::fp32>(args, tasks, heads, sms, stream);
    case MmaAccumulate::tensor_core:
      return launch_p<P, MmaAccumulate::tensor_core>(args, tasks, heads, sms, stream);
  }
  throw std::invalid_argument("unknown MMA accumulation");
}

void launch(GpuPrecision precision, MmaAccumulate accumulate, const KernelArgs& args, int tasks,
            int heads, int sms, cudaStream_t stream) {
  if (tasks == 0) return;
  switch (precision) {
    case GpuPrecision::ieee:
      return launch_p<GpuPrecision::ieee, MmaAccumulate::fp32>(args, tasks, heads, sms, stream);
    case GpuPrecision::ieee_fma:
      return launch_p<GpuPrecision::ieee_fma, MmaAccumulate::fp32>(args, tasks, heads, sms, stream);
    case GpuPrecision::tf32:
      return launch_tc<GpuPrecision::tf32>(accumulate, args, tasks, heads, sms, stream);
    case GpuPrecision::tf32_rn:
      return launch_tc<GpuPrecision::tf32_rn>(accumulate, args, tasks, heads, sms, stream);
    case GpuPrecision::tf32x3:
      return launch_tc<GpuPrecision::tf32x3>(accumulate, args, tasks, heads, sms, stream);
  }
  throw std::invalid_argument("unknown GPU precision");
}

// A device buffer of T, freed on destruction.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr_); }
  void resize(std::size_t n, const char* what) {
    if (n == n_) return;
    cudaFree(ptr_);
    ptr_ = nullptr;
    n_ = 0;
    if (n == 0) return;
    check(cudaMalloc(&ptr_, n * sizeof(T)), what);
    n_ = n;
  }
  T* get() const { return ptr_; }
  std::size_t size() const { return n_; }

 private:
  T* ptr_ = nullptr;
  std::size_t n_ = 0;
};

struct DeviceProgram {
  DeviceArray<GpuStep> steps;
  DeviceArray<GpuTask> tasks;
  int num_tasks = 0;

  void upload(const GpuProgram& p, const char* what) {
    num_tasks = static_cast<int>(p.tasks.size());
    steps.resize(p.steps.size(), what);
    tasks.resize(p.tasks.size(), what);
    if (!p.steps.empty()) {
      check(cudaMemcpy(steps.get(), p.steps.data(), p.steps.size() * sizeof(GpuStep),
                       cudaMemcpyHostToDevice),
            what);
    }
    if (!p.tasks.empty()) {
      check(cudaMemcpy(tasks.get(), p.tasks.data(), p.tasks.size() * sizeof(GpuTask),
                       cudaMemcpyHostToDevice),
            what);
    }
  }
};

}  // namespace

const char* to_string(MmaAccumulate accumulate) {
  switch (accumulate) {
    case MmaAccumulate::residual: return "residual";
    case MmaAccumulate::fp32: return "fp32";
    case MmaAccumulate::tensor_core: return "tensor-core";
  }
  return "?";
}

const char* to_string(GpuPrecision precision) {
  switch (precision) {
    case GpuPrecision::ieee: return "ieee";
    case GpuPrecision::ieee_fma: return "ieee-fma";
    case GpuPrecision::tf32: return "tf32";
    case GpuPrecision::tf32_rn: return "tf32-rn";
    case GpuPrecision::tf32x3: return "tf32x3";
  }
  return "?";
}

struct GpuChainRunner::Impl {
  std::size_t k = 0, v = 0, heads = 0, chunks = 0, sequences = 0, shards = 0;
  int sms = 0;
  DeviceArray<float> transitions, contributions, initial_states, finals;
  DeviceArray<float> shard_transitions, shard_contributions, received;
  DeviceProgram chain, local, merge, final_walk;
  cudaEvent_t events[5] = {};
  bool programs_set = false;
};

GpuChainRunner::GpuChainRunner(std::size_t dim_k, std::size_t dim_v, std::size_t heads,
                               std::size_t chunks, std::size_t sequences)
    : impl_(std::make_unique<Impl>()) {
  if (dim_k != static_cast<std::size_t>(kK)) {
    throw std::invalid_argument("the CUDA path supports K = 128, got K = " + std::to_string(dim_k));
  }
  if (dim_v == 0 || dim_v % 32 != 0) {
    throw std::invalid_argument("the CUDA path supports V a multiple of 32, got V = " +
                                std::to_string(dim_v));
  }
  if (heads == 0 || heads > 65535 || chunks == 0 || sequences == 0) {
    throw std::invalid_argument("the CUDA path needs 1..65535 heads, chunks and sequences");
  }
  Impl& m = *impl_;
  m.k = dim_k;
  m.v = dim_v;
  m.heads = heads;
  m.chunks = chunks;
  m.sequences = sequences;
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&m.sms, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute(multiprocessors)");
  m.transitions.resize(heads * chunks * dim_k * dim_k, "cudaMalloc(chunk transitions)");
  m.contributions.resize(heads * chunks * dim_k * dim_v, "cudaMalloc(chunk contributions)");
  m.initial_states.resize(heads * sequences * dim_k * dim_v, "cudaMalloc(initial states)");
  m.finals.resize(heads * sequences * dim_k * dim_v, "cudaMalloc(final states)");
  for (cudaEvent_t& e : m.events) check(cudaEventCreate(&e), "cudaEventCreate");
}

GpuChainRunner::~GpuChainRunner() {
  for (cudaEvent_t e : impl_->events) {
    if (e != nullptr) cudaEventDestroy(e);
  }
}

void GpuChainRunner::upload_pairs(std::size_t head, std::size_t first, std::size_t count,
                                  const float* transitions, const float* contributions) {
  Impl& m = *impl_;
  if (head >= m.heads || first + count > m.chunks) {
    throw std::invalid_argument("upload_pairs: head or chunk range out of bounds");
  }
  const std::size_t kk = m.k * m.k, kv = m.k * m.v;
  check(cudaMemcpy(m.transitions.get() + (head * m.chunks + first) * kk, transitions,
                   count * kk * sizeof(float), cudaMemcpyHostToDevice),
        "cudaMemcpy(chunk transitions)");
  check(cudaMemcpy(m.contributions.get() + (head * m.chunks + first) * kv, contributions,
                   count * kv * sizeof(float), cudaMemcpyHostToDevice),
        "cudaMemcpy(chunk contributions)");
}

void GpuChainRunner::tile_pairs_from_head0(std::size_t pool) {
  Impl& m = *impl_;
  if (pool == 0 || pool > m.chunks) throw std::invalid_argument("tile_pairs_from_head0: bad pool");
  const std::size_t kk = m.k * m.k, kv = m.k * m.v;
  for (std::size_t h = 0; h < m.heads; ++h) {
    for (std::size_t c = (h == 0 ? pool : 0); c < m.chunks; c += pool) {
      const std::size_t n = std::min(pool, m.chunks - c);
      check(cudaMemcpy(m.transitions.get() + (h * m.chunks + c) * kk, m.transitions.get(),
                       n * kk * sizeof(float), cudaMemcpyDeviceToDevice),
            "cudaMemcpy(tile transitions)");
      check(cudaMemcpy(m.contributions.get() + (h * m.chunks + c) * kv, m.contributions.get(),
                       n * kv * sizeof(float), cudaMemcpyDeviceToDevice),
            "cudaMemcpy(tile contributions)");
    }
  }
}

void GpuChainRunner::upload_initial_states(std::size_t head, const float* initial_states) {
  Impl& m = *impl_;
  if (head >= m.heads) throw std::invalid_argument("upload_initial_states: head out of bounds");
  const std::size_t skv = m.sequences * m.k * m.v;
  check(cudaMemcpy(m.initial_states.get() + head * skv, initial_states, skv * sizeof(float),
                   cudaMemcpyHostToDevice),
        "cudaMemcpy(initial states)");
}

void GpuChainRunner::set_programs(const GpuPrograms& programs) {
  Impl& m = *impl_;
  if (programs.chunks != m.chunks || programs.sequences != m.sequences || programs.shards == 0) {
    throw std::invalid_argument("set_programs: the programs' chunks/sequences do not match the runner");
  }
  m.shards = programs.shards;
  m.chain.upload(programs.chain, "cudaMemcpy(chain program)");
  m.local.upload(programs.local, "cudaMemcpy(local program)");
  m.merge.upload(programs.merge, "cudaMemcpy(merge program)");
  m.final_walk.upload(programs.final_walk, "cudaMemcpy(final program)");
  const std::size_t r1 = m.shards - 1;
  m.shard_transitions.resize(m.heads * r1 * m.k * m.k, "cudaMalloc(shard transitions)");
  m.shard_contributions.resize(m.heads * r1 * m.k * m.v, "cudaMalloc(shard contributions)");
  m.received.resize(m.heads * m.shards * m.k * m.v, "cudaMalloc(received states)");
  m.programs_set = true;
}

GpuPhaseTimes GpuChainRunner::run(GpuPrecision precision, MmaAccumulate accumulate) {
  Impl& m = *impl_;
  if (!m.programs_set) throw std::logic_error("GpuChainRunner::run before set_programs");
  const std::size_t kk = m.k * m.k, kv = m.k * m.v;
  const int heads = static_cast<int>(m.heads);
  const int v = static_cast<int>(m.v);
  // All-ones bytes are a NaN in fp32: a final state no step wrote fails any check.
  check(cudaMemset(m.finals.get(), 0xFF, m.finals.size() * sizeof(float)), "cudaMemset(finals)");
  const cudaStream_t stream = nullptr;
  KernelArgs chain{m.chain.steps.get(), m.chain.tasks.get(), kK,
                   m.transitions.get(), m.chunks * kk, nullptr, 0, nullptr, 0, nullptr, 0,
                   nullptr, 0, m.shard_transitions.get(), (m.shards - 1) * kk};
  KernelArgs local{m.local.steps.get(), m.local.tasks.get(), v,
                   m.transitions.get(), m.chunks * kk, m.contributions.get(), m.chunks * kv,
                   m.initial_states.get(), m.sequences * kv, nullptr, 0, nullptr, 0,
                   m.shard_contributions.get(), (m.shards - 1) * kv};
  KernelArgs merge{m.merge.steps.get(), m.merge.tasks.get(), v,
                   m.shard_transitions.get(), (m.shards - 1) * kk, m.shard_contributions.get(),
                   (m.shards - 1) * kv, m.initial_states.get(), m.sequences * kv, nullptr, 0,
                   m.received.get(), m.shards * kv, nullptr, 0};
  KernelArgs final_walk{m.final_walk.steps.get(), m.final_walk.tasks.get(), v,
                        m.transitions.get(), m.chunks * kk, m.contributions.get(), m.chunks * kv,
                        m.initial_states.get(), m.sequences * kv, m.received.get(), m.shards * kv,
                        m.finals.get(), m.sequences * kv, nullptr, 0};
  check(cudaEventRecord(m.events[0], stream), "cudaEventRecord");
  launch(precision, accumulate, chain, m.chain.num_tasks, heads, m.sms, stream);
  check(cudaEventRecord(m.events[1], stream), "cudaEventRecord");
  launch(GpuPrecision::ieee, accumulate, local, m.local.num_tasks, heads, m.sms, stream);
  check(cudaEventRecord(m.events[2], stream), "cudaEventRecord");
  launch(precision, accumulate, merge, m.merge.num_tasks, heads, m.sms, stream);
  check(cudaEventRecord(m.events[3], stream), "cudaEventRecord");
  launch(GpuPrecision::ieee, accumulate, final_walk, m.final_walk.num_tasks, heads, m.sms, stream);
  check(cudaEventRecord(m.events[4], stream), "cudaEventRecord");
  check(cudaEventSynchronize(m.events[4]), "kernels of the CUDA path");
  GpuPhaseTimes t;
  float* phases[4] = {&t.chain_ms, &t.local_ms, &t.merge_ms, &t.final_ms};
  for (int i = 0; i < 4; ++i) {
    check(cudaEventElapsedTime(phases[i], m.events[i], m.events[i + 1]), "cudaEventElapsedTime");
  }
  check(cudaEventElapsedTime(&t.total_ms, m.events[0], m.events[4]), "cudaEventElapsedTime");
  return t;
}

void GpuChainRunner::download_finals(float* out) const {
  const Impl& m = *impl_;
  check(cudaMemcpy(out, m.finals.get(), m.finals.size() * sizeof(float), cudaMemcpyDeviceToHost),
        "cudaMemcpy(final states)");
}

std::string GpuChainRunner::device_description() {
  int device = 0, driver = 0, runtime = 0;
  cudaDeviceProp prop{};
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
         ", " + std::to_string(prop.multiProcessorCount) + " SMs), CUDA driver API " +
         std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10) + ", runtime " +
         std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
}

}  // namespace densefeed::affine_chain::cuda
