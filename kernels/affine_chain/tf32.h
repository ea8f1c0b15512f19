// TF32 operand conversions, bit for bit as the GPU performs them, so that the
// CPU emulation and a CUDA path round every operand identically.
//
// TF32 keeps fp32's sign and 8-bit exponent and the top 10 of its 23 stored
// mantissa bits (NVIDIA A100 whitepaper, "TF32"; PTX ISA, "cvt", .tf32). Results
// are fp32 values whose low 13 mantissa bits are zero; a product of two such
// values (11-bit significands) is exact in fp32.
//
// All functions assume IEEE fp32 without flush-to-zero (denormals are rounded
// like any other value); do not compile callers with -ffast-math or --ftz=true.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DENSEFEED_HD __host__ __device__
#else
#define DENSEFEED_HD
#endif

namespace densefeed {

namespace tf32_detail {

inline constexpr std::uint32_t kLowMask = 0x00001FFFu;   // the 13 bits TF32 drops
inline constexpr std::uint32_t kKeepMask = 0xFFFFE000u;  // sign, exponent, 10 mantissa bits
inline constexpr std::uint32_t kHalfLow = 0x00001000u;   // half a TF32 ulp, in fp32 bits
inline constexpr std::uint32_t kAbsMask = 0x7FFFFFFFu;
inline constexpr std::uint32_t kInfBits = 0x7F800000u;
inline constexpr std::uint32_t kQuietBit = 0x00400000u;

DENSEFEED_HD inline std::uint32_t to_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
#endif
}

DENSEFEED_HD inline float from_bits(std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
#endif
}

DENSEFEED_HD inline bool is_nan_bits(std::uint32_t b) { return (b & kAbsMask) > kInfBits; }

// A NaN whose payload lies only in the low 13 bits would become Inf under the
// mask; keep the sign and the high payload and set the quiet bit instead, so a
// NaN stays a NaN (and a TF32 value).
DENSEFEED_HD inline float quiet_nan_tf32(std::uint32_t b) {
  return from_bits((b & kKeepMask) | kQuietBit);
}

}  // namespace tf32_detail

// fp32 -> TF32 by dropping the low 13 mantissa bits (round toward zero): what
// the tensor cores do with fp32 operands passed to a TF32 MMA unconverted
// (measured on the H200 for the A and the B operand of mma.sync m16n8k8,
// tf32_device_check.cu, kernels/RESULTS.md), and how Triton's default fp32
// tl.dot behaved when measured on an H200.
// NaN -> quiet NaN with sign and high payload kept; +-Inf and +-0 unchanged.
DENSEFEED_HD inline float tf32_truncate(float x) {
  const std::uint32_t b = tf32_detail::to_bits(x);
  if (tf32_detail::is_nan_bits(b)) return tf32_detail::quiet_nan_tf32(b);
  return tf32_detail::from_bits(b & tf32_detail::kKeepMask);
}

// fp32 -> TF32 rounded to nearest, ties away from zero: PTX `cvt.rna.tf32.f32`.
// Adding half a TF32 ulp to the sign-magnitude bits rounds the magnitude half-up;
// a carry runs into the exponent as it should (1.99999 -> 2, largest denormal ->
// smallest normal), and values above the largest TF32 finite value's rounding
// boundary become Inf, as IEEE round-to-nearest overflow does.
// NaN -> quiet NaN with sign and high payload kept; +-Inf and +-0 unchanged.
DENSEFEED_HD inline float tf32_round_nearest(float x) {
  const std::uint32_t b = tf32_detail::to_bits(x);
  if (tf32_detail::is_nan_bits(b)) return tf32_detail::quiet_nan_tf32(b);
  // Inf (0x7F800000) + 0x1000 keeps its exponent and is masked back to Inf.
  return tf32_detail::from_bits((b + tf32_detail::kHalfLow) & tf32_detail::kKeepMask);
}

// The 3xTF32 split of an fp32 operand (as in CUTLASS's 3xTF32 "fast accurate"
// GEMMs and Triton's "tf32x3"): hi = tf32_round_nearest(a), lo =
// tf32_round_nearest(a - hi). a - hi is exact in fp32 (Sterbenz: hi is within a
// factor 2 of a), so hi + lo carries 22 significant bits of a and
// |lo| <= half a TF32 ulp of hi. A product a*b is then taken as
// hi_a*hi_b + hi_a*lo_b + lo_a*hi_b (lo*lo dropped).
// When hi is not finite (a is +-Inf or NaN, or a rounds up to Inf), lo = 0 so
// that hi + lo = hi instead of Inf - Inf = NaN.
DENSEFEED_HD inline void tf32x3_split(float a, float& hi, float& lo) {
  hi = tf32_round_nearest(a);
  const std::uint32_t hb = tf32_detail::to_bits(hi);
  const bool finite = (hb & tf32_detail::kAbsMask) < tf32_detail::kInfBits;
  lo = finite ? tf32_round_nearest(a - hi) : 0.0f;
}

}  // namespace densefeed
