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

// The rounds at which the decision is looked at when a gate names none:
// 4, 6, 8, 11, 15, 20, 27, 36, 48, 64, 85, 113, 150, 200 (each about 4/3 of
// the one before, from 4: the fewest rounds densefeed's own wall-time
// cross-checks fit, two of each length (timing_checks.h fit_wall), so that
// no verdict comes before they can speak), those < max_rounds, and
// max_rounds itself last. Throws std::invalid_argument when max_rounds < 4.
std::vector<int> default_looks(int max_rounds);

// The level spent at the k-th look (k = 1, 2, ...): alpha / (k (k + 1)).
// Its sum over any number of looks is alpha (1 - 1 / (K + 1)) < alpha, so
// the runner may stop at whichever look its budget allows (an alpha-spending
// sequence in the sense of Lan & DeMets 1983, "Discrete sequential boundaries
// for clinical trials", Biometrika 70(3), spent by Bonferroni's inequality
// rather than by their normal boundaries). Throws std::invalid_argument when
// k < 1.
double alpha_at_look(double alpha, int k);

struct DecisionInput {
  std::vector<ArmRound> base, candidate;  // one entry per round, same length
  double threshold = 0.01;                // noise threshold as a fraction: max of 1% and the calibrated noise floor
  double alpha = 0.05;                    // two-sided, over the whole sequential test
  std::vector<int> looks = default_looks(200);  // rounds at which the test is checked, ascending, each >= 2
  std::uint64_t seed = 1;                 // unused since issue 29 (the interval is Student's t); kept for callers
};

struct Decision {
  BenchVerdict verdict = BenchVerdict::inconclusive;
  // e.g. "faster: mean log-ratio 0.093 (speedup 1.097x), 99.2% CI [1.081,
  // 1.113] beyond +-1.0% at look 2 (4 rounds); Wilcoxon p = 0.12"; starts
  // with "needs N more rounds" when the next look has not been reached.
  std::string reason;
  // The reason of the look the figures come from, without any "needs N more
  // rounds" before it; '' when no look was reached (fewer rounds than the
  // first). What a budget-capped case quotes.
  std::string look_reason;
  int rounds_used = 0;            // the look the figures come from (all rounds when before the first look)
  double speedup = 0;             // exp(median of per-round log-ratios); > 1: the candidate is faster (the interval is the mean's)
  Interval speedup_ci;            // exp of the Student t interval of the mean log-ratio at 1 - alpha_at_look (NaN with < 2 rounds)
  double p_value = 1;             // Wilcoxon signed-rank, two-sided, of the per-round log-ratios: a second opinion, never a gate
  double alpha_at_look = 0;       // alpha_at_look(alpha, k) of the look the figures come from
  double log_ratio_sd = 0;        // sample standard deviation of the per-round log-ratios (NaN with < 2 rounds)
  // Estimated further rounds until a look would decide at the noise seen
  // (log_ratio_sd) and the mean so far: 0 when decided, -1 when no look of
  // `looks` would (the mean sits on the band's edge, or too few looks remain).
  int more_rounds = 0;
  double base_median_ms = 0;      // over all samples of the arm in the rounds used
  double candidate_median_ms = 0;
  double base_relative_spread = 0;       // IQR / median over all samples of the arm in the rounds used
  double candidate_relative_spread = 0;
  // An arm's relative spread >= 10% and the paired ratios too spread to
  // decide (verdict inconclusive with no clock or throttle guard). A high
  // spread of a decided case is reported in the reason, never a block.
  bool guard_spread = false;
  bool guard_clock = false;       // both arms report clocks and their medians differ by more than 1%
  bool guard_throttle = false;    // more than 10% of all samples throttled
  // The per-round medians say faster (or same) but the arms' total time does
  // not: the mean over rounds of log(mean(base) / mean(candidate)) (each
  // round's mean of its samples) is at most +log(1 + threshold) (below
  // -log(1 + threshold) for same). A candidate fast in most iterations and
  // stalling in a few (deferred work, issue 29's hostile trial) hides the
  // stalls from every median; its total time does not. Verdict inconclusive,
  // more_rounds -1 (more rounds of the same kernel do not clear it).
  bool guard_stall = false;
  // exp of that mean (the arms' total-time ratio) and its Student t interval
  // at the same level; when that interval is below -log(1 + threshold) the
  // verdict is slower, whatever the medians say.
  double total_speedup = 0;
  Interval total_speedup_ci;
};

// A guard that holds a decision back (Decision::guard_*): the values the
// ledger stores (bench_cases.guards) and next steps read; the reason's words
// are for people only.
enum class BenchGuard { spread, clock, throttle, stall };
const char* to_string(BenchGuard g);           // "spread" | "clock" | "throttle" | "stall"
std::optional<BenchGuard> bench_guard_from(const std::string& text);  // unknown text: nullopt
// The guards that held in `d`, in the order spread, clock, throttle, stall.
std::vector<BenchGuard> guards_of(const Decision& d);

// The verdict of the sequential test on the rounds in `in` (issue 29).
// The unit of replication is the paired round: r_i = log(median(base_i) /
// median(candidate_i)), both arms of round i run back to back (ABBA order),
// so load both arms see cancels in r_i. At the k-th look (looks[k-1] <=
// rounds), over its first n rounds: the mean m and sample sd s of r, and the
// Student t interval m +- t(1 - a_k / 2, n - 1) s / sqrt(n) with a_k =
// alpha_at_look(alpha, k) (Student 1908; exact when r is normal, and
// conservative for the symmetric, heavier-tailed r an A/A gives: one
// outlying round widens the interval more than it moves the mean). By
// Boole's inequality the chance that any look's interval misses the true
// mean is at most the sum of the a_k < alpha, whenever the runner stops.
// With b = log(1 + threshold):
// - CI.hi < -b -> slower, whatever the guards (a candidate that makes itself
//   noisy or throttled must never escape `slower`);
// - else the clock or throttle guard holds -> inconclusive (clock: both
//   arms report clocks and their medians differ by more than 1% of the
//   base's, a figure of ours: a 1% clock gap alone moves a compute-bound
//   time by about the 1% minimum threshold; throttle: more than 10% of all
//   samples throttled, issue 4);
// - CI.lo > +b -> faster;
// - -b < CI.lo and CI.hi < +b -> same;
// - else inconclusive (guard_spread when an arm's relative spread is >= 10%).
// The Wilcoxon signed-rank p of r is reported beside it, not a condition: with
// n pairs it cannot go below 2^(1-n), which no difference can overcome (4
// rounds: p >= 0.125). False-verdict rate: a wrong faster or slower needs
// the interval to miss the true mean beyond the band, at most alpha (5%)
// over all looks; tests/perf/bench_verdict_rates.py measures it end to end.
// The returned decision is that of the first look that is faster, slower or
// same (where should_stop stops the runner); otherwise that of the largest look
// <= rounds, with the reason "needs N more rounds (look K: ...)" when a later
// look exists; before the first look, "needs N more rounds" with the figures
// of the rounds so far (NaN with no round). Rounds past the last look are ignored.
// Throws std::invalid_argument when base and candidate differ in length, a
// round has no sample or more throttled samples than samples, looks are empty,
// below 2 or not strictly ascending, alpha is outside (0, 1) or threshold < 0.
Decision decide(const DecisionInput& in);

// Whether the runner should stop after in.base.size() rounds: a look <= rounds
// decided faster, slower or same, or the last look is reached. Throws as decide.
bool should_stop(const DecisionInput& in);

}  // namespace densefeed
