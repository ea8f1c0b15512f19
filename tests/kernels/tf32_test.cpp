// TF32 conversions against exact bit patterns. Values are written as fp32 bits:
// sign | 8 exponent bits | 23 mantissa bits, of which TF32 keeps the top 10 and
// drops the low 13 (mask 0x1FFF; half a TF32 ulp is 0x1000).
#include "tf32.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

namespace densefeed {
namespace {

std::uint32_t bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

float from(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

std::uint32_t trunc_bits(std::uint32_t b) { return bits(tf32_truncate(from(b))); }
std::uint32_t rn_bits(std::uint32_t b) { return bits(tf32_round_nearest(from(b))); }

TEST(Tf32Truncate, DropsLow13MantissaBits) {
  EXPECT_EQ(trunc_bits(0x3F800000u), 0x3F800000u);  // 1.0 is already TF32
  EXPECT_EQ(trunc_bits(0x3FFFFFFFu), 0x3FFFE000u);  // 1.99999988 -> 1.9990234
  EXPECT_EQ(trunc_bits(0x3FAAAAABu), 0x3FAAA000u);  // 4/3
  EXPECT_EQ(trunc_bits(0x3F801FFFu), 0x3F800000u);  // just below 1 + 1 TF32 ulp
  EXPECT_EQ(trunc_bits(0x3F802000u), 0x3F802000u);  // 1 + 1 TF32 ulp exactly
}

TEST(Tf32Truncate, RoundsTowardZeroForNegatives) {
  EXPECT_EQ(trunc_bits(0xBFFFFFFFu), 0xBFFFE000u);  // -1.99999988 -> -1.9990234
  EXPECT_EQ(trunc_bits(0xBF801000u), 0xBF800000u);  // a tie still truncates
}

TEST(Tf32Truncate, DenormalsZerosAndInfinities) {
  EXPECT_EQ(trunc_bits(0x00001FFFu), 0x00000000u);  // smallest denormals vanish
  EXPECT_EQ(trunc_bits(0x007FFFFFu), 0x007FE000u);  // largest denormal
  EXPECT_EQ(trunc_bits(0x80003FFFu), 0x80002000u);  // negative denormal
  EXPECT_EQ(trunc_bits(0x00000000u), 0x00000000u);
  EXPECT_EQ(trunc_bits(0x80000000u), 0x80000000u);
  EXPECT_EQ(trunc_bits(0x7F800000u), 0x7F800000u);
  EXPECT_EQ(trunc_bits(0xFF800000u), 0xFF800000u);
  EXPECT_EQ(trunc_bits(0x7F7FFFFFu), 0x7F7FE000u);  // max finite stays finite
}

TEST(Tf32Truncate, NanStaysNan) {
  // Payload only in the dropped bits: a plain mask would give +Inf (0x7F800000).
  EXPECT_EQ(trunc_bits(0x7F800001u), 0x7FC00000u);
  EXPECT_EQ(trunc_bits(0xFF801FFFu), 0xFFC00000u);
  EXPECT_EQ(trunc_bits(0x7FC00000u), 0x7FC00000u);  // canonical quiet NaN unchanged
  EXPECT_EQ(trunc_bits(0x7FFFFFFFu), 0x7FFFE000u);  // high payload kept
  EXPECT_TRUE(std::isnan(tf32_truncate(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Tf32RoundNearest, TiesGoAwayFromZero) {
  // 1 + 0x1000 * 2^-23 is exactly half a TF32 ulp above 1.0.
  EXPECT_EQ(rn_bits(0x3F801000u), 0x3F802000u);  // tie -> up (away from zero)
  EXPECT_EQ(rn_bits(0x3F800FFFu), 0x3F800000u);  // just below the tie -> down
  EXPECT_EQ(rn_bits(0x3F801001u), 0x3F802000u);  // just above the tie -> up
  // A tie whose lower neighbour is odd and one whose is even both go up
  // (ties-to-even would send 0x3F801000 down).
  EXPECT_EQ(rn_bits(0x3F803000u), 0x3F804000u);
  EXPECT_EQ(rn_bits(0xBF801000u), 0xBF802000u);  // negative tie -> more negative
  EXPECT_EQ(rn_bits(0xBF800FFFu), 0xBF800000u);
  EXPECT_EQ(rn_bits(0xBF801001u), 0xBF802000u);
}

TEST(Tf32RoundNearest, CarriesIntoTheExponent) {
  EXPECT_EQ(rn_bits(0x3FFFF000u), 0x40000000u);  // 1.99951172 (tie) -> 2.0
  EXPECT_EQ(rn_bits(0x3FFFFFFFu), 0x40000000u);  // 1.99999988 -> 2.0
  EXPECT_EQ(rn_bits(0xBFFFFFFFu), 0xC0000000u);  // -> -2.0
  EXPECT_EQ(rn_bits(0x3FFFEFFFu), 0x3FFFE000u);  // below the tie stays in the binade
}

TEST(Tf32RoundNearest, Denormals) {
  EXPECT_EQ(rn_bits(0x00000FFFu), 0x00000000u);  // below half the smallest TF32 denormal
  EXPECT_EQ(rn_bits(0x00001000u), 0x00002000u);  // tie -> smallest TF32 denormal
  EXPECT_EQ(rn_bits(0x007FF000u), 0x00800000u);  // largest denormals carry into FLT_MIN
  EXPECT_EQ(rn_bits(0x807FFFFFu), 0x80800000u);
  EXPECT_EQ(rn_bits(0x80000001u), 0x80000000u);  // -> -0
}

TEST(Tf32RoundNearest, InfinitiesAndOverflow) {
  EXPECT_EQ(rn_bits(0x7F800000u), 0x7F800000u);
  EXPECT_EQ(rn_bits(0xFF800000u), 0xFF800000u);
  EXPECT_EQ(rn_bits(0x7F7FE000u), 0x7F7FE000u);  // largest TF32 finite value
  EXPECT_EQ(rn_bits(0x7F7FEFFFu), 0x7F7FE000u);  // below its rounding boundary
  EXPECT_EQ(rn_bits(0x7F7FF000u), 0x7F800000u);  // at the boundary: rounds up to +Inf
  EXPECT_EQ(rn_bits(0x7F7FFFFFu), 0x7F800000u);  // FLT_MAX -> +Inf (IEEE overflow)
  EXPECT_EQ(rn_bits(0xFF7FFFFFu), 0xFF800000u);  // -FLT_MAX -> -Inf
}

TEST(Tf32RoundNearest, NanStaysNan) {
  EXPECT_EQ(rn_bits(0x7F800001u), 0x7FC00000u);  // would become +Inf under add-and-mask
  EXPECT_EQ(rn_bits(0x7FFFFFFFu), 0x7FFFE000u);  // would wrap to -0 under add-and-mask
  EXPECT_EQ(rn_bits(0xFFC00001u), 0xFFC00000u);
  EXPECT_EQ(rn_bits(0x7FC00000u), 0x7FC00000u);
}

TEST(Tf32x3Split, ExactBitPatterns) {
  float hi = 0.0f;
  float lo = 0.0f;
  // 1 + 2^-23: hi = 1, lo = 2^-23 (exactly representable in TF32).
  tf32x3_split(from(0x3F800001u), hi, lo);
  EXPECT_EQ(bits(hi), 0x3F800000u);
  EXPECT_EQ(bits(lo), 0x34000000u);
  // 4/3 = 0x3FAAAAAB: hi = 0x3FAAA000, remainder 0xAAB * 2^-23 rounds to
  // 0xAAC * 2^-23 = 0x39AAC000 (0xAAB has 12 significant bits, one more than
  // TF32 holds, and its last bit is an exact tie, rounded away from zero).
  tf32x3_split(from(0x3FAAAAABu), hi, lo);
  EXPECT_EQ(bits(hi), 0x3FAAA000u);
  EXPECT_EQ(bits(lo), 0x39AAC000u);
  // Rounding up gives a negative low part: 1.99999988 -> hi 2, lo -2^-23.
  tf32x3_split(from(0x3FFFFFFFu), hi, lo);
  EXPECT_EQ(bits(hi), 0x40000000u);
  EXPECT_EQ(bits(lo), 0xB4000000u);
}

TEST(Tf32x3Split, NonFiniteValuesHaveZeroLowPart) {
  float hi = 0.0f;
  float lo = 1.0f;
  tf32x3_split(std::numeric_limits<float>::infinity(), hi, lo);
  EXPECT_EQ(bits(hi), 0x7F800000u);
  EXPECT_EQ(bits(lo), 0x00000000u);
  tf32x3_split(from(0x7F7FFFFFu), hi, lo);  // FLT_MAX: hi overflows to +Inf
  EXPECT_EQ(bits(hi), 0x7F800000u);
  EXPECT_EQ(bits(lo), 0x00000000u);
  tf32x3_split(from(0x7F800001u), hi, lo);
  EXPECT_TRUE(std::isnan(hi));
  EXPECT_EQ(bits(lo), 0x00000000u);
}

// Over many values from several binades: hi and lo are TF32 values, hi + lo is
// closer to a than hi alone (never farther), |lo| <= half a TF32 ulp of hi, and
// |a - (hi + lo)| <= 2^-21 |a| (hi + lo carries about 22 bits of a).
TEST(Tf32x3Split, SplitIsExactToTwentyTwoBits) {
  std::uint32_t state = 0x12345678u;
  int improved = 0;
  for (int n = 0; n < 100000; ++n) {
    state = state * 1664525u + 1013904223u;  // Numerical Recipes LCG
    // Exponents 100..154 (about 2^-27 .. 2^27), random sign and mantissa.
    const std::uint32_t exponent = 100u + (state >> 8) % 55u;
    const std::uint32_t b = (state & 0x80000000u) | (exponent << 23) | (state & 0x007FFFFFu);
    const float a = from(b);
    float hi = 0.0f;
    float lo = 0.0f;
    tf32x3_split(a, hi, lo);
    ASSERT_EQ(bits(hi) & 0x1FFFu, 0u) << std::hex << b;
    ASSERT_EQ(bits(lo) & 0x1FFFu, 0u) << std::hex << b;
    const double ad = a;
    const double err_hi = std::fabs(ad - static_cast<double>(hi));
    const double err_both = std::fabs(ad - (static_cast<double>(hi) + static_cast<double>(lo)));
    const double ulp_hi = std::ldexp(1.0, std::ilogb(hi) - 10);
    ASSERT_LE(std::fabs(static_cast<double>(lo)), 0.5 * ulp_hi) << std::hex << b;
    ASSERT_LE(err_both, err_hi) << std::hex << b;
    ASSERT_LE(err_both, std::ldexp(std::fabs(ad), -21)) << std::hex << b;
    if (err_both < err_hi) ++improved;
  }
  // Values whose low 13 bits are zero are the only ones lo cannot improve.
  EXPECT_GT(improved, 99900);
}

}  // namespace
}  // namespace densefeed
