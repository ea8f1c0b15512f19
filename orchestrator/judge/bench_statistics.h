// The decision statistics of the benchmark stage (issue 4, "Decision"): base
// and candidate run in interleaved rounds, each round gives per-iteration times
// for each arm, and the unit of replication is the round's log-ratio
// r = log(median(base) / median(candidate)); r > 0 means the candidate is
// faster. Pure functions over plain structs: no I/O, no clock, no global state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace densefeed {

// Two-sided p-value of the Wilcoxon signed-rank test of H0 "x is symmetric
// about 0" (so its median is 0), x being per-round log-ratios (any unit: only
// signs and the order of |x| matter).
// - Zeros are dropped before ranking, as Wilcoxon (1945, "Individual
//   comparisons by ranking methods", Biometrics Bulletin 1(6)) did; this is
//   also R's wilcox.test and SciPy's zero_method="wilcox". With no non-zero
//   value left the p-value is 1.
// - Ties in |x| (exact equality) get the average of the ranks they span.
// - n <= 50 non-zero values: exact p from the null distribution of W+ (each
//   sign + or - with probability 1/2 given the ranks; Hollander, Wolfe &
//   Chicken, Nonparametric Statistical Methods, 3rd ed. 2014, Section 3.1),
//   conditional on the tie pattern when there are ties, as exactRankTests'
//   wilcox.exact computes it.
// - n > 50: normal approximation with mean n(n+1)/4, variance
//   n(n+1)(2n+1)/24 - sum(t^3 - t)/48 over tie groups of size t (same
//   source), and a continuity correction of 1/2 (as R's wilcox.test).
// p = min(1, 2 * min(P(W+ <= w), P(W+ >= w))) for the observed w.
// Throws std::invalid_argument on a non-finite value.
double wilcoxon_signed_rank_p(const std::vector<double>& x);

struct Interval {
  double lo = 0;
  double hi = 0;
};

// Percentile bootstrap confidence interval of the median of x (Efron &
// Tibshirani, An Introduction to the Bootstrap, 1993, Chapter 13): `resamples`
// resamples of size x.size() drawn with replacement by std::mt19937_64 seeded
// with `seed`, the median of each (statistics.h, type 7), and the
// (1 - confidence) / 2 and (1 + confidence) / 2 quantiles of those medians.
// Same x, confidence, resamples and seed give the same interval on every
// platform. Units are those of x. Throws std::invalid_argument on an empty or
// non-finite x, confidence outside (0, 1), or resamples < 1.
Interval bootstrap_median_ci(const std::vector<double>& x, double confidence, int resamples = 10000,
                             std::uint64_t seed = 1);

enum class BenchVerdict { faster, slower, same, inconclusive };

const char* to_string(BenchVerdict v);

// One arm's output in one round.
struct ArmRound {
  std::vector<double> samples_ms;       // per-iteration times, ms, at least one
  std::optional<double> sm_clock_mhz;   // the harness's SM clock, when it reports one
  std::size_t throttled = 0;            // how many of samples_ms the harness saw throttled
};

struct DecisionInput {
  std::vector<ArmRound> base, candidate;  // one entry per round, same length
  double threshold = 0.01;                // noise threshold as a fraction: max of 1% and the calibrated noise floor
  double alpha = 0.05;                    // two-sided, over the whole sequential test
  std::vector<int> looks = {9, 15, 25};   // rounds at which the test is checked, ascending
  std::uint64_t seed = 1;                 // bootstrap
};

struct Decision {
  BenchVerdict verdict = BenchVerdict::inconclusive;
  // e.g. "faster: median log-ratio 0.093 (speedup 1.097x), 98.3% CI [1.081,
  // 1.113] beyond +-1.0%, p = 0.0039 < 0.0167 at look 9"; starts with
  // "needs N more rounds" when the next look has not been reached.
  std::string reason;
  int rounds_used = 0;            // the look the figures come from (all rounds when before the first look)
  double speedup = 0;             // exp(median of per-round log-ratios); > 1: the candidate is faster
  Interval speedup_ci;            // exp of the bootstrap CI of the median log-ratio at 1 - alpha_at_look
  double p_value = 1;             // Wilcoxon signed-rank, two-sided, of the per-round log-ratios
  double alpha_at_look = 0;       // alpha / looks.size()
  double base_median_ms = 0;      // over all samples of the arm in the rounds used
  double candidate_median_ms = 0;
  double base_relative_spread = 0;       // IQR / median over all samples of the arm in the rounds used
  double candidate_relative_spread = 0;
  bool guard_spread = false;      // an arm's relative spread >= 10%
  bool guard_clock = false;       // both arms report clocks and their medians differ by more than 1%
  bool guard_throttle = false;    // more than 10% of all samples throttled
};

// A guard that holds a decision back (Decision::guard_*): the values the
// ledger stores (bench_cases.guards) and next steps read; the reason's words
// are for people only.
enum class BenchGuard { spread, clock, throttle };
const char* to_string(BenchGuard g);           // "spread" | "clock" | "throttle"
std::optional<BenchGuard> bench_guard_from(const std::string& text);  // unknown text: nullopt
// The guards that held in `d`, in the order spread, clock, throttle.
std::vector<BenchGuard> guards_of(const Decision& d);

// The verdict of the sequential test on the rounds in `in`.
// Looks: at each look k <= rounds the first k rounds are tested at
// alpha_at_look = alpha / looks.size() (Bonferroni), with the bootstrap CI of
// the median log-ratio at confidence 1 - alpha_at_look. By Boole's inequality
// the chance that any look wrongly claims a difference is at most the sum of
// the per-look levels, alpha, whatever the looks' correlation and whenever the
// runner stops; it is conservative because the looks share rounds (positively
// correlated tests), so the true family-wise error is below alpha. Group
// sequential boundaries (Pocock 1977, O'Brien & Fleming 1979) spend alpha more
// tightly but rest on a normal joint law of the statistic across looks, which
// an exact small-n rank test does not have.
// Verdict at a look, with b = log(1 + threshold):
// - p < alpha_at_look and CI.hi < -b -> slower, whatever the guards (a
//   candidate that makes itself noisy must not escape `slower`; the test's
//   level holds for any spread);
// - else any guard holds -> inconclusive (spread: IQR / median of an arm's samples
//   >= 10%, issue 4; clock: both arms report clocks and the median candidate
//   clock differs from the median base clock by more than 1% of the latter,
//   a figure of ours (a 1% clock gap alone moves a compute-bound time by
//   about the 1% minimum threshold); throttle: more than 10% of all samples
//   of both arms throttled, issue 4);
// - p < alpha_at_look and CI.lo > +b -> faster;
// - -b < CI.lo and CI.hi < +b (both arms steady: no spread guard) -> same;
// - else inconclusive.
// The returned decision is that of the first look that is faster, slower or
// same (where should_stop stops the runner); otherwise that of the largest look
// <= rounds, with the reason "needs N more rounds (look K: ...)" when a later
// look exists; before the first look, "needs N more rounds" with the figures
// of the rounds so far (NaN with no round). Rounds past the last look are ignored.
// Throws std::invalid_argument when base and candidate differ in length, a
// round has no sample or more throttled samples than samples, looks are empty
// or not strictly ascending positive, alpha is outside (0, 1) or threshold < 0.
Decision decide(const DecisionInput& in);

// Whether the runner should stop after in.base.size() rounds: a look <= rounds
// decided faster, slower or same, or the last look is reached. Throws as decide.
bool should_stop(const DecisionInput& in);

}  // namespace densefeed
