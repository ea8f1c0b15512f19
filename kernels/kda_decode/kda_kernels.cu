// CUDA kernels of one KDA decode step, v0 (fla's tiling) and v3 (tiles merged);
// kda_kernels.cuh describes both. Arithmetic as upstream's kernel does it:
// division by the norm (not multiplication by its reciprocal), expf and the
// sigmoid 1 / (1 + exp(-x)) in fp32 (fla/ops/kda/fused_recurrent.py,
// fused_recurrent_kda_fwd_kernel; fla/ops/utils/op.py's exp is tl.exp).
#include "kda_kernels.cuh"

#include <cstddef>

namespace densefeed::kda_decode {
namespace {

constexpr int K = kCudaDim;
constexpr int V = kCudaDim;
constexpr unsigned kFull = 0xFFFFFFFFu;

__device__ __forceinline__ float bf(const __nv_bfloat16 x) { return __bfloat162float(x); }

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ float comp(const float4& x, int t) {
  return t == 0 ? x.x : t == 1 ? x.y : t == 2 ? x.z : x.w;
}

__device__ __forceinline__ float4 fma4(float s, const float4& x, const float4& acc) {
  return make_float4(fmaf(s, x.x, acc.x), fmaf(s, x.y, acc.y), fmaf(s, x.z, acc.z), fmaf(s, x.w, acc.w));
}

__device__ __forceinline__ float4 shfl_xor4(const float4& x, int mask) {
  return make_float4(__shfl_xor_sync(kFull, x.x, mask), __shfl_xor_sync(kFull, x.y, mask),
                     __shfl_xor_sync(kFull, x.z, mask), __shfl_xor_sync(kFull, x.w, mask));
}

__device__ __forceinline__ float4 add4(const float4& a, const float4& b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// One 16-byte store (st.global.wb.v4.f32; .wb is PTX's default store policy,
// as Triton's 4-wide stores use). Spelled out because nvcc split v0's float4
// state stores into four 4-byte stores (seen in the SASS of the H200 run of
// 2026-11-29), which Triton does not do: four times the store instructions
// and partial-sector writes would have made v0 a strawman.
__device__ __forceinline__ void store4(float* p, const float4& v) { __stwb(reinterpret_cast<float4*>(p), v); }

// Four consecutive bf16 (8 bytes, aligned) as floats.
__device__ __forceinline__ float4 load_bf16x4(const __nv_bfloat16* p) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const __nv_bfloat162 lo = *reinterpret_cast<const __nv_bfloat162*>(&raw.x);
  const __nv_bfloat162 hi = *reinterpret_cast<const __nv_bfloat162*>(&raw.y);
  const float2 a = __bfloat1622float2(lo);
  const float2 b = __bfloat1622float2(hi);
  return make_float4(a.x, a.y, b.x, b.y);
}

// ---------------------------------------------------------------- v0 -------
// One program of fla's grid: pid -> (i_v = pid % NV, i_nh = pid / NV), NK = 1,
// NV = V / BV = 4 (fused_recurrent_kda_fwd: grid = (cdiv(V, BV) * N * HV,)).
// Triton's blocked layout for the [BK = 128, BV = 32] fp32 tile with 4 warps:
// sizePerThread [1, 4], threadsPerWarp [4, 8], warpsPerCTA [4, 1], so a thread
// holds rows 4 * warp + lane / 8 + 16 j (j < 8) and columns 4 (lane % 8) .. + 3;
// a [BK] vector (b_q, b_k, b_g) lives in the slice layout: each thread holds
// its 8 rows, replicated over the 8 lanes that share them.
constexpr int kBV = 32;
constexpr int kNV = V / kBV;
constexpr int kV0Threads = 128;
constexpr int kV0Rows = 8;  // rows per thread

// tl.sum over the K rows of a slice-layout vector: in-thread, across the 4 lane
// groups of a warp, then across the 4 warps through shared memory.
__device__ __forceinline__ float v0_row_sum(float x, float* red /* [4] */) {
  x += __shfl_xor_sync(kFull, x, 8);
  x += __shfl_xor_sync(kFull, x, 16);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = x;
  __syncthreads();
  return (red[0] + red[1]) + (red[2] + red[3]);
}

// tl.sum(tile, axis 0) for the thread's 4 columns.
__device__ __forceinline__ float4 v0_col_sum(float4 x, float4* red /* [4][8] */) {
  x = add4(x, shfl_xor4(x, 8));
  x = add4(x, shfl_xor4(x, 16));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane < 8) red[warp * 8 + lane] = x;
  __syncthreads();
  const int c = lane & 7;
  return add4(add4(red[c], red[8 + c]), add4(red[16 + c], red[24 + c]));
}

__global__ void __launch_bounds__(kV0Threads) kda_decode_v0(const KdaDecodeArgs a) {
  __shared__ float red_q[4], red_k[4];
  __shared__ float4 red_kv[32], red_o[32];
  const long long pid = blockIdx.x;
  const int i_v = static_cast<int>(pid % kNV);
  const long long i_nh = pid / kNV;
  const int i_h = static_cast<int>(i_nh % a.heads);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row0 = warp * 4 + (lane >> 3);
  const int col = i_v * kBV + (lane & 7) * 4;

  const float* s_in = a.state_in + static_cast<std::size_t>(i_nh) * K * V;
  float4 h[kV0Rows];
#pragma unroll
  for (int j = 0; j < kV0Rows; ++j) {
    h[j] = *reinterpret_cast<const float4*>(s_in + static_cast<std::size_t>(row0 + 16 * j) * V + col);
  }
  const std::size_t vec = static_cast<std::size_t>(i_nh) * K;
  float q[kV0Rows], k[kV0Rows], g[kV0Rows];
#pragma unroll
  for (int j = 0; j < kV0Rows; ++j) {
    const int r = row0 + 16 * j;
    q[j] = bf(a.q[vec + r]);
    k[j] = bf(a.k[vec + r]);
    g[j] = bf(a.g_raw[vec + r]);
  }
  const float4 v = load_bf16x4(a.v + static_cast<std::size_t>(i_nh) * V + col);

  // USE_QK_L2NORM_IN_KERNEL: b_q / tl.sqrt(tl.sum(b_q * b_q) + 1e-6), then * scale.
  float qq = 0.0f, kk = 0.0f;
#pragma unroll
  for (int j = 0; j < kV0Rows; ++j) {
    qq = fmaf(q[j], q[j], qq);
    kk = fmaf(k[j], k[j], kk);
  }
  qq = v0_row_sum(qq, red_q);
  kk = v0_row_sum(kk, red_k);
  const float q_div = sqrtf(qq + a.eps);
  const float k_div = sqrtf(kk + a.eps);

  // USE_GATE_IN_KERNEL, HAS_A, HAS_BIAS, USE_LOWER_BOUND:
  // b_gk = lower_bound * sigmoid(exp(A_log) * (g + dt_bias)); b_h *= exp(b_gk).
  const float A = expf(a.a_log[i_h]);
  float4 p = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int j = 0; j < kV0Rows; ++j) {
    const int r = row0 + 16 * j;
    q[j] = q[j] / q_div * a.scale;
    k[j] = k[j] / k_div;
    const float d = expf(a.lower_bound * sigmoidf(A * (g[j] + a.dt_bias[i_h * K + r])));
    h[j] = make_float4(h[j].x * d, h[j].y * d, h[j].z * d, h[j].w * d);
    p = fma4(k[j], h[j], p);
  }
  // b_v -= tl.sum(b_h * b_k[:, None], 0); b_v *= b_beta.
  p = v0_col_sum(p, red_kv);
  const float beta = bf(a.beta[i_nh]);
  const float4 u = make_float4((v.x - p.x) * beta, (v.y - p.y) * beta, (v.z - p.z) * beta, (v.w - p.w) * beta);
  // b_h += b_k[:, None] * b_v[None, :]; b_o = tl.sum(b_h * b_q[:, None], 0).
  float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int j = 0; j < kV0Rows; ++j) {
    h[j] = fma4(k[j], u, h[j]);
    o = fma4(q[j], h[j], o);
  }
  o = v0_col_sum(o, red_o);
  if (warp == 0 && lane < 8) store4(a.o + static_cast<std::size_t>(i_nh) * V + col, o);
  float* s_out = a.state_out + static_cast<std::size_t>(i_nh) * K * V;
