#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <stdexcept>

#include "bench_statistics.h"
#include "statistics.h"

namespace densefeed {
namespace {

// ---- Wilcoxon signed-rank test -------------------------------------------
// Exact values: W+ is the sum of the ranks of the positive values; under H0
// each of the 2^n sign patterns is equally likely, so P(W+ <= w) is the number
// of subsets of the ranks {1..n} whose sum is <= w, over 2^n. Upper-tail
// values match the T+ table of Hollander & Wolfe (1999, 2nd ed., Table A.4).

TEST(BenchStatisticsWilcoxon, NineAllPositiveIsTwoIn512) {
  // W+ = 45, the maximum: only the all-positive pattern reaches it, so
  // P(W+ >= 45) = 1/512 and p = 2/512.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({1, 2, 3, 4, 5, 6, 7, 8, 9}), 0.00390625);
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({-0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7, -0.8, -0.9}), 0.00390625);
}

TEST(BenchStatisticsWilcoxon, TenWithWPlusEightMatchesTable) {
  // Ranks 1, 2, 5 positive: W+ = 8. Subsets of {1..10} with sum s <= 8:
  // s=0:1 ({}), 1:1, 2:1, 3:2 ({3},{1,2}), 4:2 ({4},{1,3}), 5:3 ({5},{1,4},{2,3}),
  // 6:4 ({6},{1,5},{2,4},{1,2,3}), 7:5 ({7},{1,6},{2,5},{3,4},{1,2,4}),
  // 8:6 ({8},{1,7},{2,6},{3,5},{1,2,5},{1,3,4}) -> 25. P(W+ <= 8) = 25/1024
  // (Table A.4: P(T+ >= 47) = .024 for n = 10), p = 50/1024 = 0.048828125.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({1, 2, 5, -3, -4, -6, -7, -8, -9, -10}), 0.048828125);
}

TEST(BenchStatisticsWilcoxon, SmallNByHandEnumeration) {
  // n = 8, ranks 1, 2, 4..8 positive, rank 3 negative: W+ = 33, W- = 3.
  // P(W+ >= 33) = P(W- <= 3) = #{ {}, {1}, {2}, {3}, {1,2} } / 256 = 5/256; p = 10/256.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({1, 2, -3, 4, 5, 6, 7, 8}), 0.0390625);
  // n = 6, ranks 1, 2 negative: W- = 3, again 5 subsets: p = 10/64.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({-1, -2, 3, 4, 5, 6}), 0.15625);
  // n = 5, all positive: the smallest p with five values is 2/32 > 0.05.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({1, 2, 3, 4, 5}), 0.0625);
  // n = 3, {1, 2, -3}: W+ = 3 = n(n+1)/4, the centre. P(W+ <= 3) = #{ {}, {1},
  // {2}, {3}, {1,2} } / 8 = 5/8 = P(W+ >= 3); 2 * 5/8 > 1, so p = 1.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({1, 2, -3}), 1.0);
}

TEST(BenchStatisticsWilcoxon, TiesGetAverageRanksAndTheTiedNullDistribution) {
  // |x| = {1, 1, 1, 2, 3}: average ranks 2, 2, 2, 4, 5 (doubled 4, 4, 4, 8, 10,
  // summing to 30). Positives: one 1, 2 and 3: doubled W+ = 4 + 8 + 10 = 22.
  // P(2W+ >= 22) = P(complement <= 8): {}, three {4}, three {4,4}, {8} = 8 of 32.
  // p = 16/32. Ranks 1..5 in sort order would give W+ = 10, 11 or 12 and
  // p = 0.625, 0.4375 or 0.3125; average ranks on the untied distribution 0.4375.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({1, -1, -1, 2, 3}), 0.5);
}

TEST(BenchStatisticsWilcoxon, PublishedExampleWithTiesAndZeros) {
  // Bortz, Lienert & Boehnke's paired example as run on R-help (2006-08-25,
  // "exact Wilcoxon signed rank test with ties"): exactRankTests::wilcox.exact
  // gives V = 13, p-value = 0.1367. Differences x1 - x2: five zeros dropped,
  // |d| = six 1s (rank 3.5), two 2s (7.5), two 4s (9.5); positives one 1 and
  // one 4: W+ = 13. Exact conditional p = 35/256 = 0.13671875.
  const std::vector<double> x1 = {9, 14, 8, 11, 14, 10, 8, 14, 12, 14, 13, 9, 15, 12, 9};
  const std::vector<double> x2 = {13, 15, 9, 12, 16, 10, 8, 13, 12, 16, 9, 10, 16, 12, 9};
  std::vector<double> d;
  for (std::size_t i = 0; i < x1.size(); ++i) d.push_back(x1[i] - x2[i]);
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p(d), 35.0 / 256);
}

TEST(BenchStatisticsWilcoxon, ZerosAreDropped) {
  // With the zeros dropped this is n = 9 all positive (2/512). Keeping the
  // zeros as the two smallest values (rank 1.5 each, sign free under H0) would
  // make n = 11, W+ = 63 of 66 and p = 10/2048.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({0, 1, 2, 0, 3, 4, 5, 6, 7, 8, 9}), 0.00390625);
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({0, 0, 0}), 1.0);
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({}), 1.0);
}

