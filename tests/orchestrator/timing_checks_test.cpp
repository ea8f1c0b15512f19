// The cross-checks of timing_checks.h on figures built to show each rule, and
// on the honest figures next to them that must not be flagged (issue 16).
#include "timing_checks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "bench_work.h"
#include "machine_ceilings.h"

namespace densefeed {
namespace {

// Rounds alternating n and 2n timed iterations (after 1 warm-up) of an arm
// whose process costs fixed_ms plus true_ms per iteration, claiming claimed_ms,
// with noise uniform in +-jitter_ms on the wall time (a fixed sequence from
// `seed`, the same in every run).
std::vector<RoundWall> rounds(int n_rounds, int iters, double fixed_ms, double true_ms, double claimed_ms, double jitter_ms = 2,
                              std::uint64_t seed = 12345) {
  std::vector<RoundWall> out;
  std::uint64_t state = seed;
  for (int r = 0; r < n_rounds; ++r) {
    const int timed = iters * (r % 2 == 0 ? 1 : 2);
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;  // Knuth's MMIX LCG
    const double u = static_cast<double>(state >> 11) / static_cast<double>(1ULL << 53) * 2 - 1;
    const double wall = fixed_ms + (timed + 1) * true_ms + u * jitter_ms;
    out.push_back({wall / 1e3, timed + 1, timed, timed * claimed_ms});
  }
  return out;
}

TEST(TimingChecks, WallFitRecoversPerIterationCostAndFixedCost) {
  const WallFit f = fit_wall(rounds(9, 5, 120, 20, 20));
  ASSERT_TRUE(f.fitted);
  EXPECT_NEAR(f.per_iteration_s * 1e3, 20, 1);
  EXPECT_NEAR(f.fixed_s * 1e3, 120, 8);
  EXPECT_GT(f.per_iteration_se_s, 0);
  // One iteration count, or too few rounds: no fit.
  auto flat = rounds(9, 5, 120, 20, 20);
  for (auto& r : flat) r.iterations = 6;
  EXPECT_FALSE(fit_wall(flat).fitted);
  EXPECT_FALSE(fit_wall(rounds(3, 5, 120, 20, 20)).fitted);
}

// long_round_factor: 8 timed iterations of 10 ms in a 380 ms round (300 ms
// untimed): ceil(1 + 2 * 300 / 80) = 9; clamped to 2 when the iterations
// dominate and to 16 when they claim next to nothing; 2 without samples.
TEST(TimingChecks, TheLongRoundFactorMakesTheExtraIterationsClaimTwiceTheUntimedTime) {
  EXPECT_EQ(long_round_factor({0.390, 9, 8, 80.0}), 9);
  EXPECT_EQ(long_round_factor({1.0, 9, 8, 990.0}), 2);
  EXPECT_EQ(long_round_factor({0.300, 9, 8, 0.0032}), kMaxLongRoundFactor);
  EXPECT_EQ(long_round_factor({0.300, 9, 8, 0.0}), 2);
  EXPECT_EQ(long_round_factor({0.300, 9, 0, 0.0}), 2);
}

TEST(TimingChecks, SamplesAddingUpToMoreThanTheWallAreFlaggedHonestOnesNot) {
  auto r = rounds(9, 5, 120, 20, 20);
  EXPECT_TRUE(check_round_sums(r, "candidate").empty());
  r[4].samples_sum_ms = r[4].wall_s * 1e3 + 5;
  const auto f = check_round_sums(r, "candidate");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, TimingFlagKind::sum_exceeds_wall);
  EXPECT_EQ(f[0].figures["round"], 4);
}

TEST(TimingChecks, ForgedSamplesOfASlowCandidateAreUnseenTimeAnHonestTwoTimesNot) {
  const auto base = rounds(9, 5, 120, 20, 20);
  // Honestly 0.5x (40 ms) but claiming 10 ms: "faster 2x" by its samples.
  const auto forged = check_wall_growth(base, rounds(9, 5, 120, 40, 10), 20, 10);
  ASSERT_EQ(forged.size(), 1u);
  EXPECT_EQ(forged[0].kind, TimingFlagKind::unseen_time);
  EXPECT_NEAR(forged[0].figures["excess_ms"].get<double>(), 30, 2);
  // A real 2x with the same harness overhead as the base.
  EXPECT_TRUE(check_wall_growth(base, rounds(9, 5, 120, 10, 10), 20, 10).empty());
  // A driver's per-iteration flush (3 ms, untimed) in both arms cancels.
  EXPECT_TRUE(check_wall_growth(rounds(9, 5, 120, 23, 20), rounds(9, 5, 120, 13, 10), 20, 10).empty());
  // Claims of more time than each iteration takes (what was timed is not repeated).
  const auto unrepeated = check_wall_growth(base, rounds(9, 5, 120, 1, 30), 20, 30);
  ASSERT_EQ(unrepeated.size(), 1u);
  EXPECT_EQ(unrepeated[0].kind, TimingFlagKind::claims_unrepeated);
  // Samples forged once, claiming 10x, from a process whose wall time does
  // not grow with the iterations: below the base's noise bar, but more than
  // the candidate's own slope can hold.
  const auto once = check_wall_growth(base, rounds(9, 5, 120, 0, 2, 0.5), 20, 2);
  ASSERT_EQ(once.size(), 1u);
  EXPECT_EQ(once[0].kind, TimingFlagKind::claims_unrepeated);
  // An honest 10x whose process does the same untimed work per iteration is not.
  EXPECT_TRUE(check_wall_growth(base, rounds(9, 5, 120, 2.3, 2, 0.5), 20, 2).empty());
}

TEST(TimingChecks, NoisyWallTimesRaiseTheBarInsteadOfFlagging) {
  // 60 ms of jitter per process against 1 ms iterations: a 25% excess cannot
  // be told from noise, and is not flagged.
  EXPECT_TRUE(check_wall_growth(rounds(9, 5, 120, 1, 1, 60), rounds(9, 5, 120, 1.3, 1, 60), 1, 1).empty());
}

TEST(TimingChecks, ARoundALoadedMachineDelayedDoesNotFlagAnHonestCandidate) {
  // As seen on CI under load: one base round 300 ms late, another 200 ms
  // early (a least-squares fit then gave the base a negative slope and the
  // candidate a false unseen_time). The robust fit shrugs both off.
  auto base = rounds(9, 5, 120, 16.5, 16.5, 3);
  base[3].wall_s += 0.300;
  base[6].wall_s -= 0.200;
  auto cand = rounds(9, 5, 120, 13.8, 13.8, 3);
  cand[1].wall_s += 0.250;
  EXPECT_TRUE(check_wall_growth(base, cand, 16.5, 13.8).empty());
  const WallFit f = fit_wall(base);
  EXPECT_NEAR(f.per_iteration_s * 1e3, 16.5, 2);
  // And a forgery is still seen through the same outliers.
  auto forged = rounds(9, 5, 120, 40, 10, 3);
  forged[1].wall_s += 0.250;
  EXPECT_EQ(check_wall_growth(base, forged, 16.5, 10).size(), 1u);
}

// As seen in an A/A of an honest trusted driver while two builds ran beside
// it: three of the five short rounds of each arm were delayed by about
// 150-250 ms, so both arms' fitted slopes came out negative (-6.3 and
// -8.4 ms against 0.78 and 0.85 ms claimed) while the residuals' median
// deviation stayed small, and claims_unrepeated called honest samples
// forged. No robust fit survives most rounds of one count being delayed, but
// the base then fails the same rule: the case is inconclusive
// (wall_unreliable), not red and never faster; a forgery on a quiet machine
// is still seen.
TEST(TimingChecks, DelayedShortRoundsOfAnHonestArmDoNotMakeItsClaimsLookForged) {
  auto base = rounds(9, 16, 300, 0.78, 0.78, 3);
  auto cand = rounds(9, 16, 300, 0.85, 0.85, 3);
  for (int r : {0, 4, 8}) base[static_cast<std::size_t>(r)].wall_s += 0.150 + 0.05 * r / 4;
  for (int r : {2, 4, 6}) cand[static_cast<std::size_t>(r)].wall_s += 0.200 + 0.025 * r / 2;
  const WallFit fc = fit_wall(cand);
  ASSERT_TRUE(fc.fitted);
  EXPECT_LT(fc.per_iteration_s * 1e3, 0) << "the delays must be able to turn the slope negative, as they did";
  // The base's own claims then fail the same rule: the case is
  // inconclusive, neither arm judged from these wall times.
  const auto loaded = check_wall_growth(base, cand, 0.78, 0.85);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].kind, TimingFlagKind::wall_unreliable);
  EXPECT_EQ(loaded[0].arm, "both");
  // A base the load moved less than its claims bar, beside that candidate:
  // what the base showed is the machine's share, taken off the candidate's.
  auto mild = rounds(9, 16, 300, 0.78, 0.78, 3);
  for (int r : {0, 4, 8}) mild[static_cast<std::size_t>(r)].wall_s += 0.003;
  EXPECT_TRUE(check_wall_growth(mild, rounds(9, 16, 300, 0.85, 0.85, 3), 0.78, 0.85).empty());
  // The same candidate against a base whose rounds the load spared: its
  // claims cannot be told from forged ones, and are flagged as such.
  const auto alone = check_wall_growth(rounds(9, 16, 300, 0.78, 0.78, 3), cand, 0.78, 0.85);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0].kind, TimingFlagKind::claims_unrepeated);
  // A base below its claims is not credited to the candidate: an honest
  // candidate beside it is not unseen_time.
  auto low_base = rounds(9, 16, 300, 0.5, 0.78, 3);  // its wall grows by 0.5 ms for 0.78 claimed: within the claims bar
  EXPECT_TRUE(check_wall_growth(low_base, rounds(9, 16, 300, 0.85, 0.85, 3), 0.78, 0.85).empty());
  // Quiet rounds: claims of 30 ms for 1 ms of work per iteration are seen.
  const auto quiet = rounds(9, 16, 300, 1, 30, 3);
  const auto flags = check_wall_growth(rounds(9, 16, 300, 1, 1, 3), quiet, 1, 30);
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_EQ(flags[0].kind, TimingFlagKind::claims_unrepeated);
}

