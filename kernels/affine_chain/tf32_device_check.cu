// Checks on the GPU that the CPU emulation of TF32 operand conversion
// (tf32.h) matches the hardware bit for bit, and finds out what the tensor
// cores do with the low 13 mantissa bits of fp32 operands passed to a TF32
// MMA unconverted.
//
// For every test value x (edge cases plus random fp32 bit patterns) it records:
//   rna    PTX cvt.rna.tf32.f32 (the explicit conversion Triton and CUTLASS use)
//   hd_rn  densefeed::tf32_round_nearest compiled for the device
//   hd_tr  densefeed::tf32_truncate compiled for the device
//   mma A  x as the A operand of mma.sync m16n8k8 .tf32 with B = identity and
//          C = 0, so D = x exactly as the tensor core read it
//   mma B  x as the B operand, A = [I; I] (A[r][c] = 1 where c = r mod 8)
// and compares each with the host functions of tf32.h. A third MMA test takes
// one product per output, D = x y (the other seven terms are x 0 and 0 y), of
// random x, y in [2^-20, 2^20): with both operands cut to TF32 the product has
// at most 22 significant bits, so D shows the exact product of the operands as
// read, to compare with tf32_truncate(x) tf32_truncate(y) (the CPU emulation of
// precision tf32), the round-to-nearest operands' product and the fp32 product.
// A fourth MMA test looks at the sum: D = A B + C with A, B already TF32 values
// (so no operand question) and C fp32, all within a few binades, so that the
// exact C + 8 products fits a double: D is compared with that sum rounded to
// nearest and rounded toward zero.
// Prints a table; exits 1 on any mismatch of the explicit conversion or if the
// MMA does not do what the CPU emulation of tf32 (tf32_truncate on both
// operands) assumes, 2 on CUDA errors.
//
// usage: affine_chain_tf32_check [random_count] [seed]
#include <cuda_runtime.h>

#include <cinttypes>
#include <cmath>
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

// As mma_identity_kernel with the roles swapped: x fills B (8 x 8, b0 =
// B[t][g], b1 = B[t + 4][g]) and A[r][c] = (c == r mod 8), so D rows 0..7 are B.
__global__ void mma_b_kernel(const float* x, float* d, std::size_t tiles) {
  const std::size_t tile = blockIdx.x * static_cast<std::size_t>(blockDim.x / 32) + threadIdx.x / 32;
  if (tile >= tiles) return;
  const unsigned lane = threadIdx.x % 32;
  const unsigned group = lane >> 2, tig = lane & 3;
  const float* b = x + tile * 64;  // b[k * 8 + n]
  const std::uint32_t a0 = __float_as_uint(group == tig ? 1.0f : 0.0f);      // A[g][t]
  const std::uint32_t a1 = __float_as_uint(group == tig ? 1.0f : 0.0f);      // A[g + 8][t]
  const std::uint32_t a2 = __float_as_uint(group == tig + 4 ? 1.0f : 0.0f);  // A[g][t + 4]
  const std::uint32_t a3 = __float_as_uint(group == tig + 4 ? 1.0f : 0.0f);  // A[g + 8][t + 4]
  const std::uint32_t b0 = __float_as_uint(b[tig * 8 + group]);
  const std::uint32_t b1 = __float_as_uint(b[(tig + 4) * 8 + group]);
  float c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  float* out = d + tile * 64;  // D rows 0..7 (c0, c1) = B
  out[group * 8 + 2 * tig] = c0;
  out[group * 8 + 2 * tig + 1] = c1;
}

// One product per output: A[r][0] = xs[r] (16 per tile), B[0][n] = ys[n] (8 per
// tile), every other A and B element 0, so D[r][n] = xs[r] * ys[n].
__global__ void mma_product_kernel(const float* xs, const float* ys, float* d, std::size_t tiles) {
  const std::size_t tile = blockIdx.x * static_cast<std::size_t>(blockDim.x / 32) + threadIdx.x / 32;
  if (tile >= tiles) return;
  const unsigned lane = threadIdx.x % 32;
  const unsigned group = lane >> 2, tig = lane & 3;
  const float* x = xs + tile * 16;
  const float* y = ys + tile * 8;
  const std::uint32_t a0 = __float_as_uint(tig == 0 ? x[group] : 0.0f);
  const std::uint32_t a1 = __float_as_uint(tig == 0 ? x[group + 8] : 0.0f);
  const std::uint32_t b0 = __float_as_uint(tig == 0 ? y[group] : 0.0f);
  const std::uint32_t zero = 0;
  float c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
      : "r"(a0), "r"(a1), "r"(zero), "r"(zero), "r"(b0), "r"(zero));
  float* out = d + tile * 128;  // out[r * 8 + n]
  out[group * 8 + 2 * tig] = c0;
  out[group * 8 + 2 * tig + 1] = c1;
  out[(group + 8) * 8 + 2 * tig] = c2;
  out[(group + 8) * 8 + 2 * tig + 1] = c3;
}

