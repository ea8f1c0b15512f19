#include "bench_statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

#include "statistics.h"

#include <boost/math/distributions/students_t.hpp>

namespace densefeed {

namespace {

// Up to this many non-zero values the exact null distribution is enumerated:
// the counts stay below 2^50, exact in a uint64_t and in a double's 53-bit
// significand, and the table has n(n+1) + 1 <= 2551 entries. The limit is
// densefeed's choice; past it the normal approximation is close (our check, in
// the tests: n = 60, p = 0.0362 against the exact 0.0356).
constexpr std::size_t kExactMaxN = 50;

// Issue 4: an arm whose relative spread reaches 10% is not steady enough to
// decide on, and more than 10% of samples throttled makes the timing suspect.
constexpr double kMaxRelativeSpread = 0.10;
constexpr std::size_t kMaxThrottledPerTen = 1;  // throttled * 10 > total * 1

// Ours, not from a published source: clocks 1% apart change a compute-bound
// kernel's time by about 1% (time ~ 1 / clock), which is the smallest effect
// densefeed ever claims (threshold >= 1%), so a larger clock gap could by itself
// produce a verdict.
constexpr double kMaxClockGap = 0.01;

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// One uniform index in [0, n) from the generator. std::uniform_int_distribution
// is left to each standard library ([rand.dist.general]), while mt19937_64's
// output is fixed by the standard ([rand.predef]); rejecting the top partial
// block keeps the draw unbiased and the same everywhere.
std::size_t draw_index(std::mt19937_64& gen, std::size_t n) {
  const std::uint64_t range = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t limit = range - (range % n + 1) % n;  // a multiple of n, minus one
  for (;;) {
    const std::uint64_t v = gen();
    if (v <= limit) return static_cast<std::size_t>(v % n);
  }
}

void check_finite(const std::vector<double>& x, const char* what) {
  for (double v : x) {
    if (!std::isfinite(v)) throw std::invalid_argument(fmt::format("{}: non-finite value {}", what, v));
  }
}

}  // namespace

double wilcoxon_signed_rank_p(const std::vector<double>& x) {
  check_finite(x, "wilcoxon_signed_rank_p");
  std::vector<double> nz;
  for (double v : x) {
    if (v != 0) nz.push_back(v);
  }
  const std::size_t n = nz.size();
  if (n == 0) return 1;

  // Doubled average ranks: a tie group over 1-based positions i..j has average
  // rank (i + j) / 2, so 2 * rank = i + j is an integer and sums stay exact.
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return std::abs(nz[a]) < std::abs(nz[b]); });
  std::vector<std::uint64_t> doubled_rank(n);
  std::vector<std::size_t> tie_sizes;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j + 1 < n && std::abs(nz[order[j + 1]]) == std::abs(nz[order[i]])) ++j;
    for (std::size_t k = i; k <= j; ++k) doubled_rank[order[k]] = (i + 1) + (j + 1);
    tie_sizes.push_back(j - i + 1);
    i = j + 1;
  }
  std::uint64_t w2 = 0;  // 2 * W+
  for (std::size_t i = 0; i < n; ++i) {
    if (nz[i] > 0) w2 += doubled_rank[i];
  }

  if (n <= kExactMaxN) {
    // count[s]: sign vectors whose positive doubled ranks sum to s; each of the
    // 2^n vectors is equally likely under H0 (Hollander et al. 2014, 3.1).
    const std::size_t total = n * (n + 1);  // sum of all doubled ranks
    std::vector<std::uint64_t> count(total + 1, 0);
    count[0] = 1;
    std::size_t reach = 0;
    for (std::uint64_t d : doubled_rank) {
      for (std::size_t s = reach + 1; s-- > 0;) {
        if (count[s] != 0) count[s + d] += count[s];
      }
      reach += d;
    }
    std::uint64_t at_most = 0, at_least = 0;
    for (std::size_t s = 0; s <= total; ++s) {
      if (s <= w2) at_most += count[s];
      if (s >= w2) at_least += count[s];
    }
    const int exponent = -static_cast<int>(n);
    const double lower = std::ldexp(static_cast<double>(at_most), exponent);
    const double upper = std::ldexp(static_cast<double>(at_least), exponent);
    return std::min(1.0, 2 * std::min(lower, upper));
  }

  // Large-sample approximation with the tie-corrected variance (Hollander et
  // al. 2014, 3.1) and a continuity correction of 1/2 (R's wilcox.test).
  const double nd = static_cast<double>(n);
  const double mean = nd * (nd + 1) / 4;
  double tie_term = 0;
  for (std::size_t t : tie_sizes) {
    const double td = static_cast<double>(t);
    tie_term += td * td * td - td;
  }
  const double sd = std::sqrt(nd * (nd + 1) * (2 * nd + 1) / 24 - tie_term / 48);
  const double w = static_cast<double>(w2) / 2;
  // The upper tail as Phi(-z), not 1 - Phi(z), to keep its digits far out.
  const double lower = normal_cdf((w - mean + 0.5) / sd);
  const double upper = normal_cdf(-(w - mean - 0.5) / sd);
  return std::min(1.0, 2 * std::min(lower, upper));
}