TEST(TimingChecks, DriftThatMovesTheRatioIsFlaggedDriftThePairingCancelsOppositeOrSteadyArmsNot) {
  std::vector<double> base, cand, uneven, steady_b, steady_c;
  for (int r = 0; r < 15; ++r) {
    const double slow = 1 + 0.01 * r;  // +14 % over 15 rounds
    const double noise = (r % 3 - 1) * 0.001;
    base.push_back(20 * slow * (1 + noise));
    cand.push_back(10 * slow * (1 - noise));
    uneven.push_back(10 * (1 + 0.02 * r) * (1 - noise));  // the candidate slows twice as fast: the ratio falls 11 %
    steady_b.push_back(20 * (1 + noise));
    steady_c.push_back(10 * (1 - noise));
  }
  // Both arms +14 % together, their ratio steady: the pairing cancels it.
  EXPECT_FALSE(check_drift(base, cand, 0.01, {}).has_value());
  const auto d = check_drift(base, uneven, 0.01, {});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, TimingFlagKind::drift);
  EXPECT_NE(d->reason.find("the machine drifted"), std::string::npos) << d->reason;
  EXPECT_NE(d->reason.find("ratio fell"), std::string::npos) << d->reason;
  ASSERT_TRUE(d->figures.contains("ratio_change")) << d->figures.dump();
  EXPECT_LT(d->figures.at("ratio_change").get<double>(), -0.05);
  EXPECT_FALSE(check_drift(steady_b, steady_c, 0.01, {}).has_value());
  // A step of 8 % from round 7 on in both arms: cancelled; with the
  // candidate's 12 % (the ratio steps 3.6 %): flagged.
  std::vector<double> sb = steady_b, sc = steady_c;
  for (int r = 7; r < 15; ++r) sb[r] *= 1.08, sc[r] *= 1.08;
  EXPECT_FALSE(check_drift(sb, sc, 0.01, {1980, 1980}).has_value());
  for (int r = 7; r < 15; ++r) sc[r] *= 1.12 / 1.08;
  const auto step = check_drift(sb, sc, 0.01, {1980, 1980});
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->figures["sm_clock_mhz"].size(), 2u);
  EXPECT_LT(step->figures.at("ratio_change").get<double>(), -0.02) << step->figures.dump();  // as a trend or a step
  // A ratio step of a third of the band is within the pairing's noise.
  std::vector<double> small_c = steady_c;
  for (int r = 7; r < 15; ++r) sb[r] = steady_b[r] * 1.08, small_c[r] = steady_c[r] * 1.08 * (1 + 0.01 / 3);
  EXPECT_FALSE(check_drift(sb, small_c, 0.01, {}).has_value());
  // One arm up, the other down: a real difference, not the machine.
  std::vector<double> down = cand;
  for (int r = 0; r < 15; ++r) down[r] = 10 / (1 + 0.01 * r);
  EXPECT_FALSE(check_drift(base, down, 0.01, {}).has_value());
}

