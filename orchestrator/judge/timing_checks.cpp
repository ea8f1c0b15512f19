#include "timing_checks.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <map>
#include <set>

#include <string_view>

#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "statistics.h"

namespace densefeed {
namespace {

struct LineFit {
  bool ok = false;
  double intercept = 0, slope = 0, slope_se = 0;
};

// Ordinary least squares y = a + b x with the slope's standard error
// (residual variance over n - 2 degrees of freedom, divided by Sxx).
LineFit least_squares(const std::vector<double>& x, const std::vector<double>& y) {
  LineFit f;
  const std::size_t n = x.size();
  if (n < 3 || y.size() != n) return f;
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(n);
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(n);
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (sxx <= 0) return f;
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  double rss = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = y[i] - f.intercept - f.slope * x[i];
    rss += r * r;
  }
  f.slope_se = std::sqrt(rss / static_cast<double>(n - 2) / sxx);
  f.ok = true;
  return f;
}

double mean(const std::vector<double>& v, std::size_t from, std::size_t to) {
  double s = 0;
  for (std::size_t i = from; i < to; ++i) s += v[i];
  return s / static_cast<double>(to - from);
}

double variance(const std::vector<double>& v, std::size_t from, std::size_t to) {
  const double m = mean(v, from, to);
  double s = 0;
  for (std::size_t i = from; i < to; ++i) s += (v[i] - m) * (v[i] - m);
  return to - from > 1 ? s / static_cast<double>(to - from - 1) : 0;
}

std::string ms(double v) { return fmt::format("{:.4g} ms", v); }

// A drift flag: `how` says what moved ("over 9 rounds in order (t = 5.1)").
TimingFlag drift_flag(double change, double ratio_change, const std::string& how, double threshold,
                      nlohmann::ordered_json figures) {
  TimingFlag f;
  f.kind = TimingFlagKind::drift;
  f.arm = "both";
  f.reason = fmt::format("the machine drifted: both arms' times {} by {:.1f}% {}, more than the {:.1f}% noise threshold, and "
                         "the base/candidate ratio {} by {:.1f}% with them; a clock or thermal change that moves the ratio "
                         "makes the speedup depend on when the rounds ran, so no verdict",
                         change > 0 ? "rose" : "fell", std::expm1(std::abs(change)) * 100, how, threshold * 100,
                         ratio_change > 0 ? "rose" : "fell", std::expm1(std::abs(ratio_change)) * 100);
  f.figures = std::move(figures);
  return f;
}

}  // namespace

const char* to_string(TimingFlagKind k) {
  switch (k) {
    case TimingFlagKind::sum_exceeds_wall: return "sum_exceeds_wall";
    case TimingFlagKind::unseen_time: return "unseen_time";
    case TimingFlagKind::claims_unrepeated: return "claims_unrepeated";
    case TimingFlagKind::flat_timer: return "flat_timer";
    case TimingFlagKind::faster_than_machine: return "faster_than_machine";
    case TimingFlagKind::drift: return "drift";
    case TimingFlagKind::beyond_bound: return "beyond_bound";
    case TimingFlagKind::wall_unreliable: return "wall_unreliable";
    case TimingFlagKind::wall_unconfirmed: return "wall_unconfirmed";
    case TimingFlagKind::clock_disagrees: return "clock_disagrees";
  }
  return "unknown";
}

