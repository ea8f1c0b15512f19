// Checks on the GPU that the CPU emulation of TF32 operand conversion
// (tf32.h) matches the hardware bit for bit, and finds out what the tensor
// cores do with the low 13 mantissa bits of fp32 operands passed to a TF32
// MMA unconverted.
//
// For every test value x (edge cases plus random fp32 bit patterns) it records:
//   rna    PTX cvt.rna.tf32.f32 (the explicit conversion Triton and CUTLASS use)
//   hd_rn  densefeed::tf32_round_nearest compiled for the device
//   hd_tr  densefeed::tf32_truncate compiled for the device
//   mma    x as the A operand of mma.sync m16n8k8 .tf32 with B = identity and
//          C = 0, so D = x exactly as the tensor core read it
// and compares each with the host functions of tf32.h. Prints a table and
// exits 1 on any mismatch of the explicit conversion, 2 on CUDA errors.
//
// usage: affine_chain_tf32_check [random_count] [seed]
#include <cuda_runtime.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "tf32.h"

namespace {

#define CHECK_CUDA(call)                                                                 \
  do {                                                                                   \
    cudaError_t err_ = (call);                                                           \
    if (err_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, __LINE__); \
      std::exit(2);                                                                      \
    }                                                                                    \
  } while (0)

__global__ void convert_kernel(const float* x, std::uint32_t* rna, std::uint32_t* hd_rn, std::uint32_t* hd_tr,
                               std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  std::uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x[i]));
  rna[i] = r;
  hd_rn[i] = __float_as_uint(densefeed::tf32_round_nearest(x[i]));
  hd_tr[i] = __float_as_uint(densefeed::tf32_truncate(x[i]));
}

// One warp per 128 values: A (16x8, row-major) holds the values, B is the 8x8
// identity, so D[r][c] = A[r][c] * 1 + zeros, exact in fp32 for whatever TF32
// value the tensor core took A[r][c] to be. Fragment layouts: PTX ISA,
// "Matrix Fragments for mma.m16n8k8" (.tf32).
__global__ void mma_identity_kernel(const float* x, float* d, std::size_t tiles) {
  const std::size_t tile = blockIdx.x * static_cast<std::size_t>(blockDim.x / 32) + threadIdx.x / 32;
  if (tile >= tiles) return;
  const unsigned lane = threadIdx.x % 32;
  const unsigned group = lane >> 2, tig = lane & 3;
  const float* a = x + tile * 128;  // a[r * 8 + c]
  const std::uint32_t a0 = __float_as_uint(a[group * 8 + tig]);
  const std::uint32_t a1 = __float_as_uint(a[(group + 8) * 8 + tig]);
  const std::uint32_t a2 = __float_as_uint(a[group * 8 + tig + 4]);
  const std::uint32_t a3 = __float_as_uint(a[(group + 8) * 8 + tig + 4]);
  const std::uint32_t b0 = __float_as_uint(tig == group ? 1.0f : 0.0f);
  const std::uint32_t b1 = __float_as_uint(tig + 4 == group ? 1.0f : 0.0f);
  float c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  float* out = d + tile * 128;
  out[group * 8 + 2 * tig] = c0;
  out[group * 8 + 2 * tig + 1] = c1;
  out[(group + 8) * 8 + 2 * tig] = c2;
  out[(group + 8) * 8 + 2 * tig + 1] = c3;
}

std::uint32_t bits(float f) { return densefeed::tf32_detail::to_bits(f); }
float from(std::uint32_t b) { return densefeed::tf32_detail::from_bits(b); }

}  // namespace

