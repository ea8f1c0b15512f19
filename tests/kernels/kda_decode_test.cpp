// The KDA decode step's CPU math (kernels/kda_decode): bf16 rounding, the
// input generator, a case small enough to compute by hand (checked against both
// the fp64 reference and the fp32 CPU path), v0 == v3 bit for bit, and the fp32
// path's distance from the fp64 reference on a full-size head.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "bf16.h"
#include "decode_cpu.h"
#include "inputs.h"
#include "reference.h"

namespace densefeed::kda_decode {
namespace {

float from_bits(std::uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

TEST(KdaBf16, RoundsToNearestEvenLikeTorch) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xC000);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1.0p-8f), 0x3F80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6.
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * 0x1.0p-8f), 0x3F82);
  // Just above the halfway point rounds up.
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x3F808001u)), 0x3F81);
  // FLT_MAX is past bf16's largest finite value by more than half an ULP: +Inf.
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_bits_to_float(0x3F82), 1.015625f);
}

TEST(KdaInputs, AreAPureFunctionOfSeedAndIndexAndBf16Exact) {
  const InputSpec spec{42, 3, 5, 16, 24};
  const BatchInputs a = batch_inputs(spec);
  const BatchInputs b = batch_inputs(spec);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.beta, b.beta);
  InputSpec other = spec;
  other.seed = 43;
  EXPECT_NE(batch_inputs(other).q, a.q);
  // One (b, h) drawn alone is the batch's slice: any batch size sees the same head.
  HeadInputs one;
  head_inputs(spec, 2, 4, one);
  const std::size_t bh = 2 * 5 + 4;
  EXPECT_EQ(std::vector<std::uint16_t>(a.k.begin() + bh * 16, a.k.begin() + (bh + 1) * 16), one.k);
  EXPECT_EQ(std::vector<float>(a.state.begin() + bh * 16 * 24, a.state.begin() + (bh + 1) * 16 * 24), one.state);
  EXPECT_EQ(a.beta[bh], one.beta);
  InputSpec bigger = spec;
  bigger.batch = 7;
  HeadInputs same;
  head_inputs(bigger, 2, 4, same);
  EXPECT_EQ(same.v, one.v);
  for (std::size_t h = 0; h < spec.heads; ++h) {
    EXPECT_GE(a.a_log[h], 0.0f);
    EXPECT_LE(a.a_log[h], std::log(16.0f));
  }
  for (const float x : a.dt_bias) {
    EXPECT_GT(x, -1.0f);
    EXPECT_LT(x, 1.0f);
  }
  for (const std::uint16_t x : a.beta) {
    EXPECT_GT(bf16_bits_to_float(x), 0.0f);
    EXPECT_LT(bf16_bits_to_float(x), 1.0f);
  }
  for (const float x : a.state) EXPECT_LT(std::fabs(x), 1.0f);
  EXPECT_THROW(batch_inputs(InputSpec{1, 0, 1, 1, 1}), std::invalid_argument);
}

// K = V = 2, one head: q = (3, 4), k = (1, 0), g_raw = dt_bias = 0, A_log = 0,
// so every gate is -5 * sigmoid(0) = -2.5 and every decay d = exp(-2.5);
// S0 = [[1, 2], [3, 4]], v = (1, -1), beta = 0.5. By hand, with
// kn = 1 / sqrt(1 + 1e-6) and qn = (3, 4) / sqrt(25 + 1e-6) / sqrt(2):
//   S^T k after decay = (d kn, 2 d kn);  u = 0.5 (1 - d kn, -1 - 2 d kn)
//   S1 = [[d + kn u0, 2d + kn u1], [3d, 4d]];  o = qn0 S1[0, :] + qn1 S1[1, :].
struct HandCase {
  BatchInputs in;
  double s1[2][2];
  double o[2];
};

HandCase hand_case() {
  HandCase c;
  c.in.spec = InputSpec{0, 1, 1, 2, 2};
  c.in.q = {float_to_bf16_bits(3.0f), float_to_bf16_bits(4.0f)};
  c.in.k = {float_to_bf16_bits(1.0f), float_to_bf16_bits(0.0f)};
  c.in.g_raw = {float_to_bf16_bits(0.0f), float_to_bf16_bits(0.0f)};
  c.in.v = {float_to_bf16_bits(1.0f), float_to_bf16_bits(-1.0f)};
  c.in.beta = {float_to_bf16_bits(0.5f)};
  c.in.a_log = {0.0f};
  c.in.dt_bias = {0.0f, 0.0f};
  c.in.state = {1.0f, 2.0f, 3.0f, 4.0f};
  const double d = std::exp(-2.5);
  const double kn = 1.0 / std::sqrt(1.0 + 1e-6);
  const double qs = 1.0 / std::sqrt(25.0 + 1e-6) / std::sqrt(2.0);
  const double u0 = 0.5 * (1.0 - d * kn), u1 = 0.5 * (-1.0 - 2.0 * d * kn);
  c.s1[0][0] = d + kn * u0;
  c.s1[0][1] = 2 * d + kn * u1;
  c.s1[1][0] = 3 * d;
  c.s1[1][1] = 4 * d;
  c.o[0] = 3 * qs * c.s1[0][0] + 4 * qs * c.s1[1][0];
  c.o[1] = 3 * qs * c.s1[0][1] + 4 * qs * c.s1[1][1];
  return c;
}

HeadInputs head_of(const BatchInputs& in) {
  HeadInputs h;
  h.q = in.q;
  h.k = in.k;
  h.g_raw = in.g_raw;
  h.v = in.v;
  h.beta = in.beta[0];
  h.state = in.state;
  return h;
}