WallFit fit_wall(const std::vector<RoundWall>& rounds) {
  WallFit w;
  if (rounds.size() < 4) return w;
  std::set<int> counts;
  for (const auto& r : rounds) counts.insert(r.iterations);
  if (counts.size() < 2) return w;
  // Theil-Sen: the median of the slopes between every two rounds of
  // different iteration counts (Sen 1968, "Estimates of the regression
  // coefficient based on Kendall's tau", JASA 63), so that a round a loaded
  // machine delayed moves the fit no more than any other single round.
  std::vector<double> slopes;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    for (std::size_t j = i + 1; j < rounds.size(); ++j) {
      if (rounds[i].iterations == rounds[j].iterations) continue;
      slopes.push_back((rounds[j].wall_s - rounds[i].wall_s) / (rounds[j].iterations - rounds[i].iterations));
    }
  }
  w.per_iteration_s = median(slopes);
  std::vector<double> offsets;
  for (const auto& r : rounds) offsets.push_back(r.wall_s - w.per_iteration_s * r.iterations);
  w.fixed_s = median(offsets);
  // Standard error: a robust residual scale (1.4826 x the median absolute
  // deviation, which is the standard deviation for normal residuals) over
  // the square root of Sxx, as for least squares.
  std::vector<double> residuals, deviations;
  double mean_k = 0;
  for (const auto& r : rounds) mean_k += r.iterations;
  mean_k /= static_cast<double>(rounds.size());
  double sxx = 0;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    residuals.push_back(offsets[i] - w.fixed_s);
    sxx += (rounds[i].iterations - mean_k) * (rounds[i].iterations - mean_k);
  }
  const double mid = median(residuals);
  for (double r : residuals) deviations.push_back(std::abs(r - mid));
  w.per_iteration_se_s = 1.4826 * median(deviations) / std::sqrt(sxx);
  w.dof = static_cast<int>(rounds.size()) - 2;
  w.fitted = true;
  return w;
}

double significance_bar(double dof) {
  static const double tail = boost::math::cdf(boost::math::complement(boost::math::normal(), kSignificanceZ));
  return boost::math::quantile(boost::math::complement(boost::math::students_t(std::max(dof, 1.0)), tail));
}

double significance_bar(const WallFit& a, const WallFit& b) {
  const double va = a.per_iteration_se_s * a.per_iteration_se_s, vb = b.per_iteration_se_s * b.per_iteration_se_s;
  const double denominator = va * va / std::max(a.dof, 1) + vb * vb / std::max(b.dof, 1);
  if (!(denominator > 0)) return significance_bar(static_cast<double>(std::max(a.dof, 1) + std::max(b.dof, 1)));
  return significance_bar((va + vb) * (va + vb) / denominator);
}

int long_round_factor(const RoundWall& first) {
  if (first.timed <= 0 || !(first.samples_sum_ms > 0)) return 2;
  const double claimed_ms = first.samples_sum_ms / first.timed;
  const double untimed_ms = std::max(0.0, first.wall_s * 1e3 - first.samples_sum_ms);
  const double factor = std::ceil(1 + 2 * untimed_ms / (first.timed * claimed_ms));
  if (!std::isfinite(factor)) return kMaxLongRoundFactor;
  return static_cast<int>(std::clamp(factor, 2.0, static_cast<double>(kMaxLongRoundFactor)));
}

BoundedSamples bound_by_outside_clock(const std::vector<double>& inside, const std::vector<double>& outside,
                                      const std::vector<double>& empty) {
  BoundedSamples b;
  if (!empty.empty()) {
    b.overhead_ms = median(empty);
    std::vector<double> deviation;
    for (double e : empty) deviation.push_back(std::abs(e - b.overhead_ms));
    b.jitter_ms = 3 * median(deviation);
  }
  for (std::size_t k = 0; k < inside.size() && k < outside.size(); ++k) {
    const double lo = std::max(0.0, outside[k] - b.overhead_ms - b.jitter_ms), hi = outside[k];
    double v = inside[k];
    if (v < lo) v = lo, ++b.raised;
    if (v > hi) v = hi, ++b.lowered;
    b.ms.push_back(v);
  }
  return b;
}