TEST(TimingChecks, AFlatTimerAcrossGrowingWorkIsFlaggedGrowingTimesNot) {
  std::vector<CaseTiming> flat = {{"n=1", 0.68, 0.020, {}, {}}, {"n=4", 8.1, 0.020, {}, {}}, {"n=16", 64.8, 0.021, {}, {}}};
  const auto f = check_flat_timer(flat);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, TimingFlagKind::flat_timer);
  EXPECT_EQ(f[0].arm, "candidate");
  std::vector<CaseTiming> growing = {{"n=1", 0.68, 0.5, {}, {}}, {"n=4", 8.1, 6.0, {}, {}}, {"n=16", 64.8, 40, {}, {}}};
  EXPECT_TRUE(check_flat_timer(growing).empty());
  // With declared work the base is judged too.
  std::vector<CaseTiming> both = {{"a", 1, 1, 1e6, {}}, {"b", 1.1, 1.05, 16e6, {}}};
  EXPECT_EQ(check_flat_timer(both).size(), 2u);
}

TEST(TimingChecks, AnArmFasterThanTheMachineIsFlaggedNamingFigureAndCeiling) {
  Ceilings c{4.3e12, 0, "test ceilings"};
  // 64 MiB in 0.001 ms: 67 PB/s.
  const auto f = check_ceilings({"n=1", 20, 0.001, 64.0 * (1 << 20), {}}, c);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, TimingFlagKind::faster_than_machine);
  EXPECT_EQ(f[0].arm, "candidate");
  EXPECT_NE(f[0].reason.find("4300 GB/s"), std::string::npos) << f[0].reason;
  // 64 MiB in 20 ms: 3.4 GB/s, and up to the margin above the ceiling: fine.
  EXPECT_TRUE(check_ceilings({"n=1", 20, 20, 64.0 * (1 << 20), {}}, c).empty());
  EXPECT_TRUE(check_ceilings({"n=1", 1, 1, 4.3e9 * kCeilingMargin * 0.99, {}}, c).empty());
  // No ceiling measured: nothing to compare with.
  EXPECT_TRUE(check_ceilings({"n=1", 20, 0.001, 1e12, {}}, Ceilings{}).empty());
}