Interval bootstrap_median_ci(const std::vector<double>& x, double confidence, int resamples, std::uint64_t seed) {
  if (x.empty()) throw std::invalid_argument("bootstrap_median_ci: empty sample");
  check_finite(x, "bootstrap_median_ci");
  if (!(confidence > 0 && confidence < 1)) {
    throw std::invalid_argument(fmt::format("bootstrap_median_ci: confidence {} outside (0, 1)", confidence));
  }
  if (resamples < 1) throw std::invalid_argument(fmt::format("bootstrap_median_ci: {} resamples", resamples));

  std::mt19937_64 gen(seed);
  std::vector<double> medians(static_cast<std::size_t>(resamples));
  std::vector<double> resample(x.size());
  for (double& m : medians) {
    for (double& v : resample) v = x[draw_index(gen, x.size())];
    m = median(resample);
  }
  // Percentile interval (Efron & Tibshirani 1993, Ch. 13): the bootstrap
  // medians' (1 - c)/2 and (1 + c)/2 quantiles.
  return {quantile(medians, (1 - confidence) / 2), quantile(medians, (1 + confidence) / 2)};
}

std::vector<int> default_looks(int max_rounds) {
  if (max_rounds < 4) throw std::invalid_argument(fmt::format("default_looks: max_rounds {} < 4", max_rounds));
  std::vector<int> looks;
  for (int n : {4, 6, 8, 11, 15, 20, 27, 36, 48, 64, 85, 113, 150, 200}) {
    if (n < max_rounds) looks.push_back(n);
  }
  looks.push_back(max_rounds);
  return looks;
}

double alpha_at_look(double alpha, int k) {
  if (k < 1) throw std::invalid_argument(fmt::format("alpha_at_look: look {} < 1", k));
  return alpha / (static_cast<double>(k) * static_cast<double>(k + 1));
}

const char* to_string(BenchVerdict v) {
  switch (v) {
    case BenchVerdict::faster: return "faster";
    case BenchVerdict::slower: return "slower";
    case BenchVerdict::same: return "same";
    case BenchVerdict::inconclusive: return "inconclusive";
  }
  return "inconclusive";
}