#pragma unroll
  for (int j = 0; j < kV0Rows; ++j) store4(s_out + static_cast<std::size_t>(row0 + 16 * j) * V + col, h[j]);
}

// ---------------------------------------------------------------- v3 -------
// kSplit = 1: one block of 4 warps per (b, h), all 128 columns. Lane = 8 rg +
// cg: rows [32 rg, 32 rg + 32), columns 32 warp + 4 cg .. + 3. Row j of every
// load instruction is 4 full 128-byte lines (one per rg), so loads and stores
// are coalesced 16-byte accesses.
// kSplit = 2 (small batches, B * H below the SM count): two blocks of 2 warps
// per (b, h), 64 columns each, so that a launch of one partial wave still uses
// every SM instead of loading 128 KiB through half of them; each block's warp
// 0 computes the normalisation and gate for itself (twice per (b, h), not four
// times as in v0).
constexpr int kV3Rows = 32;  // rows per thread

template <int kSplit>
__global__ void __launch_bounds__(128 / kSplit) kda_decode_v3(const KdaDecodeArgs a) {
  // Normalised k, scaled normalised q and exp(g), rows 4i .. 4i + 3 in entry i.
  __shared__ float4 sk[K / 4], sq[K / 4], sd[K / 4];
  const long long bh = blockIdx.x / kSplit;
  const int part = static_cast<int>(blockIdx.x % kSplit);
  const int h = static_cast<int>(bh % a.heads);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rg = lane >> 3, cg = lane & 7;
  const int row0 = rg * kV3Rows;
  const int col = part * (V / kSplit) + warp * 32 + cg * 4;
  const std::size_t vec = static_cast<std::size_t>(bh) * K;

  // Warp 0's prologue inputs first, so their latency overlaps the state's.
  float4 q4, k4, g4, b4;
  float a_log = 0.0f;
  if (warp == 0) {
    q4 = load_bf16x4(a.q + vec + 4 * lane);
    k4 = load_bf16x4(a.k + vec + 4 * lane);
    g4 = load_bf16x4(a.g_raw + vec + 4 * lane);
    b4 = *reinterpret_cast<const float4*>(a.dt_bias + static_cast<std::size_t>(h) * K + 4 * lane);
    a_log = a.a_log[h];
  }
  const float* s_in = a.state_in + static_cast<std::size_t>(bh) * K * V;
  float4 s[kV3Rows];
#pragma unroll
  for (int j = 0; j < kV3Rows; ++j) {
    s[j] = *reinterpret_cast<const float4*>(s_in + static_cast<std::size_t>(row0 + j) * V + col);
  }
  const float4 v = load_bf16x4(a.v + static_cast<std::size_t>(bh) * V + col);
  const float beta = bf(a.beta[bh]);

  if (warp == 0) {
    // The one warp-level reduction: sum(q^2) and sum(k^2) together.
    float qq = q4.x * q4.x + q4.y * q4.y + q4.z * q4.z + q4.w * q4.w;
    float kk = k4.x * k4.x + k4.y * k4.y + k4.z * k4.z + k4.w * k4.w;
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) {
      qq += __shfl_xor_sync(kFull, qq, m);
      kk += __shfl_xor_sync(kFull, kk, m);
    }
    const float q_div = sqrtf(qq + a.eps);
    const float k_div = sqrtf(kk + a.eps);
    const float A = expf(a_log);
    sq[lane] = make_float4(q4.x / q_div * a.scale, q4.y / q_div * a.scale, q4.z / q_div * a.scale,
                           q4.w / q_div * a.scale);
    sk[lane] = make_float4(k4.x / k_div, k4.y / k_div, k4.z / k_div, k4.w / k_div);
    sd[lane] = make_float4(expf(a.lower_bound * sigmoidf(A * (g4.x + b4.x))),
                           expf(a.lower_bound * sigmoidf(A * (g4.y + b4.y))),
                           expf(a.lower_bound * sigmoidf(A * (g4.z + b4.z))),
                           expf(a.lower_bound * sigmoidf(A * (g4.w + b4.w))));
  }
  __syncthreads();

  // Decay and S^T k over the thread's 32 rows, then across the 4 row groups.
  float4 p = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int i = 0; i < kV3Rows / 4; ++i) {
    const float4 d4 = sd[rg * 8 + i];
    const float4 kk4 = sk[rg * 8 + i];
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const int j = 4 * i + t;
      const float d = comp(d4, t);
      s[j] = make_float4(s[j].x * d, s[j].y * d, s[j].z * d, s[j].w * d);
      p = fma4(comp(kk4, t), s[j], p);
    }
  }
  p = add4(p, shfl_xor4(p, 8));
  p = add4(p, shfl_xor4(p, 16));
  const float4 u = make_float4((v.x - p.x) * beta, (v.y - p.y) * beta, (v.z - p.z) * beta, (v.w - p.w) * beta);

  float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int i = 0; i < kV3Rows / 4; ++i) {
    const float4 kk4 = sk[rg * 8 + i];
    const float4 q4s = sq[rg * 8 + i];
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const int j = 4 * i + t;
      s[j] = fma4(comp(kk4, t), u, s[j]);
      o = fma4(comp(q4s, t), s[j], o);
    }
  }
  o = add4(o, shfl_xor4(o, 8));
  o = add4(o, shfl_xor4(o, 16));
  if (rg == 0) store4(a.o + static_cast<std::size_t>(bh) * V + col, o);
  float* s_out = a.state_out + static_cast<std::size_t>(bh) * K * V;