// A CPU's in-cache copy rate is several times its memory's (103.6 GB/s at
// 32 KiB against 29.9 GB/s at 32 MiB, issue 26): a case whose declared bytes
// exceed the last-level cache is held to the memory's rate, one that fits
// the cache to the in-cache rate; a ledger row from before (no memory
// figure) holds every case to the one rate it has.
TEST(TimingChecks, ACaseBeyondTheCacheIsHeldToTheMemorysRateOneInsideToTheCaches) {
  Ceilings c{100e9, 0, "test ceilings"};
  c.memory_bytes_per_s = 30e9;
  c.cache_bytes = 32.0 * (1 << 20);
  // 1 GiB in 20 ms: 53.7 GB/s, between the two rates.
  const auto f = check_ceilings({"n=big", 20, 20, 1073741824.0, {}}, c);
  ASSERT_EQ(f.size(), 2u);  // both arms
  EXPECT_EQ(f[0].kind, TimingFlagKind::faster_than_machine);
  EXPECT_DOUBLE_EQ(f[0].figures["ceiling"].get<double>(), 30e9);
  EXPECT_NE(f[0].reason.find("beyond its 32 MiB last-level cache"), std::string::npos) << f[0].reason;
  // The same rate on 1 MiB (inside the cache): below the in-cache ceiling.
  EXPECT_TRUE(check_ceilings({"n=small", 0.0195, 0.0195, 1048576.0, {}}, c).empty());  // 53.8 GB/s
  // No memory figure: the one rate for every case.
  Ceilings old{100e9, 0, "an older row"};
  EXPECT_TRUE(check_ceilings({"n=big", 20, 20, 1073741824.0, {}}, old).empty());
  // From the recorded figures, alone and beside a GPU (whose one copy rate,
  // of 1 GiB, is its rate beyond any cache).
  MachineCeilings cpu, gpu;
  cpu.device = "cpu";
  cpu.bytes_per_s = 100e9;
  cpu.figures = {{"memory_copy_bytes_per_s", 30e9}, {"last_level_cache_bytes", 32.0 * (1 << 20)}};
  gpu.device = "GPU-1";
  gpu.bytes_per_s = 4.2e12;
  EXPECT_DOUBLE_EQ(fastest_ceilings({cpu}).memory_bytes_per_s, 30e9);
  EXPECT_DOUBLE_EQ(fastest_ceilings({cpu}).cache_bytes, 32.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(fastest_ceilings({cpu, gpu}).memory_bytes_per_s, 4.2e12);
  cpu.figures = nlohmann::ordered_json::object();  // a row from before issue 26
  EXPECT_DOUBLE_EQ(fastest_ceilings({cpu, gpu}).memory_bytes_per_s, 0);
}

TEST(TimingChecks, WorkExpressionsAreEvaluatedOverCaseKeysAndBadOnesNamed) {
  EXPECT_DOUBLE_EQ(evaluate_work("4 * (2 * T * D + 2 * D)", {{"T", 1024}, {"D", 64}, {"name", "x"}}), 4.0 * (2 * 1024 * 64 + 128));
  EXPECT_DOUBLE_EQ(evaluate_work("2 * M^3", {{"M", 4}}), 128);
  try {
    evaluate_work("4 * Q", {{"T", 1}});
    FAIL() << "an unknown name must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Q"), std::string::npos) << e.what();
  }
  EXPECT_THROW(evaluate_work("T - T", {{"T", 3}}), std::invalid_argument);
  EXPECT_THROW(evaluate_work("4 *", {{"T", 3}}), std::invalid_argument);
}