std::vector<TimingFlag> check_round_sums(const std::vector<RoundWall>& rounds, const std::string& arm) {
  std::vector<TimingFlag> flags;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    const auto& r = rounds[i];
    if (r.samples_sum_ms > r.wall_s * 1e3 + kWallSlackMs) {
      TimingFlag f;
      f.kind = TimingFlagKind::sum_exceeds_wall;
      f.arm = arm;
      f.reason = fmt::format("round {}: the {} arm's {} samples add up to {}, more than the {} its process ran for: "
                             "these timings were not measured in that run",
                             i, arm, r.timed, ms(r.samples_sum_ms), ms(r.wall_s * 1e3));
      f.figures = {{"round", i}, {"samples_sum_ms", r.samples_sum_ms}, {"wall_ms", r.wall_s * 1e3}};
      flags.push_back(std::move(f));
      break;
    }
  }
  return flags;
}

std::vector<TimingFlag> check_wall_growth(const std::vector<RoundWall>& base, const std::vector<RoundWall>& candidate,
                                          double base_claimed_ms, double candidate_claimed_ms, bool credit_base_untimed) {
  std::vector<TimingFlag> flags;
  const WallFit b = fit_wall(base), c = fit_wall(candidate);
  if (!b.fitted || !c.fitted || !(base_claimed_ms > 0)) return flags;
  const double b_slope = b.per_iteration_s * 1e3, c_slope = c.per_iteration_s * 1e3;
  const double se = std::hypot(b.per_iteration_se_s, c.per_iteration_se_s) * 1e3;
  const double b_untimed = b_slope - base_claimed_ms, c_untimed = c_slope - candidate_claimed_ms;
  // Untimed time per iteration is never negative for an arm whose samples
  // are intervals inside its run: a base slope below its claims is the
  // machine's noise, and is not credited to the candidate's excess.
  const double b_overhead = std::max(0.0, b_untimed);
  const double excess = c_untimed - b_overhead;  // > 0: the candidate's wall grows by more than it claims, beyond the base's overhead
  const double load_band = kUntimedLoadFactor * b_overhead;  // what load alone can add to the candidate's untimed time
  const double z_both = significance_bar(b, c), z_base = significance_bar(b.dof), z_candidate = significance_bar(c.dof);
  const double bar = std::max(kUnseenFraction * base_claimed_ms, z_both * se);
  const nlohmann::ordered_json figures = {{"base_wall_per_iteration_ms", b_slope},        {"base_claimed_ms", base_claimed_ms},
                                    {"candidate_wall_per_iteration_ms", c_slope},   {"candidate_claimed_ms", candidate_claimed_ms},
                                    {"slope_se_ms", se},                            {"excess_ms", excess},
                                    {"bar_ms", bar},                                {"bar_standard_errors", z_both},
                                    {"load_band_ms", load_band}};
  const auto flag = [&](TimingFlagKind kind, const char* arm, std::string reason) {
    TimingFlag f;
    f.kind = kind;
    f.arm = arm;
    f.reason = std::move(reason);
    f.figures = figures;
    flags.push_back(std::move(f));
    return flags;
  };
  // The base's own claims against its own wall growth, by the same rule as
  // the candidate's below: when they fail it too, the wall times do not
  // follow the iteration counts in this run (a loaded machine delayed most
  // rounds of one count: an A/A of an honest trusted driver beside two
  // builds gave both arms negative slopes), and neither arm can be judged
  // from them. Not red (nothing shows the candidate cheated) and never
  // faster: the case is inconclusive.
  const double base_gap = -b_untimed;  // what the base claims beyond its wall growth
  if (base_gap > std::max(kClaimsFraction * base_claimed_ms, z_base * b.per_iteration_se_s * 1e3)) {
    return flag(TimingFlagKind::wall_unreliable, "both",
                fmt::format("the wall times do not follow the iteration counts: each extra iteration makes the base's process "
                            "run {} longer although its samples say {} (the candidate: {} for {}), so the machine's load, not the "
                            "code, moved them and the outside checks cannot judge this benchmark; rerun on an idle machine",
                            ms(b_slope), ms(base_claimed_ms), ms(c_slope), ms(candidate_claimed_ms)));
  }
  if (excess > bar && excess <= load_band) {
    return flag(TimingFlagKind::wall_unreliable, "both",
                fmt::format("the wall times cannot tell hidden work from the machine's load: each extra iteration makes the "
                            "candidate's process run {} longer for {} of samples, {} outside what was timed against the base's {} "
                            "({} for {}); untimed work (drawing inputs, writing outputs) slows by up to {:.3g}x more from load alone, "
                            "so neither arm is judged from them; rerun on an idle machine",
                            ms(c_slope), ms(candidate_claimed_ms), ms(c_untimed), ms(b_untimed), ms(b_slope), ms(base_claimed_ms),
                            1 + kUntimedLoadFactor));
  }
  if (excess > bar) {
    return flag(TimingFlagKind::unseen_time, "candidate",
                fmt::format("the timer does not see the work: each extra iteration makes the candidate's process run {} longer "
                            "but its samples say {} (the base: {} for {}); {} per iteration happen outside what was timed (bar {}), "
                            "as with a missing device synchronisation, a side stream or forged samples",
                            ms(c_slope), ms(candidate_claimed_ms), ms(b_slope), ms(base_claimed_ms), ms(excess), ms(bar)));
  }
  // A base the agent wrote vouches for nothing: what only its untimed time
  // covers of the candidate's is not known to be load or its own code.
  if (!credit_base_untimed && b_overhead > 0 && c_untimed > bar) {
    return flag(TimingFlagKind::wall_unreliable, "both",
                fmt::format("the wall times cannot clear the candidate: each extra iteration makes its process run {} longer for {} "
                            "of samples, {} outside what was timed, and only the base's own {} outside its timer ({} for {}) covers "
                            "that; the base is the agent's (a worktree or its own commits), so its untimed time is not credited; "
                            "rerun against a base the agent did not write (the trusted ref or a promoted candidate)",
                            ms(c_slope), ms(candidate_claimed_ms), ms(c_untimed), ms(b_untimed), ms(b_slope), ms(base_claimed_ms)));
  }
  // The candidate's claims beyond its own wall growth, less what the base
  // showed of the same in this run (the machine's share: a base can only
  // claim more than its wall grows by when the load moved its rounds),
  // against its own slope's error, or both slopes' when the base's is
  // subtracted. Never the base's opposite (its wall growing by more than it
  // claims: a base a loaded machine delayed in its longer rounds made an
  // honest self-timed 2x red that way).
  const double credit = std::max(0.0, base_gap);
  if (candidate_claimed_ms - c_slope - credit >
      std::max(kClaimsFraction * candidate_claimed_ms, credit > 0 ? z_both * se : z_candidate * c.per_iteration_se_s * 1e3)) {
    return flag(TimingFlagKind::claims_unrepeated, "candidate",
                fmt::format("the candidate's samples say {} per iteration but each extra iteration makes its process run only {} "
                            "longer (the base: {} for {}): what was timed is not what each iteration does",
                            ms(candidate_claimed_ms), ms(c_slope), ms(b_slope), ms(base_claimed_ms)));
  }
  return flags;
}