TEST(BenchStatisticsWilcoxon, ExactUpTo50ApproximateFrom51) {
  std::vector<double> x;
  for (int i = 1; i <= 50; ++i) x.push_back(i);
  // Exact: only the all-positive pattern reaches W+ = 1275: p = 2 / 2^50.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p(x), std::ldexp(1.0, -49));
  x.push_back(51);
  // Normal: mean 51*52/4 = 663, variance 51*52*103/24 = 11381.5, W+ = 1326;
  // z = (1326 - 663 - 0.5) / sqrt(11381.5) = 6.2099218; p = erfc(z / sqrt 2)
  // = 5.3010975e-10 (the exact value would be 2^-50 = 8.9e-16).
  EXPECT_NEAR(wilcoxon_signed_rank_p(x) / 5.301097466706048e-10, 1.0, 1e-9);
}

TEST(BenchStatisticsWilcoxon, LargeNNormalApproximation) {
  // n = 60, values 1..35 negative, 36..60 positive: W+ = sum(36..60) = 1200.
  // Mean 60*61/4 = 915, variance 60*61*121/24 = 18452.5;
  // z = (1200 - 915 - 0.5) / sqrt(18452.5) = 2.0943761; p = erfc(z / sqrt 2)
  // = 0.0362264942 (exact enumeration: 0.0355631738).
  std::vector<double> x;
  for (int i = 1; i <= 60; ++i) x.push_back(i <= 35 ? -i : i);
  EXPECT_NEAR(wilcoxon_signed_rank_p(x), 0.03622649417878664, 1e-12);
  // The mirror, W+ = 630 in the lower tail, has the same two-sided p.
  for (double& v : x) v = -v;
  EXPECT_NEAR(wilcoxon_signed_rank_p(x), 0.03622649417878664, 1e-12);
}

TEST(BenchStatisticsWilcoxon, LargeNTieCorrection) {
  // n = 60, |x| = 1..30 each twice (30 tie groups of 2), 1..18 negative:
  // W+ = ranks 37..60 = 1164. Variance 18452.5 - 30 * (8 - 2) / 48 = 18448.75;
  // z = (1164 - 915 - 0.5) / sqrt(18448.75) = 1.8295443; p = erfc(z / sqrt 2)
  // = 0.0673181153 (without the tie term: 0.0673108...).
  std::vector<double> x;
  for (int i = 1; i <= 60; ++i) {
    const double v = (i + 1) / 2;
    x.push_back(i <= 36 ? -v : v);
  }
  EXPECT_NEAR(wilcoxon_signed_rank_p(x), 0.06731811529710895, 1e-12);
}

TEST(BenchStatisticsWilcoxon, RejectsNonFinite) {
  EXPECT_THROW(wilcoxon_signed_rank_p({1, NAN, 2}), std::invalid_argument);
}

// ---- Bootstrap CI of the median -------------------------------------------

TEST(BenchStatisticsBootstrap, ThreePointSampleHasKnownPercentiles) {
  // Resamples of {1, 2, 3}: the median is 1 when two or three draws are 1:
  // 3 * (1/3)^2 * (2/3) + (1/3)^3 = 7/27 = 0.259, likewise 3; 2 otherwise
  // (13/27). The 2.5% and 97.5% points are 1 and 3, so are the 20% and 80%
  // points (0.259 > 0.2, 13 standard errors away at 10000 resamples); the 35%
  // and 65% points are both 2 (0.259 < 0.35, 0.741 > 0.65, 20 away).
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const Interval wide = bootstrap_median_ci({1, 2, 3}, 0.95, 10000, seed);
    EXPECT_EQ(wide.lo, 1.0);
    EXPECT_EQ(wide.hi, 3.0);
    const Interval middle = bootstrap_median_ci({1, 2, 3}, 0.60, 10000, seed);
    EXPECT_EQ(middle.lo, 1.0);
    EXPECT_EQ(middle.hi, 3.0);
    const Interval narrow = bootstrap_median_ci({1, 2, 3}, 0.30, 10000, seed);
    EXPECT_EQ(narrow.lo, 2.0);
    EXPECT_EQ(narrow.hi, 2.0);
  }
}

// Deterministic test data, the same on every platform: mt19937_64's output is
// fixed by the standard; uniforms from its top 53 bits, normals by Box &
// Muller (1958).
double uniform(std::mt19937_64& gen) { return static_cast<double>(gen() >> 11) * 0x1.0p-53; }