// A process that may use the CPU and a GPU is bounded by the faster of them:
// a GPU kernel moving 2 TB/s is not "faster than the machine" because the
// CPU's memcpy reached 68 GB/s (the H200 run of 2026-12-01 flagged both arms
// of kda-decode on CUDA against the CPU's ceiling), while a forger claiming
// 40 TB/s is still beyond the GPU's 4.2 TB/s.
TEST(TimingChecks, PlausibilityBoundsAnArmByTheFastestDeviceItCanUse) {
  MachineCeilings cpu, gpu;
  cpu.device = "cpu";
  cpu.device_name = "a CPU";
  cpu.bytes_per_s = 68e9;
  cpu.tool = "memcpy";
  gpu.device = "GPU-1234";
  gpu.device_name = "NVIDIA H200";
  gpu.bytes_per_s = 4.224e12;
  gpu.flops_per_s = 892.9e12;
  gpu.tool = "densefeed-gpu-ceilings";
  const Ceilings both = fastest_ceilings({cpu, gpu});
  EXPECT_DOUBLE_EQ(both.bytes_per_s, 4.224e12);
  EXPECT_DOUBLE_EQ(both.flops_per_s, 892.9e12);
  EXPECT_NE(both.source.find("NVIDIA H200"), std::string::npos) << both.source;
  CaseTiming honest{"batch=8", 0.03174, 0.02483, 67896320.0, std::nullopt};
  EXPECT_TRUE(check_ceilings(honest, both).empty());
  EXPECT_EQ(check_ceilings(honest, fastest_ceilings({cpu})).size(), 2u);  // what the bug did
  CaseTiming forged{"batch=8", 0.03174, 67896320.0 / 40e12 * 1e3, 67896320.0, std::nullopt};
  const auto flags = check_ceilings(forged, both);
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_EQ(flags[0].arm, "candidate");
  // The order of the devices does not matter, and a CPU-only list is the CPU's.
  EXPECT_DOUBLE_EQ(fastest_ceilings({gpu, cpu}).bytes_per_s, 4.224e12);
  EXPECT_DOUBLE_EQ(fastest_ceilings({cpu}).bytes_per_s, 68e9);
}

