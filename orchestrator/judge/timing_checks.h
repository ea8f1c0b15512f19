// Cross-checks densefeed applies to a benchmark's timings itself (issue 16):
// whatever wrote samples.json (a trusted driver or the candidate's harness),
// the samples must agree with what densefeed measured from outside — each
// round's wall time, how that wall time grows with the iteration count, how
// the time grows with a case's work, the machine's measured ceilings — and
// the machine must not have drifted under the benchmark. Pure functions over
// plain structs: no I/O, no clock.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_statistics.h"

namespace densefeed {

enum class TimingFlagKind {
  sum_exceeds_wall,     // a round's samples add up to more than the round's wall time
  unseen_time,          // per iteration, the arm spends far more wall time than its samples say (beyond the base's own overhead)
  claims_unrepeated,    // its samples say more per iteration than its wall time grows by per iteration
  flat_timer,           // per-iteration time flat across cases whose work (or base time) grows: the timer does not see the work
  faster_than_machine,  // achieved bytes/s or FLOP/s above the machine's measured ceiling
  drift,                // both arms' times moved together in round order (trend or step), the ratio with them
  beyond_bound,         // a speedup above the gate's max_speedup: a person must accept it
  wall_unreliable,      // the wall times cannot judge: the base's own growth contradicts its claims, or the candidate's excess is within what load does to untimed work
  wall_unconfirmed,     // a self-timed candidate claims faster, but densefeed's wall-time growth does not show it faster
  clock_disagrees,      // a driver's in-process samples contradict densefeed's outside clock (outside_clock.h)
};

const char* to_string(TimingFlagKind k);

// One finding. `arm` is "base" or "candidate"; `reason` is for people (never
// parsed); `figures` holds the numbers it rests on (JSON object).
struct TimingFlag {
  TimingFlagKind kind = TimingFlagKind::sum_exceeds_wall;
  std::string arm;
  std::string reason;
  nlohmann::ordered_json figures = nlohmann::ordered_json::object();
};

// One arm's round as densefeed saw it from outside.
struct RoundWall {
  double wall_s = 0;        // the process's wall time (launcher), seconds
  int iterations = 0;       // warmup + timed iterations it was asked to run
  int timed = 0;            // timed iterations (the samples)
  double samples_sum_ms = 0;
};

// Robust (Theil-Sen) fit of wall_s = fixed_s + iterations * per_iteration_s
// over rounds that ran different iteration counts (the bench alternates
// iters and long_round_factor x iters): the slope is the median of the pairwise slopes, the
// intercept the median offset, so a round a loaded machine delayed does not
// move it. fitted is false with fewer than 4 rounds or one distinct count.
// per_iteration_se_s is 1.4826 x the residuals' median absolute deviation
// over sqrt(Sxx); seconds throughout. dof = rounds - 2, the degrees of
// freedom that standard error was estimated with.
struct WallFit {
  bool fitted = false;
  double fixed_s = 0;
  double per_iteration_s = 0;
  double per_iteration_se_s = 0;
  int dof = 0;
};

WallFit fit_wall(const std::vector<RoundWall>& rounds);

// How many standard errors an excess of a fitted slope must pass: the
// quantile of Student's t (Student 1908, "The probable error of a mean",
// Biometrika 6) at the normal's one-sided tail beyond kSignificanceZ
// (3.17e-5), for `dof` degrees of freedom. A slope's standard error is
// estimated from its own fit's few residuals, so its ratio is a t, not a
// normal: with 9 rounds (7 dof) the normal's 4 sigma is a tail of 2.6e-3,
// eighty times the false flags the bar is meant to allow (CI saw an honest
// kda-decode candidate called unseen_time at 4.8 of them under load); the
// bar there is 8.47, 5.6 at 14 dof, 4.3 at 60, and tends to kSignificanceZ.
// dof below 1 counts as 1. The residual scale is a median absolute
// deviation, less efficient than a standard deviation, so the true tail is
// somewhat above the nominal one even so. Unitless; never throws.
double significance_bar(double dof);

// The same for the difference of two fits' slopes, whose standard error is
// hypot(a.se, b.se): Welch-Satterthwaite's degrees of freedom (Welch 1947,
// "The generalization of Student's problem when several different
// population variances are involved", Biometrika 34),
//   (a^2 + b^2)^2 / (a^4 / dof_a + b^4 / dof_b), a and b the standard errors.
double significance_bar(const WallFit& a, const WallFit& b);

// How many times iters the long (odd) rounds of a self-timed benchmark run,
// from the base's first round `first` (its wall time, iteration counts and
// samples): the fit's slope error is the rounds' fixed-cost noise over the
// iteration contrast (sqrt(Sxx)), so when a round's untimed time (process
// start-up, imports: wall_s less its samples) dwarfs its timed iterations,
// the 2 x iters of a short contrast cannot see an iteration's cost at all
// (issue 26: a launch-only timer claiming 0.0004 ms for a 10 ms iteration
// was never flagged, its slope 7.3 +- 2.0 ms under 4 standard errors of the
// two arms' slopes). The factor makes the long round's extra iterations
// claim about twice the first round's untimed time:
//   factor = clamp(ceil(1 + 2 * untimed_ms / (iters * claimed_ms)), 2, kMaxLongRoundFactor)
// with claimed_ms the first round's mean sample; 2 (the plain design) when
// the round has no samples or claims nothing. Unitless; never throws.
inline constexpr int kMaxLongRoundFactor = 16;
int long_round_factor(const RoundWall& first);

// Constants of the checks, with their sources:
// - kWallSlackMs: a round's samples may exceed its wall time by at most this
//   (clock granularity of the launcher's steady clock and of the harness's).
// - kUnseenFraction: an arm's untimed time per iteration may exceed the
//   base's by at most this fraction of the base's per-iteration time before
//   it is flagged; a figure of ours, well below the forgeries the issue
//   records (3x and more) and above what a driver's cache flush or a sync
//   adds to both arms alike, which cancels.
// - kClaimsFraction: an arm's samples are intervals inside its process's run,
//   one after another, so each extra iteration makes the process run at
//   least its sample longer; claims that exceed the arm's own wall-time slope
//   by more than this fraction of themselves (and kSignificanceZ standard
//   errors of that slope) were not taken in that run. A figure of ours: an
//   honest arm's slope is its claim plus its untimed work, never half of it.
// - kSignificanceZ: the excess must also pass the two fits' slopes' standard
//   error by the t quantile at this normal's one-sided tail (4 sigma: 3e-5
//   false flags per case; a false red costs a person's time, so the bar is
//   high); significance_bar gives it for the rounds there were.
// - kFlatGrowth / kFlatWork: a timer is "flat" when the work (or the base's
//   time) grows by at least kFlatWork x across the cases while the arm's
//   median grows by less than kFlatGrowth x (a figure of ours: time must grow
//   at least 1/16 as fast as a 4x larger problem).
// - kCeilingMargin: an achieved rate may exceed the measured ceiling by this
//   factor: the ceiling is a best-of-N copy, below the memory's peak; on the
//   H200 the copy reads 4.2-4.3 TB/s against the 4.8 TB/s HBM3e peak of
//   NVIDIA's specification (1.12-1.14x).
// - kDriftZ: a drift's t statistic must exceed this (trend: slope over its
//   standard error; step: Welch's t at the best split, which is the largest of
//   R - 3 tests, hence a higher bar than the trend's).
// - kUntimedLoadFactor: how much more untimed time per iteration than the
//   base's an arm may show from the machine's load alone. Untimed work
//   (drawing each iteration's inputs, hashing and writing its outputs:
//   fresh pages every time) slows in episodes that the timed work does not
//   see: kda-decode's trusted driver at B = 8 on the 2-core CI-like VM, idle,
//   outputs on tmpfs, had runs of consecutive iterations whose gaps between
//   densefeed's brackets went from 38-60 ms to 116-208 ms (2.5-4x) while its
//   kernel's own 7-9 ms did not move (kernels/kda_decode/bench/
//   untimed_gaps.py prints them), and CI saw an honest candidate's untimed
//   time at 2.2x the base's (178.5 ms against 80.0 ms per iteration).
//   Beyond kUnseenFraction and the standard errors, an excess up to this
//   factor of the base's untimed time cannot tell hidden work from load:
//   wall_unreliable (inconclusive, never faster), not unseen_time.
inline constexpr double kWallSlackMs = 1.0;
inline constexpr double kUntimedLoadFactor = 2.0;
inline constexpr double kUnseenFraction = 0.25;
inline constexpr double kClaimsFraction = 0.5;
inline constexpr double kSignificanceZ = 4.0;
inline constexpr double kFlatGrowth = 1.25;
inline constexpr double kFlatWork = 4.0;
inline constexpr double kCeilingMargin = 1.15;
inline constexpr double kDriftTrendZ = 4.0;
inline constexpr double kDriftStepZ = 5.0;
// Common-mode drift blocks a verdict only when the paired log-ratio moved
// with it: by more than kDriftRatioShare of the band (log(1 + threshold);
// half the band is enough to carry a verdict across it) with |t| >
// kDriftRatioT (two-sided 5 %). Drift both arms share cancels in the paired
// ratio (issue 29's 40-run tables: blocking on it cost 5 % of A/A runs and
// 35 % of 1.1x runs their verdict).
inline constexpr double kDriftRatioShare = 0.5;
inline constexpr double kDriftRatioT = 2.0;

// Rounds whose samples add up to more than their wall time (+ kWallSlackMs),
// one flag per arm naming the first such round. `arm` names it.
// The outside clock's cross-check of one arm's driver rounds (issue 26). Per
// round, `inside` is the driver's samples.json, `outside` densefeed's
// intervals of the same iterations (ms, same length) and `overhead_ms` the
// round's empty-bracket median. Flags clock_disagrees when
//   - a sample exceeds its outside interval by more than overhead_ms +
//     kClockSlackMs: each outside interval holds the whole call by
//     causality (outside_clock.h), so a longer in-process sample was not
//     taken in that call; or
//   - over all rounds, the in-process sum is below the outside sum less the
//     brackets' overhead (iterations x overhead) by more than
//     kClockGapFraction of it: in-process samples that claim much less time
//     than densefeed saw were shrunk after they were taken (a kernel that
//     patched the driver's writer or clock).
// Returns nothing when they agree (or there are no rounds).
struct ClockRoundSamples {
  std::vector<double> inside;
  std::vector<double> outside;
  double overhead_ms = 0;
};
// - kClockSlackMs: the two clocks' granularity (both CLOCK_MONOTONIC, ns) and
//   the rounding of ms in samples.json: 1 us.
// - kClockGapFraction: an honest driver's samples lie inside the outside
//   intervals, short of them by the bracket's overhead, which the empty
//   brackets measure; the kernel stamps the bracket's bytes as they are
//   written (outside_clock.h), so no reader's wake-up is in an interval,
//   but on a loaded machine the driver itself can be preempted between its
//   write and its timer (up to a few ms on the 2-core CI machine), so a gap
//   is flagged only beyond half of the outside time left after the measured
//   overhead; a figure of ours, far below the forgeries issue 26 records
//   (39.6x: a 97 % gap).
inline constexpr double kClockSlackMs = 1e-3;
inline constexpr double kClockGapFraction = 0.5;
std::optional<TimingFlag> check_clock_agrees(const std::vector<ClockRoundSamples>& rounds, const std::string& arm);

// The samples that decide one driver round (issue 26: "the in-process ones
// only where they agree with [densefeed's outside timestamps] within the
// bracket's measured overhead"). For timed iteration k, the driver's own
// sample inside[k] (ms), bounded by densefeed's interval outside[k] around
// it: at most outside[k] (nothing inside a bracket lasts longer than it), at
// least outside[k] - overhead - jitter, where overhead is the median of the
// round's empty brackets `empty` (each holds the driver's timer and sync
// with nothing between them: a CUDA event pair's launch and synchronisation
// cost is in it) and jitter is 3 median absolute deviations of them. So a
// sample that in-process code shrank counts as what densefeed saw less the
// overhead; an honest one, short of its bracket by about the overhead,
// counts as itself (a CUDA event's interval, which the host's clock cannot
// resolve). inside and outside have the same length; empty may be empty
// (overhead and jitter 0). Pure.
struct BoundedSamples {
  std::vector<double> ms;
  std::size_t raised = 0;   // samples below the lower bound (taken as it)
  std::size_t lowered = 0;  // samples above their bracket (taken as it)
  double overhead_ms = 0;
  double jitter_ms = 0;
};
BoundedSamples bound_by_outside_clock(const std::vector<double>& inside, const std::vector<double>& outside,
                                      const std::vector<double>& empty);

std::vector<TimingFlag> check_round_sums(const std::vector<RoundWall>& rounds, const std::string& arm);

// Compares each arm's claimed per-iteration time (the mean of its samples, ms)
// with its wall-time slope; flags the candidate when its untimed time per
// iteration exceeds the base's by more than kUnseenFraction of the base's
// claimed time and significance_bar(base fit, candidate fit) standard errors
// (unseen_time) — an excess that passes both but stays within
// kUntimedLoadFactor of the base's own untimed time is wall_unreliable
// ("both": load can move untimed work that much; the case is inconclusive,
// never faster) — or when its claims exceed its own slope by more than
// kClaimsFraction of the claims and significance_bar(its dof) standard
// errors of that slope (claims_unrepeated: e.g.
// samples forged once and the process ended, at any claimed speed; judged
// against its own wall growth, never the base's, whose overhead moves with
// the machine's load). Nothing when either fit is not fitted. figures: both arms'
// slopes, claims and standard errors (ms).
//
// `credit_base_untimed` false: the base's own untimed time per iteration
// cannot vouch for the candidate's, because the agent wrote the base and a
// self-timed harness decides what is untimed (base_origin.h is_agent_base): a
// base padded outside its timer would hide the same amount of the
// candidate's work. Then an excess that only the base's untimed time brings
// under the bar is wall_unreliable ("both": inconclusive, never faster, with
// a trusted base as the way out), never unseen_time (nothing shows which arm
// hid what).
std::vector<TimingFlag> check_wall_growth(const std::vector<RoundWall>& base, const std::vector<RoundWall>& candidate,
                                          double base_claimed_ms, double candidate_claimed_ms, bool credit_base_untimed = true);

// Whether densefeed's own clock confirms a self-timed candidate's claim to be
// faster (issue 26: the clock lives outside the kernel). Both arms run the
// gate's one harness, so their untimed work per iteration is the same and
// the difference of their wall-time slopes (fit_wall, s per iteration) is the
// difference of what each iteration really costs: the claim is confirmed
// when the base's slope exceeds the candidate's by more than
// significance_bar(base fit, candidate fit) standard errors of that
// difference. A wall_unconfirmed flag ("both": it
// blames neither arm; the case is inconclusive, never faster) when it does
// not, or when either fit is not fitted; nothing when the candidate claims
// no less than the base (`*_claimed_ms`: the mean of each arm's samples, ms).
// The runner keeps running rounds (to its next look, within the case's cap)
// while this flag stands, so a loaded machine costs rounds, not the verdict.
std::optional<TimingFlag> check_wall_confirms(const std::vector<RoundWall>& base, const std::vector<RoundWall>& candidate,
                                              double base_claimed_ms, double candidate_claimed_ms);

// Drift of both arms together in round order: series of per-round medians
// (ms, one per round per arm, same length). A flag when the common mode
// (mean of both arms' log medians) has a least-squares trend whose total
// change over the rounds exceeds log(1 + threshold) with |t| > kDriftTrendZ,
// or a step (best split, at least 3 rounds each side) larger than that with
// Welch |t| > kDriftStepZ, and both arms moved in the same direction, and
// over the same rounds (the trend, or the step's split) the paired
// log-ratio log(base / candidate) moved too (kDriftRatioShare, kDriftRatioT).
// `clocks` (MHz per round, both arms, may be empty) is recorded in figures.
std::optional<TimingFlag> check_drift(const std::vector<double>& base_medians, const std::vector<double>& candidate_medians,
                                      double threshold, const std::vector<double>& clocks);

// One case as the flat-timer and ceiling checks see it.
struct CaseTiming {
  std::string label;
  double base_median_ms = 0;
  double candidate_median_ms = 0;
  std::optional<double> bytes;  // declared work (bench.work), when the gate declares it
  std::optional<double> flops;
};

// Flags an arm whose per-iteration medians grow by less than kFlatGrowth x
// across the cases while the work grows by at least kFlatWork x (declared
// bytes, else flops, else the base's medians as the measure of work). One
// flag per flat arm, naming the cases. Needs at least two cases.
std::vector<TimingFlag> check_flat_timer(const std::vector<CaseTiming>& cases);

// A machine's measured ceilings (machine_ceilings.h): bytes/s and FLOP/s;
// 0 = not measured.
struct Ceilings {
  double bytes_per_s = 0;         // the fastest copy rate at any working set (caches included), bytes/s
  double flops_per_s = 0;
  std::string source;  // e.g. "densefeed machine calibrate on host x at 2026-12-01T10:00:00Z"
  // The copy rate at a working set of at least 4x the last-level cache
  // (bytes/s; 0 = not measured: bytes_per_s applies to every case), and the
  // size of that cache (bytes; 0 = unknown).
  double memory_bytes_per_s = 0;
  double cache_bytes = 0;
};

// Flags an arm of one case whose achieved bytes/s or FLOP/s (declared work
// over its median time) exceeds the ceiling times kCeilingMargin, naming the
// figure and the ceiling. The bandwidth ceiling is the one that fits the
// case's working set: the declared bench.work bytes taken as the working set
// (what a streaming kernel reads and writes once per iteration), a case whose
// bytes exceed cache_bytes is held to memory_bytes_per_s (when measured),
// one that fits the cache to bytes_per_s (issue 26: a CPU's in-cache copy
// rate, 3.5x its memory rate on the 2-core CI machine, let a kernel claim
// more than the memory can move).
std::vector<TimingFlag> check_ceilings(const CaseTiming& c, const Ceilings& ceilings);

}  // namespace densefeed
