// bfloat16 <-> float32 conversions done explicitly on the CPU, so that the
// reference, the CPU candidate and the GPU candidate see the same bf16 bits.
// bfloat16 is the top half of an IEEE-754 binary32 (1 sign, 8 exponent, 7
// mantissa bits); float -> bf16 rounds to nearest, ties to even, as
// torch.Tensor.to(torch.bfloat16) and CUDA's __float2bfloat16_rn do.
// C++17 (no C++20 headers): the CUDA sources include it too.
#pragma once

#include <cstdint>
#include <cstring>

namespace densefeed::kda_decode {

// The float's bf16 bits, rounded to nearest even. NaN stays a (quiet) NaN;
// overflow past bf16's largest finite value rounds to +-Inf as IEEE says.
inline std::uint16_t float_to_bf16_bits(float x) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN, sign kept
  }
  const std::uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7FFFu + lsb;
  return static_cast<std::uint16_t>(bits >> 16);
}

// Exact: every bf16 value is a float.
inline float bf16_bits_to_float(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float x = 0.0f;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

}  // namespace densefeed::kda_decode