// D = A B + C for general 16 x 8, 8 x 8 and 16 x 8 tiles (row-major a, b, c, d).
__global__ void mma_sum_kernel(const float* as, const float* bs, const float* cs, float* ds, std::size_t tiles) {
  const std::size_t tile = blockIdx.x * static_cast<std::size_t>(blockDim.x / 32) + threadIdx.x / 32;
  if (tile >= tiles) return;
  const unsigned lane = threadIdx.x % 32;
  const unsigned g = lane >> 2, t = lane & 3;
  const float* a = as + tile * 128;
  const float* b = bs + tile * 64;
  const float* c = cs + tile * 128;
  float* d = ds + tile * 128;
  const std::uint32_t a0 = __float_as_uint(a[g * 8 + t]), a1 = __float_as_uint(a[(g + 8) * 8 + t]);
  const std::uint32_t a2 = __float_as_uint(a[g * 8 + t + 4]), a3 = __float_as_uint(a[(g + 8) * 8 + t + 4]);
  const std::uint32_t b0 = __float_as_uint(b[t * 8 + g]), b1 = __float_as_uint(b[(t + 4) * 8 + g]);
  float c0 = c[g * 8 + 2 * t], c1 = c[g * 8 + 2 * t + 1], c2 = c[(g + 8) * 8 + 2 * t], c3 = c[(g + 8) * 8 + 2 * t + 1];
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  d[g * 8 + 2 * t] = c0;
  d[g * 8 + 2 * t + 1] = c1;
  d[(g + 8) * 8 + 2 * t] = c2;
  d[(g + 8) * 8 + 2 * t + 1] = c3;
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
  // B operand: the same values, 64 per tile, but the non-normal ones and the top
  // binade replaced by 1: in this layout a B column is summed with zero
  // weights (0 x Inf = NaN would poison its neighbours; seen on the H200).
  std::vector<float> xb(x);
  for (float& v : xb) {
    const std::uint32_t e = (bits(v) >> 23) & 0xFF;
    if (e == 0 || e >= 0xFE) v = 1.0f;
  }
  CHECK_CUDA(cudaMemcpy(dx, xb.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const std::size_t btiles = n / 64;
  mma_b_kernel<<<(btiles + 3) / 4, 128>>>(dx, dd, btiles);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> db(n);
  CHECK_CUDA(cudaMemcpy(db.data(), dd, n * sizeof(float), cudaMemcpyDeviceToHost));
  std::size_t b_count = 0, b_eq_trunc = 0, b_eq_rn = 0, b_eq_exact = 0, b_shown = 0;
  for (std::size_t i = 0; i < btiles * 64; ++i) {
    const std::uint32_t e = (bits(x[i]) >> 23) & 0xFF;
    if (e == 0 || e >= 0xFE) continue;
    ++b_count;
    b_eq_trunc += bits(db[i]) == bits(densefeed::tf32_truncate(x[i]));
    if (bits(db[i]) != bits(densefeed::tf32_truncate(x[i])) && b_shown < 8) {
      std::printf("  mma B differs from truncation: x %08x (%.9g) at %zu -> D %08x (%.9g), truncate %08x\n", bits(x[i]), x[i], i,
                  bits(db[i]), db[i], bits(densefeed::tf32_truncate(x[i])));
      ++b_shown;
    }
    b_eq_rn += bits(db[i]) == bits(densefeed::tf32_round_nearest(x[i]));
    b_eq_exact += bits(db[i]) == bits(x[i]);
  }

  // Products x y, x and y with random mantissas and exponents in [-20, 20).
  const std::size_t ptiles = (random_count / 128) + 1;
  std::vector<float> px(ptiles * 16), py(ptiles * 8);
  auto draw = [&rng]() {
    const std::uint32_t mant = static_cast<std::uint32_t>(rng()) & 0x7FFFFFu;
    const std::uint32_t exp = static_cast<std::uint32_t>(127 - 20 + rng() % 40);
    const std::uint32_t sign = (rng() & 1) ? 0x80000000u : 0u;
    return from(sign | (exp << 23) | mant);
  };
  for (float& v : px) v = draw();
  for (float& v : py) v = draw();
  float *dpx, *dpy, *dpd;
  CHECK_CUDA(cudaMalloc(&dpx, px.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dpy, py.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dpd, ptiles * 128 * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dpx, px.data(), px.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dpy, py.data(), py.size() * sizeof(float), cudaMemcpyHostToDevice));
  mma_product_kernel<<<(ptiles + 3) / 4, 128>>>(dpx, dpy, dpd, ptiles);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> pd(ptiles * 128);
  CHECK_CUDA(cudaMemcpy(pd.data(), dpd, pd.size() * sizeof(float), cudaMemcpyDeviceToHost));
  std::size_t p_count = 0, p_eq_trunc = 0, p_eq_rn = 0, p_eq_fp32 = 0, p_shown = 0;
  for (std::size_t tile = 0; tile < ptiles; ++tile) {
    for (int r = 0; r < 16; ++r) {
      for (int c = 0; c < 8; ++c) {
        const float xv = px[tile * 16 + r], yv = py[tile * 8 + c];
        const float dv = pd[tile * 128 + r * 8 + c];
        // Both factors have at most 11 significant bits: the product is exact.
        const float tr = densefeed::tf32_truncate(xv) * densefeed::tf32_truncate(yv);
        const float rn = densefeed::tf32_round_nearest(xv) * densefeed::tf32_round_nearest(yv);
        ++p_count;
        p_eq_trunc += bits(dv) == bits(tr);
        p_eq_rn += bits(dv) == bits(rn);
        p_eq_fp32 += bits(dv) == bits(xv * yv);
        if (bits(dv) != bits(tr) && p_shown < 8) {
          std::printf("  mma product differs from the truncated operands' product: x %08x y %08x -> D %08x, trunc %08x, rn %08x\n",
                      bits(xv), bits(yv), bits(dv), bits(tr), bits(rn));
          ++p_shown;
        }
      }
    }
  }

  // The sum: A, B TF32 values with exponents in [-3, 3), C fp32 in [-4, 4).
  const std::size_t stiles = (random_count / 128) + 1;
  std::vector<float> sa(stiles * 128), sb(stiles * 64), sc(stiles * 128);
  auto draw_in = [&rng](int lo, int span, bool tf32) {
    std::uint32_t mant = static_cast<std::uint32_t>(rng()) & 0x7FFFFFu;
    if (tf32) mant &= 0x7FE000u;
    const std::uint32_t exp = static_cast<std::uint32_t>(127 + lo + static_cast<int>(rng() % span));
    const std::uint32_t sign = (rng() & 1) ? 0x80000000u : 0u;
    return from(sign | (exp << 23) | mant);
  };
  for (float& v : sa) v = draw_in(-3, 6, true);
  for (float& v : sb) v = draw_in(-3, 6, true);
  for (float& v : sc) v = draw_in(-4, 8, false);
  float *dsa, *dsb, *dsc, *dsd;
  CHECK_CUDA(cudaMalloc(&dsa, sa.size() * 4));
  CHECK_CUDA(cudaMalloc(&dsb, sb.size() * 4));
  CHECK_CUDA(cudaMalloc(&dsc, sc.size() * 4));
  CHECK_CUDA(cudaMalloc(&dsd, sc.size() * 4));
  CHECK_CUDA(cudaMemcpy(dsa, sa.data(), sa.size() * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dsb, sb.data(), sb.size() * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dsc, sc.data(), sc.size() * 4, cudaMemcpyHostToDevice));
  mma_sum_kernel<<<(stiles + 3) / 4, 128>>>(dsa, dsb, dsc, dsd, stiles);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> sd(sc.size());
  CHECK_CUDA(cudaMemcpy(sd.data(), dsd, sd.size() * 4, cudaMemcpyDeviceToHost));
  std::size_t s_count = 0, s_inexact = 0, s_eq_rn = 0, s_eq_rz = 0, s_inexact_rn = 0, s_inexact_rz = 0;
  double s_err_sum = 0;  // mean of (D - exact) / ulp(D), signed, over inexact sums
  for (std::size_t tile = 0; tile < stiles; ++tile) {
    for (int r = 0; r < 16; ++r) {
      for (int n = 0; n < 8; ++n) {
        double exact = sc[tile * 128 + r * 8 + n];
        for (int k = 0; k < 8; ++k) {
          exact += static_cast<double>(sa[tile * 128 + r * 8 + k]) * static_cast<double>(sb[tile * 64 + k * 8 + n]);
        }
        const float rn = static_cast<float>(exact);
        float rz = rn;
        if (std::fabs(static_cast<double>(rn)) > std::fabs(exact)) rz = std::nextafter(rn, 0.0f);
        const float dv = sd[tile * 128 + r * 8 + n];
        ++s_count;
        s_eq_rn += bits(dv) == bits(rn);
        s_eq_rz += bits(dv) == bits(rz);
        if (static_cast<double>(rn) != exact) {
          ++s_inexact;
          s_inexact_rn += bits(dv) == bits(rn);
          s_inexact_rz += bits(dv) == bits(rz);
          const double ulp = std::fabs(static_cast<double>(std::nextafter(rz, 2 * rz) - rz));
          if (ulp > 0) s_err_sum += (std::fabs(static_cast<double>(dv)) - std::fabs(exact)) / ulp;
        }
      }
    }
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
  auto verdict = [](std::size_t all, std::size_t tr, std::size_t rn, std::size_t ex) {
    return tr == all ? "truncates (drops the low 13 bits)"
           : rn == all ? "rounds to nearest"
           : ex == all ? "keeps all fp32 bits"
                       : "does something else: inspect";
  };
  std::printf("the tensor core, A operand: %s\n", verdict(mma_finite, mma_eq_trunc, mma_eq_rn, mma_eq_exact));
  std::printf("mma.sync tf32 with unconverted fp32 B, normal values below 2^127: %zu\n", b_count);
  std::printf("  D == host tf32_truncate(x):       %zu\n", b_eq_trunc);
  std::printf("  D == host tf32_round_nearest(x):  %zu\n", b_eq_rn);
  std::printf("  D == x (all 23 bits kept):        %zu\n", b_eq_exact);
  std::printf("the tensor core, B operand: %s\n", verdict(b_count, b_eq_trunc, b_eq_rn, b_eq_exact));
  std::printf("mma.sync tf32 single products x*y, unconverted fp32 operands: %zu\n", p_count);
  std::printf("  D == tf32_truncate(x) * tf32_truncate(y) (the CPU emulation): %zu\n", p_eq_trunc);
  std::printf("  D == tf32_round_nearest(x) * tf32_round_nearest(y):           %zu\n", p_eq_rn);
  std::printf("  D == fp32 x * y:                                              %zu\n", p_eq_fp32);
  std::printf("mma.sync tf32 sums D = A B + C (TF32 A, B; fp32 C): %zu, of which %zu not exact in fp32\n", s_count, s_inexact);
  std::printf("  D == exact sum rounded to nearest:   %zu (inexact ones: %zu)\n", s_eq_rn, s_inexact_rn);
  std::printf("  D == exact sum rounded toward zero:  %zu (inexact ones: %zu)\n", s_eq_rz, s_inexact_rz);
  std::printf("  mean (|D| - |exact|) / ulp over inexact sums: %+.3f (0 unbiased; -0.5 truncation of uniform low bits)\n",
              s_inexact ? s_err_sum / static_cast<double>(s_inexact) : 0.0);
  std::printf("the tensor core's fp32 accumulation %s\n",
              s_eq_rz == s_count ? "rounds toward zero (truncates)"
              : s_eq_rn == s_count ? "rounds to nearest"
                                   : "is neither exactly rounded to nearest nor toward zero: see the mean error");
  const bool emulation_holds = mma_eq_trunc == mma_finite && b_eq_trunc == b_count && p_eq_trunc == p_count;
  std::printf("CPU emulation of precision tf32 (tf32_truncate on both operands, exact products): %s\n",
              emulation_holds ? "matches the hardware" : "DOES NOT match the hardware");
  return (rna_vs_host_rn || dev_rn_vs_host || dev_tr_vs_host || !emulation_holds) ? 1 : 0;
}