std::optional<TimingFlag> check_wall_confirms(const std::vector<RoundWall>& base, const std::vector<RoundWall>& candidate,
                                              double base_claimed_ms, double candidate_claimed_ms) {
  if (!(candidate_claimed_ms < base_claimed_ms)) return std::nullopt;
  const WallFit b = fit_wall(base), c = fit_wall(candidate);
  TimingFlag f;
  f.kind = TimingFlagKind::wall_unconfirmed;
  f.arm = "both";
  if (!b.fitted || !c.fitted) {
    f.reason = "densefeed's own clock cannot confirm the candidate's samples: too few rounds of two iteration counts to fit "
               "each arm's wall-time growth";
    f.figures = {{"base_rounds", base.size()}, {"candidate_rounds", candidate.size()}};
    return f;
  }
  const double b_slope = b.per_iteration_s * 1e3, c_slope = c.per_iteration_s * 1e3;
  const double se = std::hypot(b.per_iteration_se_s, c.per_iteration_se_s) * 1e3;
  const double gap = b_slope - c_slope;
  const double z = significance_bar(b, c);
  if (gap > z * se) return std::nullopt;
  f.reason = fmt::format("densefeed's own clock does not confirm the candidate's samples: they say {} per iteration against the "
                         "base's {}, but each extra iteration makes the candidate's process run {} longer and the base's {} "
                         "(a difference of {}, needed: more than {}, {} standard errors), so its speedup is not measured; on a "
                         "loaded machine more rounds or an idle one settle it",
                         ms(candidate_claimed_ms), ms(base_claimed_ms), ms(c_slope), ms(b_slope), ms(gap),
                         ms(z * se), fmt::format("{:.3g}", z));
  f.figures = {{"base_wall_per_iteration_ms", b_slope}, {"base_claimed_ms", base_claimed_ms},
               {"candidate_wall_per_iteration_ms", c_slope}, {"candidate_claimed_ms", candidate_claimed_ms},
               {"slope_se_ms", se}, {"gap_ms", gap}, {"bar_ms", z * se}, {"bar_standard_errors", z}};
  return f;
}