// A self-timed faster stands only where densefeed's own clock shows it: an
// honest 2x is confirmed on a quiet machine; the same claim from a candidate
// whose wall grows as fast as the base's (a forger whose unseen time stayed
// under the unseen_time bar), or from rounds so noisy that the slopes cannot
// tell the arms apart, is wall_unconfirmed (blaming neither arm); a candidate
// that claims no speedup is never flagged by it.
TEST(TimingChecks, AFasterClaimTheWallGrowthDoesNotShowIsUnconfirmed) {
  const auto base = rounds(9, 16, 120, 20, 20);
  EXPECT_FALSE(check_wall_confirms(base, rounds(9, 16, 120, 10, 10), 20, 10));
  const auto equal = check_wall_confirms(base, rounds(9, 16, 120, 20, 10), 20, 10);
  ASSERT_TRUE(equal);
  EXPECT_EQ(equal->kind, TimingFlagKind::wall_unconfirmed);
  EXPECT_EQ(equal->arm, "both");
  EXPECT_NEAR(equal->figures["gap_ms"].get<double>(), 0, 1);
  // Honest 2x, but +-600 ms of start-up noise per round: the slopes' error
  // is then larger than the 10 ms they differ by.
  EXPECT_TRUE(check_wall_confirms(rounds(9, 16, 120, 20, 20, 600), rounds(9, 16, 120, 10, 10, 600), 20, 10));
  // ... which more rounds settle (the runner goes on to its next look).
  EXPECT_FALSE(check_wall_confirms(rounds(25, 16, 120, 20, 20, 60), rounds(25, 16, 120, 10, 10, 60), 20, 10));
  // No faster claim: nothing to confirm; too few rounds to fit: unconfirmed.
  EXPECT_FALSE(check_wall_confirms(base, rounds(9, 16, 120, 20, 20), 20, 20));
  EXPECT_TRUE(check_wall_confirms(rounds(3, 16, 120, 20, 20), rounds(3, 16, 120, 10, 10), 20, 10));
}

// The bar in standard errors is Student's t at the normal's 4-sigma tail
// for the rounds there were (tables: t(7) 8.467, t(14) 5.619 at 3.17e-5),
// and the normal's 4 with many rounds.
TEST(TimingChecks, TheSignificanceBarIsStudentsTForTheRoundsThereWere) {
  EXPECT_NEAR(significance_bar(7), 8.467, 0.005);
  EXPECT_NEAR(significance_bar(14), 5.619, 0.005);
  EXPECT_NEAR(significance_bar(1e7), 4.0, 0.001);
  EXPECT_GT(significance_bar(0), significance_bar(1) - 1e-9);  // below 1 dof counts as 1
  WallFit a, b;
  a.per_iteration_se_s = b.per_iteration_se_s = 1e-3;
  a.dof = b.dof = 7;
  EXPECT_NEAR(significance_bar(a, b), significance_bar(14), 1e-9);  // equal errors: the dofs add
  b.per_iteration_se_s = 1e-9;
  EXPECT_NEAR(significance_bar(a, b), significance_bar(7), 1e-3);  // one error dominates: its dof
}

