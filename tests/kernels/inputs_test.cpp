// The inputs are a function of (seed, head, token) only, and have the shape the
// regimes promise.
#include "inputs.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace densefeed::affine_chain {
namespace {

InputSpec spec(Regime regime, std::uint64_t seed = 42, std::size_t k = 64, std::size_t v = 48) {
  InputSpec s;
  s.seed = seed;
  s.regime = regime;
  s.dim_k = k;
  s.dim_v = v;
  return s;
}

// Token i of `block` equals token j of `other` in every field, bit for bit.
void expect_same_token(const TokenBlock& a, std::size_t i, const TokenBlock& b, std::size_t j) {
  const std::size_t K = a.dim_k;
  const std::size_t V = a.dim_v;
  for (std::size_t c = 0; c < K; ++c) {
    ASSERT_EQ(a.keys[i * K + c], b.keys[j * K + c]);
    ASSERT_EQ(a.alpha[i * K + c], b.alpha[j * K + c]);
  }
  for (std::size_t c = 0; c < V; ++c) ASSERT_EQ(a.values[i * V + c], b.values[j * V + c]);
  ASSERT_EQ(a.beta[i], b.beta[j]);
}

class InputsByRegime : public ::testing::TestWithParam<Regime> {};

TEST_P(InputsByRegime, TokenDependsOnlyOnSeedHeadAndIndex) {
  const HeadInputs inputs(spec(GetParam()), 3);
  const TokenBlock whole = inputs.tokens(0, 200);
  // Other segmentations of the same range: chunks of 64 from 0, an odd cut at
  // 37, single tokens, and a second object built from the same spec.
  const HeadInputs again(spec(GetParam()), 3);
  for (std::size_t t0 : {0u, 64u, 128u, 192u}) {
    const TokenBlock part = again.tokens(t0, std::min<std::size_t>(64, 200 - t0));
    for (std::size_t i = 0; i < part.count; ++i) expect_same_token(whole, t0 + i, part, i);
  }
  const TokenBlock odd = inputs.tokens(37, 101);
  for (std::size_t i = 0; i < odd.count; ++i) expect_same_token(whole, 37 + i, odd, i);
  const TokenBlock one = inputs.tokens(199, 1);
  expect_same_token(whole, 199, one, 0);
  EXPECT_EQ(inputs.initial_state(2), again.initial_state(2));
}

TEST_P(InputsByRegime, SeedsHeadsAndSequencesDiffer) {
  const TokenBlock a = HeadInputs(spec(GetParam(), 1), 0).tokens(10, 1);
  const TokenBlock b = HeadInputs(spec(GetParam(), 2), 0).tokens(10, 1);
  const TokenBlock c = HeadInputs(spec(GetParam(), 1), 1).tokens(10, 1);
  EXPECT_NE(a.keys, b.keys);
  EXPECT_NE(a.values, b.values);
  EXPECT_NE(a.alpha, b.alpha);
  EXPECT_NE(a.beta, b.beta);
  EXPECT_NE(a.keys, c.keys);
  EXPECT_NE(a.values, c.values);
  const HeadInputs h(spec(GetParam(), 1), 0);
  EXPECT_NE(h.initial_state(0), h.initial_state(1));
  EXPECT_NE(h.initial_state(0), HeadInputs(spec(GetParam(), 2), 0).initial_state(0));
}

TEST_P(InputsByRegime, RangesOfEveryField) {
  const InputSpec s = spec(GetParam());
  const TokenBlock b = HeadInputs(s, 0).tokens(0, 500);
  const std::size_t K = s.dim_k;
  for (std::size_t i = 0; i < b.count; ++i) {
    double sq = 0.0;
    for (std::size_t c = 0; c < K; ++c) sq += b.keys[i * K + c] * b.keys[i * K + c];
    EXPECT_NEAR(std::sqrt(sq), 1.0, 1e-14) << "token " << i;
    EXPECT_GT(b.beta[i], 0.0);
    EXPECT_LT(b.beta[i], 1.0);
    for (std::size_t c = 0; c < K; ++c) {
      const double a = b.alpha[i * K + c];
      if (GetParam() == Regime::long_memory) {
        ASSERT_GT(a, 1.0 - kLongMemoryDecaySpan);
        ASSERT_LT(a, 1.0);
      } else {
        ASSERT_GT(a, std::exp(-kFastDecayScale));
        ASSERT_LT(a, 1.0);
      }
    }
  }
  // Values and initial states look like N(0, 1): mean ~ 0, variance ~ 1.
  double sum = 0.0;
  double sq = 0.0;
  for (double x : b.values) {
    sum += x;
    sq += x * x;
  }
  const double n = static_cast<double>(b.values.size());
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(sq / n, 1.0, 0.03);
  const std::vector<double> s0 = HeadInputs(s, 0).initial_state(0);
  ASSERT_EQ(s0.size(), s.dim_k * s.dim_v);
  for (double x : s0) ASSERT_EQ(x, static_cast<double>(static_cast<float>(x)));
}

INSTANTIATE_TEST_SUITE_P(Regimes, InputsByRegime,
                         ::testing::Values(Regime::long_memory, Regime::fast_decay),
                         [](const auto& param_info) {
                           return param_info.param == Regime::long_memory ? "LongMemory"
                                                                          : "FastDecay";
                         });

TEST(Inputs, LongMemoryKeysLieInARank32Subspace) {
  const InputSpec s = spec(Regime::long_memory, 7, 128, 16);
  const HeadInputs inputs(s, 1);
  ASSERT_EQ(inputs.key_rank(), 32u);
  const std::vector<double>& B = inputs.key_basis();
  const std::size_t K = 128;
  const std::size_t r = 32;
  // The basis is orthonormal: B^T B = I.
  for (std::size_t p = 0; p < r; ++p) {
    for (std::size_t q = 0; q < r; ++q) {
      double dot = 0.0;
      for (std::size_t i = 0; i < K; ++i) dot += B[i * r + p] * B[i * r + q];
      ASSERT_NEAR(dot, p == q ? 1.0 : 0.0, 1e-13);
    }
  }
  // Every key equals its projection B B^T k.
  const TokenBlock b = inputs.tokens(1000, 300);
  for (std::size_t t = 0; t < b.count; ++t) {
    const double* k = &b.keys[t * K];
    std::vector<double> coef(r, 0.0);
    for (std::size_t q = 0; q < r; ++q) {
      for (std::size_t i = 0; i < K; ++i) coef[q] += B[i * r + q] * k[i];
    }
    double residual = 0.0;
    for (std::size_t i = 0; i < K; ++i) {
      double proj = 0.0;
      for (std::size_t q = 0; q < r; ++q) proj += B[i * r + q] * coef[q];
      residual += (k[i] - proj) * (k[i] - proj);
    }
    ASSERT_LT(std::sqrt(residual), 1e-13) << "token " << t;
  }
  // And they span all 32 directions, not fewer: the Gram matrix of 300 keys in
  // basis coordinates has full rank (smallest pivot of its Cholesky well above 0).
  std::vector<double> gram(r * r, 0.0);
  for (std::size_t t = 0; t < b.count; ++t) {
    std::vector<double> coef(r, 0.0);
    for (std::size_t q = 0; q < r; ++q) {
      for (std::size_t i = 0; i < K; ++i) coef[q] += B[i * r + q] * b.keys[t * K + i];
    }
    for (std::size_t p = 0; p < r; ++p) {
      for (std::size_t q = 0; q < r; ++q) gram[p * r + q] += coef[p] * coef[q];
    }
  }
  for (std::size_t j = 0; j < r; ++j) {
    for (std::size_t p = 0; p < j; ++p) gram[j * r + j] -= gram[j * r + p] * gram[j * r + p];
    ASSERT_GT(gram[j * r + j], 0.5) << "pivot " << j;
    gram[j * r + j] = std::sqrt(gram[j * r + j]);
    for (std::size_t i = j + 1; i < r; ++i) {
      for (std::size_t p = 0; p < j; ++p) gram[i * r + j] -= gram[i * r + p] * gram[j * r + p];
      gram[i * r + j] /= gram[j * r + j];
    }
  }
}

TEST(Inputs, FastDecayKeysAreFullRankAndHeadsHaveDifferentBases) {
  EXPECT_EQ(HeadInputs(spec(Regime::fast_decay), 0).key_rank(), 0u);
  EXPECT_TRUE(HeadInputs(spec(Regime::fast_decay), 0).key_basis().empty());
  EXPECT_NE(HeadInputs(spec(Regime::long_memory), 0).key_basis(),
            HeadInputs(spec(Regime::long_memory), 1).key_basis());
  // K below 32: the "subspace" is the whole space.
  EXPECT_EQ(HeadInputs(spec(Regime::long_memory, 1, 16, 16), 0).key_rank(), 16u);
}

TEST(Inputs, ParseRegime) {
  EXPECT_EQ(parse_regime("long-memory"), Regime::long_memory);
  EXPECT_EQ(parse_regime("fast-decay"), Regime::fast_decay);
  EXPECT_EQ(parse_regime("long_memory"), std::nullopt);
  EXPECT_EQ(to_string(Regime::fast_decay), "fast-decay");
}

}  // namespace
}  // namespace densefeed::affine_chain