TEST(KdaDecode, ReferenceMatchesTheHandComputedStep) {
  const HandCase c = hand_case();
  HeadParams p{0.0f, {0.0f, 0.0f}};
  double o[2], s1[4];
  reference_head_step(p, head_of(c.in), o, s1);
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(o[i], c.o[i], 1e-15) << i;
    for (int j = 0; j < 2; ++j) EXPECT_NEAR(s1[i * 2 + j], c.s1[i][j], 1e-15) << i << j;
  }
}

TEST(KdaDecode, CpuPathMatchesTheHandComputedStepInBothVersions) {
  const HandCase c = hand_case();
  for (const Version v : {Version::v0, Version::v3}) {
    float o[2], s1[4];
    decode_step_cpu(v, c.in, StepOptions{}, o, s1);
    for (int i = 0; i < 2; ++i) {
      // fp32: a few units of 2^-24 relative on values of order 1.
      EXPECT_NEAR(o[i], c.o[i], 1e-6) << to_string(v) << " o" << i;
      for (int j = 0; j < 2; ++j) EXPECT_NEAR(s1[i * 2 + j], c.s1[i][j], 1e-6) << to_string(v) << i << j;
    }
  }
}

TEST(KdaDecode, GateSpansItsRangeAndLowerBoundZeroMeansNoDecay) {
  BatchInputs in;
  in.spec = InputSpec{0, 1, 1, 3, 1};
  in.q = {float_to_bf16_bits(1.0f), float_to_bf16_bits(1.0f), float_to_bf16_bits(1.0f)};
  in.k = in.q;
  // a = exp(log 2) = 2: x = 2 (g_raw + bias) = 0, +40, -40.
  in.g_raw = {float_to_bf16_bits(0.5f), float_to_bf16_bits(20.0f), float_to_bf16_bits(-20.0f)};
  in.dt_bias = {-0.5f, 0.0f, 0.0f};
  in.a_log = {std::log(2.0f)};
  RowFactors f;
  row_factors(in, 0, 0, StepOptions{}, f);
  EXPECT_NEAR(f.decay[0], std::exp(-2.5), 1e-7);
  EXPECT_NEAR(f.decay[1], std::exp(-5.0), 1e-7);  // sigmoid(40) = 1: the lower bound
  EXPECT_NEAR(f.decay[2], 1.0, 1e-7);             // sigmoid(-40) = 0: no decay
  // Normalisation: |k| = sqrt(3), q also scaled by K^-0.5 = 3^-0.5.
  EXPECT_NEAR(f.k[0], 1.0 / std::sqrt(3.0 + 1e-6), 1e-7);
  EXPECT_NEAR(f.q[0], 1.0 / std::sqrt(3.0 + 1e-6) / std::sqrt(3.0), 1e-7);
  row_factors(in, 0, 0, StepOptions{0.0f}, f);
  for (const float d : f.decay) EXPECT_EQ(d, 1.0f);
}

TEST(KdaDecode, V0AndV3AreBitIdenticalOnTheCpu) {
  // V = 80: two full V-tiles of 32 and a partial one.
  const BatchInputs in = batch_inputs(InputSpec{7, 3, 4, 48, 80});
  const std::size_t n_o = 3 * 4 * 80, n_s = n_o * 48;
  std::vector<float> o0(n_o), s0(n_s), o3(n_o), s3(n_s);
  decode_step_cpu(Version::v0, in, StepOptions{}, o0.data(), s0.data());
  decode_step_cpu(Version::v3, in, StepOptions{}, o3.data(), s3.data());
  EXPECT_EQ(std::memcmp(o0.data(), o3.data(), n_o * 4), 0);
  EXPECT_EQ(std::memcmp(s0.data(), s3.data(), n_s * 4), 0);
}

// The fp32 floor the gate's tolerance stands on (gates/kda-decode.yaml): on
// full-size heads (K = V = 128) the CPU path sits near 2.3e-7 (o) and 4.5e-8
// (state) relative L2 from the fp64 reference; the bounds here are the gate's.
TEST(KdaDecode, CpuPathIsWithinTheGateToleranceOfTheReference) {
  const InputSpec spec{123, 2, 8, 128, 128};
  const BatchInputs in = batch_inputs(spec);
  const std::size_t V = 128, K = 128, BH = 16;
  std::vector<float> o(BH * V), s(BH * K * V);
  decode_step_cpu(Version::v3, in, StepOptions{}, o.data(), s.data());
  double eo = 0, ro = 0, es = 0, rs = 0;
  std::vector<double> ref_o(V), ref_s(K * V);
  HeadInputs head;
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t h = 0; h < 8; ++h) {
      head_inputs(spec, b, h, head);
      reference_head_step(head_params(spec, h), head, ref_o.data(), ref_s.data());
      const std::size_t bh = b * 8 + h;
      for (std::size_t c = 0; c < V; ++c) {
        eo += std::pow(o[bh * V + c] - ref_o[c], 2);
        ro += ref_o[c] * ref_o[c];
      }
      for (std::size_t i = 0; i < K * V; ++i) {
        es += std::pow(s[bh * K * V + i] - ref_s[i], 2);
        rs += ref_s[i] * ref_s[i];
      }
    }
  }
  EXPECT_LT(std::sqrt(eo / ro), 1e-6);
  EXPECT_LT(std::sqrt(es / rs), 4e-7);
  // The planted bug (no decay) is far outside: the state moves at order 1.
  std::vector<float> s_bad(BH * K * V), o_bad(BH * V);
  decode_step_cpu(Version::v3, in, StepOptions{0.0f}, o_bad.data(), s_bad.data());
  double eb = 0;
  for (std::size_t i = 0; i < s.size(); ++i) eb += std::pow(s_bad[i] - s[i], 2);
  EXPECT_GT(std::sqrt(eb / rs), 0.1);
}

}  // namespace
}  // namespace densefeed::kda_decode