// As CI saw it (stop 36, kda-decode's session harness under a loaded 2-core
// host): both arms spend most of each iteration outside the timer (writing
// the outputs), the base 94 ms past its 11.4 ms claims, the candidate 157 ms
// past 12.7 ms, from 9 noisy rounds each; the 63 ms excess was 4.8 standard
// errors, over the normal's 4 and called unseen_time (red) for an honest
// candidate. Against Student's t for 9 + 9 rounds it is noise; a forgery
// four times the excess (its untimed time 3.7x the base's, beyond what load
// does to untimed work: kUntimedLoadFactor) is still flagged from the same
// rounds, and three times it (3.0x) is not judged from them: wall_unreliable.
TEST(TimingChecks, AnExcessOfAFewStandardErrorsFromFewNoisyRoundsIsNotUnseenTime) {
  const auto base = rounds(9, 5, 400, 105.8, 11.38, 95, 777);
  const auto honest = rounds(9, 5, 400, 168.7, 12.71, 95, 5);
  const WallFit b = fit_wall(base), c = fit_wall(honest);
  const double se = std::hypot(b.per_iteration_se_s, c.per_iteration_se_s) * 1e3;
  const double excess = (c.per_iteration_s * 1e3 - 12.71) - (b.per_iteration_s * 1e3 - 11.38);
  // The premise: over the normal's bar, under Student's.
  ASSERT_GT(excess / se, kSignificanceZ);
  ASSERT_LT(excess / se, significance_bar(b, c));
  EXPECT_TRUE(check_wall_growth(base, honest, 11.38, 12.71).empty()) << excess / se << " standard errors";
  const auto forged = check_wall_growth(base, rounds(9, 5, 400, 105.8 + 4 * 63, 12.71, 95, 5), 11.38, 12.71);
  ASSERT_EQ(forged.size(), 1u);
  EXPECT_EQ(forged[0].kind, TimingFlagKind::unseen_time);
  EXPECT_GT(forged[0].figures["bar_standard_errors"].get<double>(), kSignificanceZ);
  const auto within = check_wall_growth(base, rounds(9, 5, 400, 105.8 + 3 * 63, 12.71, 95, 5), 11.38, 12.71);
  ASSERT_EQ(within.size(), 1u);
  EXPECT_EQ(within[0].kind, TimingFlagKind::wall_unreliable);
  EXPECT_EQ(within[0].arm, "both");
}