std::optional<TimingFlag> check_drift(const std::vector<double>& base_medians, const std::vector<double>& candidate_medians,
                                      double threshold, const std::vector<double>& clocks) {
  const std::size_t n = base_medians.size();
  if (n < 6 || candidate_medians.size() != n) return std::nullopt;
  std::vector<double> x, common, lb, lc, ratio;
  for (std::size_t i = 0; i < n; ++i) {
    if (!(base_medians[i] > 0) || !(candidate_medians[i] > 0)) return std::nullopt;
    x.push_back(static_cast<double>(i));
    lb.push_back(std::log(base_medians[i]));
    lc.push_back(std::log(candidate_medians[i]));
    common.push_back((lb.back() + lc.back()) / 2);
    ratio.push_back(lb.back() - lc.back());
  }
  const double bar = std::log1p(std::max(threshold, 0.0));
  const auto t_of = [](double d, double se) { return se > 0 ? std::abs(d) / se : (d != 0 ? INFINITY : 0); };
  nlohmann::ordered_json figures = {{"rounds", n}, {"threshold", threshold}};
  if (!clocks.empty()) figures["sm_clock_mhz"] = clocks;
  // Trend: the common mode's least-squares slope, total change over the
  // rounds, and the paired log-ratio's over the same rounds.
  const LineFit t = least_squares(x, common);
  const LineFit tb = least_squares(x, lb), tc = least_squares(x, lc), tr = least_squares(x, ratio);
  if (t.ok && tb.ok && tc.ok && tr.ok) {
    const double total = t.slope * static_cast<double>(n - 1), moved = tr.slope * static_cast<double>(n - 1);
    const double z = t_of(t.slope, t.slope_se), zr = t_of(tr.slope, tr.slope_se);
    if (std::abs(total) > bar && z > kDriftTrendZ && (tb.slope > 0) == (tc.slope > 0) &&
        std::abs(moved) > kDriftRatioShare * bar && zr > kDriftRatioT) {
      figures["trend_total"] = std::expm1(total);
      figures["trend_t"] = z;
      figures["ratio_change"] = std::expm1(moved);
      figures["ratio_t"] = zr;
      return drift_flag(total, moved, fmt::format("over {} rounds in order (t = {:.1f}; the ratio's t = {:.1f})", n, z, zr),
                        threshold, figures);
    }
  }
  // Step: the best split with at least 3 rounds on each side.
  double best_d = 0, best_z = 0;
  std::size_t best_s = 0;
  for (std::size_t s = 3; s + 3 <= n; ++s) {
    const double d = mean(common, s, n) - mean(common, 0, s);
    const double se = std::sqrt(variance(common, 0, s) / static_cast<double>(s) + variance(common, s, n) / static_cast<double>(n - s));
    const double z = t_of(d, se);
    if (std::abs(d) > std::abs(best_d) && z > kDriftStepZ) {
      best_d = d;
      best_z = z;
      best_s = s;
    }
  }
  if (best_s > 0 && std::abs(best_d) > bar) {
    const double db = mean(lb, best_s, n) - mean(lb, 0, best_s), dc = mean(lc, best_s, n) - mean(lc, 0, best_s);
    const double dr = mean(ratio, best_s, n) - mean(ratio, 0, best_s);
    const double zr = t_of(dr, std::sqrt(variance(ratio, 0, best_s) / static_cast<double>(best_s) +
                                         variance(ratio, best_s, n) / static_cast<double>(n - best_s)));
    if ((db > 0) == (dc > 0) && std::abs(dr) > kDriftRatioShare * bar && zr > kDriftRatioT) {
      figures["step_at_round"] = best_s;
      figures["step"] = std::expm1(best_d);
      figures["step_t"] = best_z;
      figures["ratio_change"] = std::expm1(dr);
      figures["ratio_t"] = zr;
      return drift_flag(best_d, dr, fmt::format("from round {} on (Welch t = {:.1f}; the ratio's t = {:.1f})", best_s, best_z, zr),
                        threshold, figures);
    }
  }
  return std::nullopt;
}