namespace {

void check_input(const DecisionInput& in) {
  if (in.base.size() != in.candidate.size()) {
    throw std::invalid_argument(
        fmt::format("decide: {} base rounds but {} candidate rounds", in.base.size(), in.candidate.size()));
  }
  for (const auto* arm : {&in.base, &in.candidate}) {
    const char* name = arm == &in.base ? "base" : "candidate";
    for (std::size_t i = 0; i < arm->size(); ++i) {
      const ArmRound& r = (*arm)[i];
      if (r.samples_ms.empty()) throw std::invalid_argument(fmt::format("decide: {} round {} has no sample", name, i));
      check_finite(r.samples_ms, "decide");
      if (r.throttled > r.samples_ms.size()) {
        throw std::invalid_argument(fmt::format("decide: {} round {} has {} throttled of {} samples", name, i,
                                                r.throttled, r.samples_ms.size()));
      }
    }
  }
  if (in.looks.empty()) throw std::invalid_argument("decide: no looks");
  for (std::size_t i = 0; i < in.looks.size(); ++i) {
    if (in.looks[i] < 2 || (i > 0 && in.looks[i] <= in.looks[i - 1])) {
      throw std::invalid_argument("decide: looks must be at least 2 rounds and strictly ascending");
    }
  }
  if (!(in.alpha > 0 && in.alpha < 1)) throw std::invalid_argument(fmt::format("decide: alpha {}", in.alpha));
  if (!(in.threshold >= 0)) throw std::invalid_argument(fmt::format("decide: threshold {}", in.threshold));
}

std::vector<double> pooled(const std::vector<ArmRound>& arm, std::size_t rounds) {
  std::vector<double> all;
  for (std::size_t i = 0; i < rounds; ++i) all.insert(all.end(), arm[i].samples_ms.begin(), arm[i].samples_ms.end());
  return all;
}

std::optional<double> median_clock(const std::vector<ArmRound>& arm, std::size_t rounds) {
  std::vector<double> clocks;
  for (std::size_t i = 0; i < rounds; ++i) {
    if (arm[i].sm_clock_mhz) clocks.push_back(*arm[i].sm_clock_mhz);
  }
  if (clocks.empty()) return std::nullopt;
  return median(clocks);
}

// The two-sided Student t quantile t(1 - a / 2, df) (Boost.Math).
double t_quantile(double a, double df) {
  return boost::math::quantile(boost::math::students_t_distribution<double>(df), 1 - a / 2);
}

struct LogRatios {
  std::vector<double> r;
  double mean = 0, sd = 0;
};

// Per round, log(centre(base) / centre(candidate)): the median (what
// decides) or, `total`, the mean of the round's samples (the arms' total
// time, which a stall in a few iterations cannot hide from).
LogRatios log_ratios_of(const DecisionInput& in, std::size_t rounds, bool total = false) {
  LogRatios out;
  const auto centre = [total](const std::vector<double>& v) {
    if (!total) return median(v);
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  for (std::size_t i = 0; i < rounds; ++i) out.r.push_back(std::log(centre(in.base[i].samples_ms) / centre(in.candidate[i].samples_ms)));
  double sum = 0;
  for (double v : out.r) sum += v;
  out.mean = rounds ? sum / static_cast<double>(rounds) : std::numeric_limits<double>::quiet_NaN();
  double ss = 0;
  for (double v : out.r) ss += (v - out.mean) * (v - out.mean);
  out.sd = rounds >= 2 ? std::sqrt(ss / static_cast<double>(rounds - 1)) : std::numeric_limits<double>::quiet_NaN();
  return out;
}

// Rounds beyond `rounds` until a look of in.looks after `rounds` would place
// the interval of a mean `m` with sd `s` clear of the band (outside it when
// |m| > b, inside when |m| < b); -1 when none would.
int rounds_to_decide(const DecisionInput& in, std::size_t rounds, double m, double s, double b) {
  if (!std::isfinite(m) || !std::isfinite(s)) return -1;
  const double gap = std::abs(std::abs(m) - b);
  for (std::size_t k = 0; k < in.looks.size(); ++k) {
    const auto n = static_cast<std::size_t>(in.looks[k]);
    if (n <= rounds) continue;
    const double hw = t_quantile(alpha_at_look(in.alpha, static_cast<int>(k + 1)), static_cast<double>(n - 1)) * s /
                      std::sqrt(static_cast<double>(n));
    if (hw < gap) return static_cast<int>(n - rounds);
  }
  return -1;
}

// The figures and the verdict of the first `rounds` rounds, tested at level a
// (the k-th look's); `with_p`: also the Wilcoxon p (reported, never a
// condition: left out of the looks a decision does not come from, as its
// exact distribution costs O(n^3)).
Decision evaluate(const DecisionInput& in, std::size_t rounds, double a, bool with_p = true) {
  Decision d;
  d.rounds_used = static_cast<int>(rounds);
  d.alpha_at_look = a;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (rounds == 0) {
    d.speedup = d.p_value = d.base_median_ms = d.candidate_median_ms = nan;
    d.base_relative_spread = d.candidate_relative_spread = d.log_ratio_sd = nan;
    d.speedup_ci = {nan, nan};
    d.total_speedup = nan;
    d.total_speedup_ci = {nan, nan};
    d.more_rounds = -1;
    return d;
  }
  const LogRatios lr = log_ratios_of(in, rounds);
  const double confidence = 1 - a;
  // The point estimate is the median round's: one round in which load hit
  // one arm moves the mean (and widens the interval, which decides) but not
  // the speedup reported (an honest 2x under the driver read 2.019x as a mean).
  d.speedup = std::exp(median(lr.r));
  d.log_ratio_sd = lr.sd;
  Interval ci{nan, nan};
  if (rounds >= 2) {
    const double hw = t_quantile(a, static_cast<double>(rounds - 1)) * lr.sd / std::sqrt(static_cast<double>(rounds));
    ci = {lr.mean - hw, lr.mean + hw};
  }
  d.speedup_ci = {std::exp(ci.lo), std::exp(ci.hi)};
  d.p_value = with_p ? wilcoxon_signed_rank_p(lr.r) : nan;
  const LogRatios tt = log_ratios_of(in, rounds, true);
  Interval total_ci{nan, nan};
  if (rounds >= 2) {
    const double hw = t_quantile(a, static_cast<double>(rounds - 1)) * tt.sd / std::sqrt(static_cast<double>(rounds));
    total_ci = {tt.mean - hw, tt.mean + hw};
  }
  d.total_speedup = std::exp(tt.mean);
  d.total_speedup_ci = {std::exp(total_ci.lo), std::exp(total_ci.hi)};

  const std::vector<double> base_all = pooled(in.base, rounds);
  const std::vector<double> candidate_all = pooled(in.candidate, rounds);
  d.base_median_ms = median(base_all);
  d.candidate_median_ms = median(candidate_all);
  d.base_relative_spread = relative_iqr(base_all);
  d.candidate_relative_spread = relative_iqr(candidate_all);
  const bool spread = d.base_relative_spread >= kMaxRelativeSpread || d.candidate_relative_spread >= kMaxRelativeSpread;

  std::vector<std::string> guards;
  const auto base_clock = median_clock(in.base, rounds);
  const auto candidate_clock = median_clock(in.candidate, rounds);
  if (base_clock && candidate_clock) {
    d.guard_clock = std::abs(*candidate_clock - *base_clock) > kMaxClockGap * *base_clock;
    if (d.guard_clock) {
      guards.push_back(fmt::format("SM clocks base {:.0f} MHz, candidate {:.0f} MHz differ by more than {:.0f}%",
                                   *base_clock, *candidate_clock, 100 * kMaxClockGap));
    }
  }
  std::size_t throttled = 0;
  for (std::size_t i = 0; i < rounds; ++i) throttled += in.base[i].throttled + in.candidate[i].throttled;
  const std::size_t total = base_all.size() + candidate_all.size();
  d.guard_throttle = throttled * 10 > total * kMaxThrottledPerTen;
  if (d.guard_throttle) guards.push_back(fmt::format("{} of {} samples throttled (limit 10%)", throttled, total));

  // Beyond +-log(1 + threshold) on the log scale is beyond +-threshold as a speedup.
  const double bound = std::log1p(in.threshold);
  const bool interval = rounds >= 2;
  const bool above = interval && ci.lo > bound;
  const bool below = interval && ci.hi < -bound;
  const bool inside = interval && ci.lo > -bound && ci.hi < bound;
  // The arms' total time: slower when its interval is, whatever the medians
  // say; a median verdict of faster (same) its point estimate does not bear
  // out (at most +bound; below -bound) is a stall the medians hide.
  const bool total_below = interval && total_ci.hi < -bound;
  d.guard_stall = !below && !total_below && ((above && tt.mean <= bound) || (inside && tt.mean < -bound));
  if (d.guard_stall) {
    guards.push_back(fmt::format("the arms' total time does not bear the medians out: mean per-round log(mean base / mean "
                                 "candidate) {:.3f} (speedup {:.3f}x), so a few iterations stall by what the others gained",
                                 tt.mean, d.total_speedup));
  }
  if (below || total_below) {
    // A slowdown stands whatever the guards: noise, clocks or throttling
    // (which the harness reports) must never make a candidate look better
    // than slower.
    d.verdict = BenchVerdict::slower;
  } else if (!guards.empty()) {
    d.verdict = BenchVerdict::inconclusive;
  } else if (above) {
    d.verdict = BenchVerdict::faster;
  } else if (inside) {
    d.verdict = BenchVerdict::same;
  } else {
    d.verdict = BenchVerdict::inconclusive;
    d.guard_spread = spread;
  }
  d.more_rounds = d.verdict == BenchVerdict::inconclusive && guards.empty() ? rounds_to_decide(in, rounds, lr.mean, lr.sd, bound) : 0;
  if (d.verdict == BenchVerdict::inconclusive && !guards.empty()) d.more_rounds = -1;  // more rounds do not clear a guard

  std::string why;
  for (const auto& g : guards) why += g + "; ";
  const char* relation = above || below ? "beyond" : inside ? "inside" : "crosses";
  if (total_below && !below) {
    why += fmt::format("the arms' total time is slower: mean per-round log(mean base / mean candidate) {:.3f} (speedup {:.3f}x), "
                       "{:.3g}% CI [{:.3f}, {:.3f}] below -{:.1f}% (what the medians say follows); ", tt.mean,
                       d.total_speedup, 100 * confidence, d.total_speedup_ci.lo, d.total_speedup_ci.hi, 100 * in.threshold);
  }
  d.reason = fmt::format("{}: {}mean log-ratio {:.3f} (speedup {:.3f}x), {:.3g}% CI [{:.3f}, {:.3f}] {} +-{:.1f}% after {} rounds "
                         "(level {:.2g}); Wilcoxon p = {:.2g}",
                         to_string(d.verdict), why, lr.mean, d.speedup, 100 * confidence, d.speedup_ci.lo, d.speedup_ci.hi,
                         relation, 100 * in.threshold, rounds, a, d.p_value);
  if (spread) {
    d.reason += fmt::format("; relative spread base {:.1f}%, candidate {:.1f}% ({})", 100 * d.base_relative_spread,
                            100 * d.candidate_relative_spread,
                            d.guard_spread ? "the paired ratios are too spread to decide" : "reported: the paired ratios decide");
  }
  d.look_reason = d.reason;
  return d;
}

struct Sequential {
  Decision decision;
  bool stop = false;
};

// `with_p`: the returned decision carries the Wilcoxon p (should_stop needs none).
Sequential run_looks(const DecisionInput& in, bool with_p) {
  check_input(in);
  const std::size_t rounds = in.base.size();
  std::optional<Decision> last;
  std::size_t last_k = 0;
  for (std::size_t k = 0; k < in.looks.size(); ++k) {
    const auto n = static_cast<std::size_t>(in.looks[k]);
    if (n > rounds) {
      const std::size_t more = n - rounds;
      Decision d = last ? evaluate(in, static_cast<std::size_t>(in.looks[last_k]), last->alpha_at_look, with_p)
                        : evaluate(in, rounds, alpha_at_look(in.alpha, static_cast<int>(k + 1)), with_p);
      d.look_reason = last ? d.reason : std::string();
      d.reason = fmt::format("needs {} more round{}", more, more == 1 ? "" : "s") + (last ? " (" + d.reason + ")" : std::string());
      d.verdict = BenchVerdict::inconclusive;
      if (!last) d.more_rounds = static_cast<int>(more);
      return {d, false};
    }
    last = evaluate(in, n, alpha_at_look(in.alpha, static_cast<int>(k + 1)), false);
    last_k = k;
    if (last->verdict != BenchVerdict::inconclusive) return {with_p ? evaluate(in, n, last->alpha_at_look) : *last, true};
  }
  // The last look is reached.
  return {with_p ? evaluate(in, static_cast<std::size_t>(in.looks[last_k]), last->alpha_at_look) : *last, true};  // the last look is reached
}

}  // namespace

Decision decide(const DecisionInput& in) { return run_looks(in, true).decision; }

bool should_stop(const DecisionInput& in) { return run_looks(in, false).stop; }

const char* to_string(BenchGuard g) {
  switch (g) {
    case BenchGuard::spread: return "spread";
    case BenchGuard::clock: return "clock";
    case BenchGuard::throttle: return "throttle";
    case BenchGuard::stall: return "stall";
  }
  return "?";
}

std::optional<BenchGuard> bench_guard_from(const std::string& text) {
  for (const auto g : {BenchGuard::spread, BenchGuard::clock, BenchGuard::throttle, BenchGuard::stall}) {
    if (text == to_string(g)) return g;
  }
  return std::nullopt;
}

std::vector<BenchGuard> guards_of(const Decision& d) {
  std::vector<BenchGuard> out;
  if (d.guard_spread) out.push_back(BenchGuard::spread);
  if (d.guard_clock) out.push_back(BenchGuard::clock);
  if (d.guard_throttle) out.push_back(BenchGuard::throttle);
  if (d.guard_stall) out.push_back(BenchGuard::stall);
  return out;
}

}  // namespace densefeed