#pragma unroll
  for (int j = 0; j < kV3Rows; ++j) store4(s_out + static_cast<std::size_t>(row0 + j) * V + col, s[j]);
}

// v3's blocks per (b, h): 2 when one block per (b, h) would leave SMs idle.
int v3_auto_split(int batch, int heads) {
  static const int sms = [] {
    int device = 0, n = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      return 0;
    }
    return n;
  }();
  return static_cast<long long>(batch) * heads < sms ? 2 : 1;
}

int v3_split(const KdaDecodeArgs& a) {
  return a.v3_split == 1 || a.v3_split == 2 ? a.v3_split : v3_auto_split(a.batch, a.heads);
}

}  // namespace

int kda_decode_threads(Version version, int batch, int heads) {
  return version == Version::v0 ? kV0Threads : 128 / v3_auto_split(batch, heads);
}

long long kda_decode_blocks(Version version, int batch, int heads) {
  const long long bh = static_cast<long long>(batch) * heads;
  return version == Version::v0 ? bh * kNV : bh * v3_auto_split(batch, heads);
}

int kda_decode_blocks_per_sm(Version version) {
  int blocks = 0;
  const cudaError_t err =
      version == Version::v0
          ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kda_decode_v0, kV0Threads, 0)
          : cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kda_decode_v3<1>, 128, 0);
  return err == cudaSuccess ? blocks : 0;
}

cudaError_t launch_kda_decode(Version version, const KdaDecodeArgs& args, cudaStream_t stream) {
  if (args.batch < 1 || args.heads < 1) return cudaErrorInvalidValue;
  const long long bh = static_cast<long long>(args.batch) * args.heads;
  const long long blocks = version == Version::v0 ? bh * kNV : bh * v3_split(args);
  if (blocks > 0x7FFFFFFFLL) return cudaErrorInvalidValue;
  if (version == Version::v0) {
    kda_decode_v0<<<static_cast<unsigned>(blocks), kV0Threads, 0, stream>>>(args);
  } else if (v3_split(args) == 2) {
    kda_decode_v3<2><<<static_cast<unsigned>(blocks), 64, 0, stream>>>(args);
  } else {
    kda_decode_v3<1><<<static_cast<unsigned>(blocks), 128, 0, stream>>>(args);
  }
  return cudaGetLastError();
}

}  // namespace densefeed::kda_decode