std::vector<TimingFlag> check_flat_timer(const std::vector<CaseTiming>& cases) {
  std::vector<TimingFlag> flags;
  if (cases.size() < 2) return flags;
  // The measure of work: declared bytes, else flops, else the base's time.
  const bool by_bytes = std::all_of(cases.begin(), cases.end(), [](const CaseTiming& c) { return c.bytes.has_value(); });
  const bool by_flops = !by_bytes && std::all_of(cases.begin(), cases.end(), [](const CaseTiming& c) { return c.flops.has_value(); });
  const auto work = [&](const CaseTiming& c) { return by_bytes ? *c.bytes : by_flops ? *c.flops : c.base_median_ms; };
  const auto [lo, hi] = std::minmax_element(cases.begin(), cases.end(), [&](const CaseTiming& a, const CaseTiming& b) {
    return work(a) < work(b);
  });
  const double work_growth = work(*hi) / work(*lo);
  if (!(work_growth >= kFlatWork)) return flags;
  const std::string measure = by_bytes ? "declared bytes" : by_flops ? "declared FLOPs" : "the base's time";
  for (const std::string arm : {"base", "candidate"}) {
    if (arm == "base" && !by_bytes && !by_flops) continue;  // the base is the measure itself
    const auto t = [&](const CaseTiming& c) { return arm == "base" ? c.base_median_ms : c.candidate_median_ms; };
    const auto [tlo, thi] = std::minmax_element(cases.begin(), cases.end(), [&](const CaseTiming& a, const CaseTiming& b) {
      return t(a) < t(b);
    });
    const double growth = t(*thi) / t(*tlo);
    if (growth < kFlatGrowth) {
      TimingFlag f;
      f.kind = TimingFlagKind::flat_timer;
      f.arm = arm;
      f.reason = fmt::format("the timer does not see the work: from case {} to case {} the {} grow {:.1f}x but the {} arm's "
                             "per-iteration time stays within {:.2f}x ({} to {}), as when only a launch is timed",
                             lo->label, hi->label, measure, work_growth, arm, growth, ms(t(*tlo)), ms(t(*thi)));
      f.figures = {{"work_growth", work_growth}, {"time_growth", growth}, {"measure", measure}};
      flags.push_back(std::move(f));
    }
  }
  return flags;
}