// As CI saw it at stop 37 and this machine under ctest -j 2 (kda-decode's
// trusted driver, whose untimed work per iteration -- drawing 33 MB of
// inputs, hashing and writing 33 MB of outputs -- is 10 to 20 times its
// kernel): the candidate's process grew 188.1 ms per iteration for 9.572 ms
// of samples, the base's 88.27 ms for 8.253 ms; an excess of 98.5 ms, far
// beyond the standard errors' bar (43.07 ms), called an honest candidate
// unseen_time (red). Its untimed time is 2.2x the base's: within what load
// does to untimed work (kUntimedLoadFactor), so the wall times judge neither
// arm (wall_unreliable: the case is inconclusive, never faster). The kernel
// itself hidden outside the timer (the samples 0.01 ms for the same walls)
// is no more than that either; hiding three times the base's untimed time is
// unseen_time. A base whose wall grows by less than it claims offers no band.
TEST(TimingChecks, ATrustedDriversUntimedWorkSlowedByLoadIsNotUnseenTime) {
  const auto base = rounds(9, 5, 300, 88.27, 8.253, 40, 777);
  const auto honest = rounds(9, 5, 300, 188.1, 9.572, 40, 5);
  const auto flags = check_wall_growth(base, honest, 8.253, 9.572);
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_EQ(flags[0].kind, TimingFlagKind::wall_unreliable) << flags[0].reason;
  EXPECT_EQ(flags[0].arm, "both");
  // The premise: beyond the statistical bar, within the load band.
  const double excess = flags[0].figures["excess_ms"].get<double>();
  EXPECT_GT(excess, flags[0].figures["bar_ms"].get<double>());
  EXPECT_LE(excess, flags[0].figures["load_band_ms"].get<double>());
  EXPECT_NE(flags[0].reason.find("cannot tell hidden work from the machine's load"), std::string::npos) << flags[0].reason;
  const auto hidden = check_wall_growth(base, rounds(9, 5, 300, 188.1, 0.01, 40, 5), 8.253, 0.01);
  ASSERT_EQ(hidden.size(), 1u);
  EXPECT_EQ(hidden[0].kind, TimingFlagKind::wall_unreliable);
  const auto beyond = check_wall_growth(base, rounds(9, 5, 300, 88.27 + 3 * 80.0, 8.253, 40, 5), 8.253, 8.253);
  ASSERT_EQ(beyond.size(), 1u);
  EXPECT_EQ(beyond[0].kind, TimingFlagKind::unseen_time) << beyond[0].reason;
  EXPECT_EQ(beyond[0].arm, "candidate");
  // The base's claims above its wall growth: no untimed time of its own to
  // excuse the candidate's by (its untimed time counts as 0).
  const auto none = check_wall_growth(rounds(9, 5, 300, 8.0, 8.253, 2, 777), rounds(9, 5, 300, 60, 8.253, 2, 5), 8.253, 8.253);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].kind, TimingFlagKind::unseen_time) << none[0].reason;
}

// The red team's attack (both arms WORKTREE, self-timed): the agent pads its
// own base with 30 ms of work outside its timer per iteration, and its
// candidate moves 30 ms of its 40 ms kernel outside its timer. Credited the
// base's untimed time, the candidate's excess is nothing and its samples say
// 4x faster. A base the agent wrote is not credited: wall_unreliable (the
// case is inconclusive, never faster), naming the way out. The same figures
// with a base the agent did not write stay as they were (credited), and an
// honest candidate beside an honest agent's base has nothing outside either
// timer to flag.
TEST(TimingChecks, AnAgentsBasePaddedOutsideItsTimerCannotCoverACandidatesHiddenWork) {
  const auto padded_base = rounds(9, 5, 120, 40 + 30, 40, 2, 777);
  const auto hiding = rounds(9, 5, 120, 40, 10, 2, 5);
  EXPECT_TRUE(check_wall_growth(padded_base, hiding, 40, 10).empty());
  const auto flags = check_wall_growth(padded_base, hiding, 40, 10, /*credit_base_untimed=*/false);
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_EQ(flags[0].kind, TimingFlagKind::wall_unreliable) << flags[0].reason;
  EXPECT_EQ(flags[0].arm, "both");
  EXPECT_NE(flags[0].reason.find("rerun against a base the agent did not write"), std::string::npos) << flags[0].reason;
  const auto honest_base = rounds(9, 5, 120, 40, 40, 2, 777);
  EXPECT_TRUE(check_wall_growth(honest_base, rounds(9, 5, 120, 10, 10, 2, 5), 40, 10, false).empty());
  // An agent's base with nothing outside its timer credits nothing either
  // way: the candidate's hidden 30 ms is unseen_time as before.
  const auto red = check_wall_growth(honest_base, hiding, 40, 10, false);
  ASSERT_EQ(red.size(), 1u);
  EXPECT_EQ(red[0].kind, TimingFlagKind::unseen_time) << red[0].reason;
}

}  // namespace
}  // namespace densefeed