double normal(std::mt19937_64& gen) {
  const double u1 = 1 - uniform(gen);
  const double u2 = uniform(gen);
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

std::vector<double> normals(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<double> x(n);
  for (double& v : x) v = normal(gen);
  return x;
}

TEST(BenchStatisticsBootstrap, DeterministicForASeedAndContainsTheMedian) {
  const auto x = normals(25, 7);
  const Interval a = bootstrap_median_ci(x, 0.95, 10000, 42);
  const Interval b = bootstrap_median_ci(x, 0.95, 10000, 42);
  EXPECT_EQ(a.lo, b.lo);
  EXPECT_EQ(a.hi, b.hi);
  EXPECT_LT(a.lo, median(x));
  EXPECT_GT(a.hi, median(x));
  // At 10000 resamples the percentiles sit on plateaus of order statistics
  // and often agree across seeds; a single resample's median does not.
  const double one = bootstrap_median_ci(x, 0.95, 1, 42).lo;
  bool differs = false;
  for (std::uint64_t seed = 43; seed < 63; ++seed) differs = differs || bootstrap_median_ci(x, 0.95, 1, seed).lo != one;
  EXPECT_TRUE(differs) << "the seed must drive the resampling";
  const Interval wider = bootstrap_median_ci(x, 0.99, 10000, 42);
  EXPECT_LE(wider.lo, a.lo);
  EXPECT_GE(wider.hi, a.hi);
}

TEST(BenchStatisticsBootstrap, NarrowsWithN) {
  // The median's standard error falls as 1/sqrt(n): 9 -> 225 values should
  // shrink the interval about fivefold; ask for at least twofold.
  const auto small = normals(9, 11);
  const auto large = normals(225, 11);
  const Interval s = bootstrap_median_ci(small, 0.95, 10000, 1);
  const Interval l = bootstrap_median_ci(large, 0.95, 10000, 1);
  EXPECT_GT(s.hi - s.lo, 0);
  EXPECT_LT(l.hi - l.lo, 0.5 * (s.hi - s.lo));
}

TEST(BenchStatisticsBootstrap, RejectsBadArguments) {
  EXPECT_THROW(bootstrap_median_ci({}, 0.95), std::invalid_argument);
  EXPECT_THROW(bootstrap_median_ci({1, 2}, 1.0), std::invalid_argument);
  EXPECT_THROW(bootstrap_median_ci({1, 2}, 0.0), std::invalid_argument);
  EXPECT_THROW(bootstrap_median_ci({1, 2}, 0.95, 0), std::invalid_argument);
}

// ---- Sequential decision ----------------------------------------------------

// `rounds` rounds of `iters` samples of `ms` milliseconds: each round's arm is
// scaled by (1 + round_noise * z) (drift between rounds), each sample by
// (1 + noise * z) (jitter between iterations), z standard normal.
std::vector<ArmRound> arm(int rounds, int iters, double ms, double noise, double round_noise, std::mt19937_64& gen) {
  std::vector<ArmRound> out(static_cast<std::size_t>(rounds));
  for (auto& r : out) {
    const double scale = 1 + round_noise * normal(gen);
    for (int i = 0; i < iters; ++i) r.samples_ms.push_back(ms * scale * (1 + noise * normal(gen)));
  }
  return out;
}

DecisionInput simulated(int rounds, double candidate_ms, double noise, double round_noise, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  DecisionInput in;
  in.base = arm(rounds, 20, 1.0, noise, round_noise, gen);
  in.candidate = arm(rounds, 20, candidate_ms, noise, round_noise, gen);
  return in;
}

// Rounds with exactly the given per-round speedups (base / candidate): base
// samples {0.99, 1, 1.01} ms, the candidate's the same over the speedup.
DecisionInput with_speedups(const std::vector<double>& speedups) {
  DecisionInput in;
  for (double s : speedups) {
    in.base.push_back({{0.99, 1.0, 1.01}, std::nullopt, 0});
    in.candidate.push_back({{0.99 / s, 1.0 / s, 1.01 / s}, std::nullopt, 0});
  }
  return in;
}

DecisionInput steady_slowdown() { return with_speedups(std::vector<double>(9, 1 / 1.1)); }

// ---- Looks and their levels --------------------------------------------------

TEST(BenchStatisticsLooks, DefaultLooksGrowByAboutAThirdAndEndAtTheMaximum) {
  EXPECT_EQ(default_looks(200), (std::vector<int>{4, 6, 8, 11, 15, 20, 27, 36, 48, 64, 85, 113, 150, 200}));
  EXPECT_EQ(default_looks(25), (std::vector<int>{4, 6, 8, 11, 15, 20, 25}));
  EXPECT_EQ(default_looks(4), (std::vector<int>{4}));
  EXPECT_EQ(default_looks(500).back(), 500);
  EXPECT_THROW(default_looks(3), std::invalid_argument);
}

TEST(BenchStatisticsLooks, LevelsSpentOverAnyNumberOfLooksStayBelowAlpha) {
  EXPECT_DOUBLE_EQ(alpha_at_look(0.05, 1), 0.025);
  EXPECT_DOUBLE_EQ(alpha_at_look(0.05, 2), 0.05 / 6);
  double spent = 0;
  for (int k = 1; k <= 1000; ++k) spent += alpha_at_look(0.05, k);
  EXPECT_LT(spent, 0.05);
  EXPECT_NEAR(spent, 0.05 * (1 - 1.0 / 1001), 1e-12);
  EXPECT_THROW(alpha_at_look(0.05, 0), std::invalid_argument);
}

// ---- Sequential decision ----------------------------------------------------

TEST(BenchStatisticsDecide, ThreeSteadyRoundsDecideWhereWilcoxonCannot) {
  // Log-ratios 0.10, 0.12, 0.08: mean 0.1, sd 0.02. Look 1 (round 3) at level
  // 0.025: t(0.9875, 2) = 0.975 / sqrt(2 * 0.9875 * 0.0125) = 6.2053 (Student's
  // t with 2 df in closed form), half-width 6.2053 * 0.02 / sqrt(3) = 0.071654.
  // A gate's own looks may start at 3 (the default's first is 4).
  DecisionInput in = with_speedups({std::exp(0.10), std::exp(0.12), std::exp(0.08)});
  in.looks = {3, 6};
  const Decision d = decide(in);
  EXPECT_EQ(d.verdict, BenchVerdict::faster) << d.reason;
  EXPECT_EQ(d.rounds_used, 3);
  EXPECT_DOUBLE_EQ(d.alpha_at_look, 0.025);
  EXPECT_NEAR(d.speedup, std::exp(0.1), 1e-12);
  EXPECT_NEAR(d.log_ratio_sd, 0.02, 1e-12);
  EXPECT_NEAR(std::log(d.speedup_ci.lo), 0.1 - 0.071654, 1e-5);
  EXPECT_NEAR(std::log(d.speedup_ci.hi), 0.1 + 0.071654, 1e-5);
  // Three positive log-ratios: the exact Wilcoxon p cannot go below 2/8,
  // and it is reported, not required.
  EXPECT_DOUBLE_EQ(d.p_value, 0.25);
  EXPECT_EQ(d.more_rounds, 0);
  EXPECT_EQ(d.reason.rfind("faster: mean log-ratio 0.100 (speedup 1.105x), 97.5% CI [", 0), 0u) << d.reason;
  EXPECT_NE(d.reason.find("beyond +-1.0% after 3 rounds (level 0.025); Wilcoxon p = 0.25"), std::string::npos) << d.reason;
}

TEST(BenchStatisticsDecide, TheH200FlaSlowdownIsSlowerAtFourRounds) {
  // Issue 29: fla-core 0.6.0 against 0.5.2 on the H200, four rounds near
  // 0.76x (p = 0.125 at best) were called inconclusive; now the first look
  // (4 rounds) is slower.
  const Decision d = decide(with_speedups({0.759, 0.752, 0.771, 0.765}));
  EXPECT_EQ(d.verdict, BenchVerdict::slower) << d.reason;
  EXPECT_EQ(d.rounds_used, 4);
  EXPECT_DOUBLE_EQ(d.p_value, 0.125);
  EXPECT_LT(d.speedup_ci.hi, 0.8);
  EXPECT_GT(d.speedup_ci.lo, 0.7);
}

TEST(BenchStatisticsDecide, PlantedTenPercentSlowdownIsSlowerAtTheFirstLook) {
  const Decision d = decide(simulated(9, 1.10, 0.01, 0, 1));
  EXPECT_EQ(d.verdict, BenchVerdict::slower) << d.reason;
  EXPECT_EQ(d.rounds_used, 4);
  EXPECT_NEAR(d.speedup, 1 / 1.1, 0.01);
  EXPECT_LT(d.speedup_ci.hi, 1 / 1.01);
  EXPECT_LE(d.speedup_ci.lo, d.speedup);
  EXPECT_GE(d.speedup_ci.hi, d.speedup);
  EXPECT_NEAR(d.base_median_ms, 1.0, 0.01);
  EXPECT_NEAR(d.candidate_median_ms, 1.1, 0.01);
  EXPECT_FALSE(d.guard_spread || d.guard_clock || d.guard_throttle);
  EXPECT_EQ(d.reason.rfind("slower: mean log-ratio -0.09", 0), 0u) << d.reason;
}

TEST(BenchStatisticsDecide, MirrorSpeedupIsFaster) {
  const Decision d = decide(with_speedups(std::vector<double>(9, 1.1)));
  EXPECT_EQ(d.verdict, BenchVerdict::faster) << d.reason;
  EXPECT_NEAR(d.speedup, 1.1, 1e-12);
  EXPECT_NEAR(d.speedup_ci.lo, 1.1, 1e-12);  // no spread between rounds: the interval is the point
}

TEST(BenchStatisticsDecide, IdenticalArmsAreSame) {
  // The same code measured twice: 1% jitter within rounds, nothing planted.
  const Decision d = decide(simulated(9, 1.0, 0.01, 0, 1));
  EXPECT_EQ(d.verdict, BenchVerdict::same) << d.reason;
  EXPECT_GT(d.speedup_ci.lo, 1 / 1.01);
  EXPECT_LT(d.speedup_ci.hi, 1.01);
  // Bit-identical samples: every log-ratio is 0, p = 1, CI [1, 1].
  DecisionInput twin = simulated(9, 1.0, 0.01, 0, 1);
  twin.candidate = twin.base;
  const Decision t = decide(twin);
  EXPECT_EQ(t.verdict, BenchVerdict::same) << t.reason;
  EXPECT_DOUBLE_EQ(t.p_value, 1.0);
  EXPECT_DOUBLE_EQ(t.speedup, 1.0);
}

TEST(BenchStatisticsDecide, AHalfPercentUnderFivePercentRoundNoiseNeedsMoreRounds) {
  // 0.5% faster candidate, each round's arm drifting by 5% (sd): too noisy
  // for nine rounds to place the interval inside (or beyond) 1%.
  const DecisionInput in = simulated(9, 0.995, 0.01, 0.05, 1);
  const Decision d = decide(in);
  EXPECT_EQ(d.verdict, BenchVerdict::inconclusive) << d.reason;
  EXPECT_FALSE(d.guard_clock || d.guard_throttle) << d.reason;
  EXPECT_EQ(d.reason.rfind("needs 2 more rounds (inconclusive: ", 0), 0u) << d.reason;  // look 8 seen, look 11 next
  EXPECT_NE(d.more_rounds, 0);
  EXPECT_FALSE(should_stop(in));
}

TEST(BenchStatisticsDecide, TheEstimateOfMoreRoundsIsWhatALaterLookNeeds) {
  // Log-ratios alternating 0.05 +- 0.04 (sd ~0.042): at 8 rounds the interval
  // crosses +1%. The estimate names a look whose interval, at this mean and
  // sd, would clear the band; running that many rounds of the same pattern
  // decides faster there.
  std::vector<double> speedups;
  for (int i = 0; i < 8; ++i) speedups.push_back(std::exp(i % 2 ? 0.09 : 0.01));
  const Decision d = decide(with_speedups(speedups));
  ASSERT_EQ(d.verdict, BenchVerdict::inconclusive) << d.reason;
  ASSERT_GT(d.more_rounds, 0) << d.reason;
  std::vector<double> longer;
  for (int i = 0; i < 8 + d.more_rounds; ++i) longer.push_back(std::exp(i % 2 ? 0.09 : 0.01));
  const Decision later = decide(with_speedups(longer));
  EXPECT_EQ(later.verdict, BenchVerdict::faster) << later.reason;
  EXPECT_EQ(later.rounds_used, 8 + d.more_rounds);
  // A mean on the band's edge: no look ever decides.
  std::vector<double> edge;
  for (int i = 0; i < 8; ++i) edge.push_back(1.01 * std::exp(i % 2 ? 0.02 : -0.02));
  EXPECT_EQ(decide(with_speedups(edge)).more_rounds, -1);
}

TEST(BenchStatisticsDecide, ConsistentDifferenceInsideThresholdIsSame) {
  const Decision d = decide(with_speedups({1.002, 1.0025, 1.003, 1.0035, 1.004, 1.0022, 1.0027, 1.0032, 1.0037}));
  EXPECT_EQ(d.verdict, BenchVerdict::same) << d.reason;
}

TEST(BenchStatisticsDecide, AnIntervalCrossingTheBandIsNotFasterHoweverSignificant) {
  // All nine rounds favour the candidate (Wilcoxon p = 2/512) but four by
  // less than 1%: the interval of the mean crosses +1%.
  DecisionInput in = with_speedups({1.002, 1.004, 1.006, 1.008, 1.030, 1.032, 1.034, 1.036, 1.038});
  in.looks = {9};
  const Decision d = decide(in);
  EXPECT_DOUBLE_EQ(d.p_value, 0.00390625);
  EXPECT_EQ(d.verdict, BenchVerdict::inconclusive) << d.reason;
  EXPECT_NE(d.reason.find("crosses +-1.0%"), std::string::npos) << d.reason;
}

TEST(BenchStatisticsDecide, OneOutlyingRoundWidensTheIntervalInsteadOfDecidingAlone) {
  // One round 40% slower, then eight 5-9% faster: at every look the outlier
  // pulls the mean towards 1 and widens the interval across +1%: not faster.
  const Decision d = decide(with_speedups({0.6, 1.05, 1.055, 1.06, 1.065, 1.07, 1.075, 1.08, 1.09}));
  EXPECT_EQ(d.verdict, BenchVerdict::inconclusive) << d.reason;
  EXPECT_LT(d.speedup_ci.lo, 1.0);
}

TEST(BenchStatisticsDecide, ThresholdWidensWhatCountsAsSame) {
  DecisionInput in = steady_slowdown();
  in.threshold = 0.2;  // a calibrated noise floor of 20%: a 10% slowdown is noise
  EXPECT_EQ(decide(in).verdict, BenchVerdict::same);
}

TEST(BenchStatisticsDecide, SpreadWithinRoundsIsReportedNotABlockWhenThePairsDecide) {
  // Issue 29: a shared machine's arm spread of 10% or more no longer blocks
  // a verdict the paired ratios reach.
  DecisionInput in = with_speedups(std::vector<double>(9, 1.10));
  for (auto& r : in.candidate) r.samples_ms = {0.8 / 1.1, 0.9 / 1.1, 1.0 / 1.1, 1.1 / 1.1, 1.2 / 1.1};
  Decision d = decide(in);
  EXPECT_EQ(d.verdict, BenchVerdict::faster) << d.reason;
  EXPECT_FALSE(d.guard_spread);
  EXPECT_GE(d.candidate_relative_spread, 0.10);
  EXPECT_NE(d.reason.find("(reported: the paired ratios decide)"), std::string::npos) << d.reason;
  // The same for same.
  in = with_speedups(std::vector<double>(9, 1.0));
  for (auto& r : in.candidate) r.samples_ms = {0.8, 0.9, 1.0, 1.1, 1.2};
  d = decide(in);
  EXPECT_EQ(d.verdict, BenchVerdict::same) << d.reason;
  // A candidate 1.6x slower that makes its own samples noisy (55% spread)
  // to escape `slower`: still slower.
  in = with_speedups(std::vector<double>(9, 1 / 1.6));
  for (auto& r : in.candidate) r.samples_ms = {1.0, 1.3, 1.6, 2.0, 2.4};
  d = decide(in);
  EXPECT_EQ(d.verdict, BenchVerdict::slower) << d.reason;
}

TEST(BenchStatisticsDecide, SpreadGuardNamesANoisyArmWhenThePairsCannotDecide) {
  // Per-round ratios swinging 0.8x..1.25x with a 30% spread in the base: inconclusive, spread named.
  DecisionInput in = with_speedups({1.25, 0.8, 1.25, 0.8, 1.25, 0.8, 1.25, 0.8, 1.25});
  for (std::size_t i = 0; i < in.base.size(); ++i) {
    const double m = median(in.base[i].samples_ms);
    in.base[i].samples_ms = {0.7 * m, 0.85 * m, m, 1.15 * m, 1.3 * m};
  }
  const Decision d = decide(in);
  EXPECT_EQ(d.verdict, BenchVerdict::inconclusive) << d.reason;
  EXPECT_TRUE(d.guard_spread);
  EXPECT_NE(d.reason.find("(the paired ratios are too spread to decide)"), std::string::npos) << d.reason;
}

TEST(BenchStatisticsDecide, ClockGuard) {
  DecisionInput in = steady_slowdown();
  for (auto& r : in.base) r.sm_clock_mhz = 1500;
  // One arm reports clocks: nothing to compare.
  EXPECT_FALSE(decide(in).guard_clock);
  // 1514 MHz is 0.93% above 1500: within 1%.
  for (auto& r : in.candidate) r.sm_clock_mhz = 1514;
  Decision d = decide(in);
  EXPECT_FALSE(d.guard_clock);
  EXPECT_EQ(d.verdict, BenchVerdict::slower) << d.reason;
  // 1516 MHz is 1.07% above: the clocks, not the code, may explain the gap.
  for (auto& r : in.candidate) r.sm_clock_mhz = 1516;
  d = decide(in);
  EXPECT_TRUE(d.guard_clock);
  EXPECT_EQ(d.verdict, BenchVerdict::slower) << d.reason;  // a slowdown stands whatever the guards
  EXPECT_NE(d.reason.find("SM clocks base 1500 MHz, candidate 1516 MHz"), std::string::npos) << d.reason;
  // A speedup under differing clocks is held back, and more rounds cannot clear that.
  DecisionInput fast = with_speedups(std::vector<double>(9, 1.1));
  for (auto& r : fast.base) r.sm_clock_mhz = 1500;
  for (auto& r : fast.candidate) r.sm_clock_mhz = 1600;
  d = decide(fast);
  EXPECT_EQ(d.verdict, BenchVerdict::inconclusive) << d.reason;
  EXPECT_EQ(d.more_rounds, -1);
  // The median clock counts: two outlying rounds do not trip the guard.
  for (auto& r : in.candidate) r.sm_clock_mhz = 1500;
  in.candidate[0].sm_clock_mhz = 1700;
  in.candidate[1].sm_clock_mhz = 1300;
  EXPECT_FALSE(decide(in).guard_clock);
}

TEST(BenchStatisticsDecide, ThrottleGuard) {
  // 4 rounds (look 1) x 2 arms x 5 samples = 40 samples: 4 throttled is 10%, not more.
  DecisionInput in = with_speedups(std::vector<double>(4, 1.1));
  for (auto& r : in.base) r.samples_ms = {0.98, 0.99, 1.0, 1.01, 1.02};
  for (auto& r : in.candidate) r.samples_ms = {0.98 / 1.1, 0.99 / 1.1, 1.0 / 1.1, 1.01 / 1.1, 1.02 / 1.1};
  for (auto& r : in.base) r.throttled = 1;
  Decision d = decide(in);
  EXPECT_FALSE(d.guard_throttle);
  EXPECT_EQ(d.verdict, BenchVerdict::faster) << d.reason;
  in.candidate[2].throttled = 1;  // 5 of 40 = 12.5%
  d = decide(in);
  EXPECT_TRUE(d.guard_throttle);
  EXPECT_EQ(d.verdict, BenchVerdict::inconclusive) << d.reason;
  EXPECT_NE(d.reason.find("5 of 40 samples throttled"), std::string::npos) << d.reason;
}

// Issue 29's hostile trial: a candidate fast in 9 iterations of 10 and
// stalling in the tenth (deferred work) wins every per-round median; its
// total time is what the arms cost.
DecisionInput stalling(double stall_ms, int rounds = 8) {
  DecisionInput in;
  for (int r = 0; r < rounds; ++r) {
    const double j = 1 + 0.002 * (r % 3 - 1);
    ArmRound b, c;
    for (int i = 0; i < 10; ++i) {
      b.samples_ms.push_back(1.0 * j * (1 + 0.001 * i));
      c.samples_ms.push_back(i == r % 10 ? stall_ms * j : 0.5 * j * (1 + 0.001 * i));
    }
    in.base.push_back(b);
    in.candidate.push_back(c);
  }
  return in;
}

TEST(BenchStatisticsDecide, AStallTheMediansHideIsSlowerOrHeldBackByTheTotalTime) {
  // 9 x 0.5 ms + 10 ms = 14.5 ms a round against the base's 10: every median
  // says 2x, the total time says 0.69x: slower.
  Decision d = decide(stalling(10.0));
  EXPECT_NEAR(d.speedup, 2.0, 0.01);
  EXPECT_EQ(d.verdict, BenchVerdict::slower) << d.reason;
  EXPECT_NEAR(d.total_speedup, 10.0 / 14.5, 0.01);
  EXPECT_NE(d.reason.find("the arms' total time is slower"), std::string::npos) << d.reason;
  // 9 x 0.5 + 5.5 = 10 ms: the medians' 2x is all given back. Not faster:
  // held back by the stall guard, which more rounds do not clear.
  d = decide(stalling(5.5));
  EXPECT_EQ(d.verdict, BenchVerdict::inconclusive) << d.reason;
  EXPECT_TRUE(d.guard_stall);
  EXPECT_EQ(d.more_rounds, -1);
  EXPECT_EQ(guards_of(d), std::vector<BenchGuard>{BenchGuard::stall});
  EXPECT_EQ(bench_guard_from("stall"), BenchGuard::stall);
  // A stall that gives back part of the gain (9 x 0.5 + 1.5 = 6 ms: 1.67x
  // in total) is still faster, and so is an honest 2x (no stall at all).
  d = decide(stalling(1.5));
  EXPECT_EQ(d.verdict, BenchVerdict::faster) << d.reason;
  EXPECT_FALSE(d.guard_stall);
  EXPECT_NEAR(d.total_speedup, 10.0 / 6.0, 0.02);
  d = decide(stalling(0.5));
  EXPECT_EQ(d.verdict, BenchVerdict::faster) << d.reason;
  EXPECT_NEAR(d.total_speedup, d.speedup, 0.01);
}

TEST(BenchStatisticsDecide, NeedsMoreRoundsBeforeTheFirstLook) {
  DecisionInput in = simulated(3, 1.10, 0.01, 0, 1);
  Decision d = decide(in);
  EXPECT_EQ(d.verdict, BenchVerdict::inconclusive);
  EXPECT_EQ(d.reason, "needs 1 more round");
  EXPECT_EQ(d.rounds_used, 3);
  EXPECT_EQ(d.more_rounds, 1);
  EXPECT_NEAR(d.speedup, 1 / 1.1, 0.01);  // a preview of the rounds so far
  in.base.resize(1);
  in.candidate.resize(1);
  d = decide(in);
  EXPECT_TRUE(std::isnan(d.speedup_ci.lo));  // one round has no interval
  in.base.clear();
  in.candidate.clear();
  d = decide(in);
  EXPECT_EQ(d.reason, "needs 4 more rounds");
  EXPECT_TRUE(std::isnan(d.speedup));
  EXPECT_FALSE(should_stop(in));
}

TEST(BenchStatisticsDecide, RejectsMalformedInput) {
  DecisionInput in = steady_slowdown();
  in.candidate.pop_back();
  EXPECT_THROW(decide(in), std::invalid_argument);
  in = steady_slowdown();
  in.looks = {15, 9};
  EXPECT_THROW(decide(in), std::invalid_argument);
  in = steady_slowdown();
  in.looks = {1, 9};  // one round has no interval
  EXPECT_THROW(decide(in), std::invalid_argument);
  in = steady_slowdown();
  in.base[0].samples_ms.clear();
  EXPECT_THROW(decide(in), std::invalid_argument);
  in = steady_slowdown();
  in.base[0].throttled = 4;
  EXPECT_THROW(should_stop(in), std::invalid_argument);
}

TEST(BenchStatisticsShouldStop, StopsWhenALookDecidesOrAtTheLastLook) {
  EXPECT_FALSE(should_stop(simulated(3, 1.10, 0.01, 0, 1)));   // before look 1
  EXPECT_TRUE(should_stop(simulated(4, 1.10, 0.01, 0, 1)));    // slower at 4
  EXPECT_TRUE(should_stop(simulated(9, 1.0, 0.01, 0, 1)));     // same
  // Too noisy to decide: running through the looks, stopped at the last.
  DecisionInput in = with_speedups({1.25, 0.8, 1.25, 0.8, 1.25, 0.8, 1.25, 0.8, 1.25, 0.8, 1.25, 0.8});
  in.looks = {3, 6, 12};
  DecisionInput at6 = in;
  at6.base.resize(6);
  at6.candidate.resize(6);
  EXPECT_FALSE(should_stop(at6));
  EXPECT_TRUE(should_stop(in));
  EXPECT_EQ(decide(in).rounds_used, 12);
  EXPECT_EQ(decide(in).reason.rfind("inconclusive: mean log-ratio", 0), 0u) << decide(in).reason;
}

// ---- The rule's error rates, simulated (the perf script measures them end to end) ----

struct Rates {
  int faster = 0, slower = 0, same = 0, inconclusive = 0;
};

// `runs` sequential benchmarks of `max_rounds` rounds each, stopped as the
// runner stops (should_stop after every round), with per-round log-ratio
// noise drawn by `draw`, for a candidate `speedup` times faster, against the
// band +-threshold.
template <class Draw>
Rates simulate_runs(int runs, int max_rounds, double speedup, Draw draw, double threshold, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  Rates r;
  for (int run = 0; run < runs; ++run) {
    DecisionInput in;
    in.looks = default_looks(max_rounds);
    in.threshold = threshold;
    for (int round = 0; round < max_rounds; ++round) {
      const double noise = draw(gen);
      in.base.push_back({{1.0}, std::nullopt, 0});
      in.candidate.push_back({{std::exp(-std::log(speedup) - noise)}, std::nullopt, 0});
      if (should_stop(in)) break;
    }
    switch (decide(in).verdict) {
      case BenchVerdict::faster: ++r.faster; break;
      case BenchVerdict::slower: ++r.slower; break;
      case BenchVerdict::same: ++r.same; break;
      case BenchVerdict::inconclusive: ++r.inconclusive; break;
    }
  }
  return r;
}

TEST(BenchStatisticsErrorRates, AnAAComparisonIsRarelyFasterOrSlowerUnderNormalOrHeavyTailedNoise) {
  // 1000 A/A benchmarks of up to 48 rounds with 0.4% per-round noise (the
  // H200's A/A floor) against the 1% band: wrong verdicts (faster or slower)
  // at most alpha = 5% over every look, and nearly all end same.
  std::normal_distribution<double> quiet(0, 0.004);
  const Rates n = simulate_runs(1000, 48, 1.0, [&](std::mt19937_64& g) { return quiet(g); }, 0.01, 7);
  EXPECT_LE(n.faster + n.slower, 50) << n.faster << " faster, " << n.slower << " slower";
  EXPECT_GE(n.same, 950) << n.same << " same, " << n.inconclusive << " inconclusive";
  // A noisy host (3% per round) with its calibrated band (the 95th
  // percentile of a whole 8-round A/A comparison's |s - 1|, s the median
  // round's ratio: 1.96 * 1.2533 * 3% / sqrt(8) = 2.6%, the median's
  // asymptotic sd being sqrt(pi/2) sd / sqrt(n)): same again.
  std::normal_distribution<double> noisy(0, 0.03);
  const Rates c = simulate_runs(1000, 48, 1.0, [&](std::mt19937_64& g) { return noisy(g); }, 0.026, 8);
  EXPECT_LE(c.faster + c.slower, 50) << c.faster << " faster, " << c.slower << " slower";
  EXPECT_GE(c.same, 950) << c.same << " same, " << c.inconclusive << " inconclusive";
  // Student t with 3 df (heavy tails: a shared machine's occasional bad
  // round) against the uncalibrated 1% band: rarely wrong, whatever else.
  std::student_t_distribution<double> heavy(3);
  const Rates h = simulate_runs(1000, 48, 1.0, [&](std::mt19937_64& g) { return 0.01 * heavy(g); }, 0.01, 9);
  EXPECT_LE(h.faster + h.slower, 50) << h.faster << " faster, " << h.slower << " slower";
}

TEST(BenchStatisticsErrorRates, ARealDifferenceIsFoundAndNeverReversed) {
  // 3% per-round noise, the noisy host's 6% band.
  std::normal_distribution<double> normal(0, 0.03);
  const Rates fast = simulate_runs(1000, 48, 1.5, [&](std::mt19937_64& g) { return normal(g); }, 0.06, 10);
  EXPECT_GE(fast.faster, 990) << fast.faster;
  EXPECT_EQ(fast.slower, 0);
  const Rates small = simulate_runs(1000, 48, 1.1, [&](std::mt19937_64& g) { return normal(g); }, 0.06, 11);
  EXPECT_EQ(small.slower, 0);
  EXPECT_GE(small.faster, 950) << small.faster << " faster, " << small.inconclusive << " inconclusive";
}

}  // namespace
}  // namespace densefeed