int main(int argc, char** argv) {
  const std::size_t random_count = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (1u << 22);
  const std::uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;

  std::vector<float> x;
  // Edge cases: ties, just below/above ties, carries into the exponent,
  // denormals, zeros, the largest finite values, infinities.
  for (std::uint32_t sign : {0u, 0x80000000u}) {
    for (std::uint32_t b : {0x3F800000u, 0x3F801000u, 0x3F800FFFu, 0x3F801001u, 0x3F803000u, 0x3FFFF000u,
                            0x3FFFFFFFu, 0x00000001u, 0x00001000u, 0x007FF000u, 0x007FFFFFu, 0x00000000u,
                            0x7F7FFFFFu, 0x7F7FF000u, 0x7F7FEFFFu, 0x7F800000u}) {
      x.push_back(from(b | sign));
    }
  }
  std::mt19937_64 rng(seed);
  while (x.size() < random_count) {
    const std::uint32_t b = static_cast<std::uint32_t>(rng());
    if (((b >> 23) & 0xFF) == 0xFF) continue;  // NaN/Inf handled above
    x.push_back(from(b));
  }
  // Whole MMA tiles of 128 values.
  while (x.size() % 128) x.push_back(1.0f);
  const std::size_t n = x.size();

  float *dx, *dd;
  std::uint32_t *drna, *drn, *dtr;
  CHECK_CUDA(cudaMalloc(&dx, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dd, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&drna, n * 4));
  CHECK_CUDA(cudaMalloc(&drn, n * 4));
  CHECK_CUDA(cudaMalloc(&dtr, n * 4));
  CHECK_CUDA(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  convert_kernel<<<(n + 255) / 256, 256>>>(dx, drna, drn, dtr, n);
  CHECK_CUDA(cudaGetLastError());
  const std::size_t tiles = n / 128;
  mma_identity_kernel<<<(tiles + 3) / 4, 128>>>(dx, dd, tiles);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<std::uint32_t> rna(n), rn(n), tr(n);
  std::vector<float> d(n);
  CHECK_CUDA(cudaMemcpy(rna.data(), drna, n * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(rn.data(), drn, n * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(tr.data(), dtr, n * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(d.data(), dd, n * sizeof(float), cudaMemcpyDeviceToHost));

  std::size_t rna_vs_host_rn = 0, dev_rn_vs_host = 0, dev_tr_vs_host = 0;
  std::size_t mma_eq_trunc = 0, mma_eq_rn = 0, mma_eq_exact = 0, mma_finite = 0, shown = 0, top_binade = 0, top_binade_nan = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t host_rn = bits(densefeed::tf32_round_nearest(x[i]));
    const std::uint32_t host_tr = bits(densefeed::tf32_truncate(x[i]));
    rna_vs_host_rn += rna[i] != host_rn;
    dev_rn_vs_host += rn[i] != host_rn;
    dev_tr_vs_host += tr[i] != host_tr;
    // Where the product with 1 overflows or is denormal the MMA datapath may
    // flush; count only normal finite values for the operand question.
    const std::uint32_t e = (bits(x[i]) >> 23) & 0xFF;
    if (e == 0 || e == 0xFF) continue;
    // Seen on an H200: in the top binade (|x| >= 2^127) the MMA returns NaN
    // for x * 1 + 0 * x'; that is the datapath's range, not the conversion.
    if (e == 0xFE) {
      top_binade_nan += d[i] != d[i];
      ++top_binade;
      continue;
    }
    ++mma_finite;
    if (bits(d[i]) != host_tr && shown < 8) {
      std::printf("  mma differs from truncation: x %08x (%.9g) -> D %08x (%.9g), truncate %08x, rna %08x\n", bits(x[i]), x[i],
                  bits(d[i]), d[i], host_tr, host_rn);
      ++shown;
    }
    mma_eq_trunc += bits(d[i]) == host_tr;
    mma_eq_rn += bits(d[i]) == host_rn;
    mma_eq_exact += bits(d[i]) == bits(x[i]);
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  std::printf("values: %zu (%zu edge cases, the rest random fp32 bit patterns, seed %" PRIu64 ")\n", n, size_t{32}, seed);
  std::printf("cvt.rna.tf32.f32 (device PTX) vs host tf32_round_nearest: %zu mismatches\n", rna_vs_host_rn);
  std::printf("device tf32_round_nearest vs host:                      %zu mismatches\n", dev_rn_vs_host);
  std::printf("device tf32_truncate vs host:                           %zu mismatches\n", dev_tr_vs_host);
  std::printf("mma.sync tf32 with unconverted fp32 A, normal values below 2^127: %zu\n", mma_finite);
  std::printf("  (top binade, |x| >= 2^127: %zu values, %zu gave NaN)\n", top_binade, top_binade_nan);
  std::printf("  D == host tf32_truncate(x):       %zu\n", mma_eq_trunc);
  std::printf("  D == host tf32_round_nearest(x):  %zu\n", mma_eq_rn);
  std::printf("  D == x (all 23 bits kept):        %zu\n", mma_eq_exact);
  const char* verdict = mma_eq_trunc == mma_finite ? "truncates (drops the low 13 bits)"
                        : mma_eq_rn == mma_finite  ? "rounds to nearest"
                        : mma_eq_exact == mma_finite ? "keeps all fp32 bits"
                                                     : "does something else: inspect";
  std::printf("the tensor core %s\n", verdict);
  return (rna_vs_host_rn || dev_rn_vs_host || dev_tr_vs_host) ? 1 : 0;
}