std::vector<TimingFlag> check_ceilings(const CaseTiming& c, const Ceilings& ceilings) {
  std::vector<TimingFlag> flags;
  for (const std::string arm : {"base", "candidate"}) {
    const double t_s = (arm == "base" ? c.base_median_ms : c.candidate_median_ms) / 1e3;
    if (!(t_s > 0)) continue;
    const bool beyond_cache = c.bytes && ceilings.memory_bytes_per_s > 0 && ceilings.cache_bytes > 0 && *c.bytes > ceilings.cache_bytes;
    const double bandwidth = beyond_cache ? ceilings.memory_bytes_per_s : ceilings.bytes_per_s;
    for (const auto& [what, work, ceiling, unit, scale] :
         {std::tuple{"bandwidth", c.bytes, bandwidth, "GB/s", 1e9}, std::tuple{"FLOP rate", c.flops, ceilings.flops_per_s, "GFLOP/s", 1e9}}) {
      if (!work || !(ceiling > 0)) continue;
      const double achieved = *work / t_s;
      if (achieved > ceiling * kCeilingMargin) {
        TimingFlag f;
        f.kind = TimingFlagKind::faster_than_machine;
        f.arm = arm;
        const bool memory = std::string_view(what) == "bandwidth" && beyond_cache;
        f.reason = fmt::format("faster than the machine: the {} arm's {} on case {} is {:.4g} {}, above the machine's measured "
                               "ceiling of {:.4g} {}{} (x{} margin; {})",
                               arm, what, c.label, achieved / scale, unit, ceiling / scale, unit,
                               memory ? fmt::format(" for a working set beyond its {:.3g} MiB last-level cache", ceilings.cache_bytes / 1048576.0) : "",
                               kCeilingMargin, ceilings.source);
        f.figures = {{"what", what}, {"achieved", achieved}, {"ceiling", ceiling}, {"margin", kCeilingMargin}};
        if (memory) f.figures["working_set_beyond_cache_bytes"] = ceilings.cache_bytes;
        flags.push_back(std::move(f));
      }
    }
  }
  return flags;
}

std::optional<TimingFlag> check_clock_agrees(const std::vector<ClockRoundSamples>& rounds, const std::string& arm) {
  double inside_sum = 0, outside_sum = 0, overhead_sum = 0;
  std::size_t n = 0;
  for (std::size_t r = 0; r < rounds.size(); ++r) {
    const auto& round = rounds[r];
    for (std::size_t i = 0; i < round.inside.size() && i < round.outside.size(); ++i) {
      if (round.inside[i] > round.outside[i] + round.overhead_ms + kClockSlackMs) {
        TimingFlag f;
        f.kind = TimingFlagKind::clock_disagrees;
        f.arm = arm;
        f.reason = fmt::format("the {}'s driver recorded {:.6g} ms for timed iteration {} of round {}, longer than the {:.6g} ms "
                               "densefeed's outside clock saw around it (plus its bracket overhead of {:.3g} ms): the driver's "
                               "clock disagrees with densefeed's", arm, round.inside[i], i, r, round.outside[i], round.overhead_ms);
        f.figures = {{"round", r}, {"iteration", i}, {"inside_ms", round.inside[i]}, {"outside_ms", round.outside[i]},
                     {"overhead_ms", round.overhead_ms}};
        return f;
      }
      inside_sum += round.inside[i];
      outside_sum += round.outside[i];
      overhead_sum += round.overhead_ms;
      ++n;
    }
  }
  const double seen = outside_sum - overhead_sum;
  if (n == 0 || seen <= 0 || inside_sum >= (1 - kClockGapFraction) * seen) return std::nullopt;
  TimingFlag f;
  f.kind = TimingFlagKind::clock_disagrees;
  f.arm = arm;
  f.reason = fmt::format("the {}'s driver recorded {:.6g} ms over {} timed iterations where densefeed's outside clock saw {:.6g} ms "
                         "({:.6g} ms after the brackets' overhead): {:.3g} % of it, below the {:.0f} % an honest driver's samples "
                         "keep (the samples were shrunk after they were taken: the driver's clock disagrees with densefeed's)",
                         arm, inside_sum, n, outside_sum, seen, 100 * inside_sum / seen, 100 * (1 - kClockGapFraction));
  f.figures = {{"inside_sum_ms", inside_sum}, {"outside_sum_ms", outside_sum}, {"overhead_sum_ms", overhead_sum},
               {"iterations", n}, {"gap_fraction", kClockGapFraction}};
  return f;
}

}  // namespace densefeed
