// A bench case started, the guards after each of its rounds, and its
// decision (bench_case.h).
#include "bench_case.h"

#include <algorithm>

#include <fmt/format.h>

#include "error.h"
#include "input_sets.h"
#include "outside_clock.h"
#include "statistics.h"

namespace densefeed {
namespace {

double mean_sample(const std::vector<ArmRound>& rounds) {
  double s = 0;
  std::size_t n = 0;
  for (const auto& r : rounds) {
    for (double v : r.samples_ms) s += v, ++n;
  }
  return n ? s / static_cast<double>(n) : 0;
}

std::vector<double> round_medians(const std::vector<ArmRound>& rounds) {
  std::vector<double> m;
  for (const auto& r : rounds) m.push_back(median(r.samples_ms));
  return m;
}

nlohmann::ordered_json fit_json(const WallFit& f) {
  if (!f.fitted) return nullptr;
  return {{"fixed_ms", f.fixed_s * 1e3}, {"per_iteration_ms", f.per_iteration_s * 1e3}, {"per_iteration_se_ms", f.per_iteration_se_s * 1e3}};
}

// The outside clock's cross-check of each arm (check_clock_agrees) and its
// figures; under another executor, why there were none.
void outside_clock_checks(const BenchRun& run, BenchCaseRun& cr) {
  BenchCaseResult& bc = cr.bc;
  if (run.outside) {
    nlohmann::ordered_json overhead = nlohmann::ordered_json::object();
    for (const auto& [arm, name] : {std::pair{0, "base"}, std::pair{1, "candidate"}}) {
      std::vector<double> per_round;
      for (double v : cr.own_overhead_ms[arm]) per_round.push_back(v * 1e3);
      overhead[name] = per_round.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(median(per_round));
      if (auto f = check_clock_agrees(cr.clock_rounds[arm], name)) bc.flags.push_back(std::move(*f));
    }
    bc.checks["outside_clock"] = {{"samples", "the driver's own, bounded by densefeed's outside clock around each (timing_checks.h "
                                              "bound_by_outside_clock): at most the bracket, at least the bracket less its overhead"},
                                  {"bracket_overhead_us", overhead},
                                  {"samples_raised", {{"base", cr.bounded_counts[0][0]}, {"candidate", cr.bounded_counts[1][0]}}},
                                  {"samples_lowered", {{"base", cr.bounded_counts[0][1]}, {"candidate", cr.bounded_counts[1][1]}}},
                                  {"overhead_of", fmt::format("the median over rounds of each round's median of {} empty brackets "
                                                              "(the driver's two writes to the clock socket around its timer, "
                                                              "a device timer's least device call and its sync, with no kernel "
                                                              "call between them); each arm's own, while the bounds use the least "
                                                              "so far of either arm",
                                                              kEmptyBrackets)}};
  } else if (run.driven) {
    bc.checks["outside_clock"] = fmt::format("not available under the {} executor: the driver's in-process samples decide",
                                             run.executor);
  }
}

}  // namespace

BenchCaseRun start_bench_case(const BenchRun& run, std::size_t ci) {
  const GateSpec& gate = run.gate;
  const BenchOptions& options = run.options;
  BenchCaseRun cr;
  cr.index = ci;
  cr.bench_case = &gate.bench.cases[ci];
  const Case& c = *cr.bench_case;
  BenchCaseResult& bc = cr.bc;
  bc.bench_case = c;
  bc.timing = run.driven ? "driver" : "candidate";
  bc.predicted_speedup = options.predicted_speedup;
  if (auto it = options.noise_floor.find(c.label); it != options.noise_floor.end()) {
    bc.calibrated_floor = it->second;
    bc.threshold = std::max(0.01, it->second);
  }
  const auto ref = options.reference_out.find(c.label);
  if (!options.reference_out.empty() && ref == options.reference_out.end()) {
    throw InfraError(fmt::format("bench case {} was not gated in this run: every benchmarked case is gated first", c.label));
  }
  if (ref != options.reference_out.end()) cr.gate_reference = ref->second;
  if (run.driven) {
    cr.pool_seed = run.draw();
    cr.pool = input_set_seeds(cr.pool_seed, input_set_count(gate.bench.iters));
  }
  if (ref != options.reference_out.end()) cr.set_reference[options.seed] = ref->second;
  cr.input.threshold = bc.threshold;
  cr.input.looks = gate.bench.looks;
  cr.input.seed = options.seed;
  cr.budget_s = options.budget_s.value_or(gate.bench.max_seconds_per_case);
  cr.start = std::chrono::steady_clock::now();
  return cr;
}

bool rerun_late_round(BenchCaseRun& cr, int round, bool outside) {
  BenchCaseResult& bc = cr.bc;
  if (static_cast<int>(cr.late_rounds.size()) >= kMaxLateReruns || bc.base_walls.empty() || bc.candidate_walls.empty()) return false;
  for (const auto& [walls, arm] : {std::pair{&bc.base_walls, "base"}, std::pair{&bc.candidate_walls, "candidate"}}) {
    const RoundWall& last = walls->back();
    std::vector<double> earlier;
    for (std::size_t i = 0; i + 1 < walls->size(); ++i) {
      if ((*walls)[i].iterations == last.iterations) earlier.push_back((*walls)[i].wall_s);
    }
    if (earlier.size() < 2) continue;
    const double typical = median(earlier);
    if (!(last.wall_s > kLateRoundFactor * typical)) continue;
    cr.late_rounds.push_back({{"round", round}, {"arm", arm}, {"wall_s", last.wall_s}, {"median_wall_s", typical},
                              {"iterations", last.iterations}});
    // Out of both arms: a round is a pair.
    bc.base.pop_back();
    bc.candidate.pop_back();
    bc.base_walls.pop_back();
    bc.candidate_walls.pop_back();
    if (outside) {
      for (int a = 0; a < 2; ++a) {
        if (!cr.clock_rounds[a].empty()) cr.clock_rounds[a].pop_back();
        if (!cr.own_overhead_ms[a].empty()) cr.own_overhead_ms[a].pop_back();
      }
    }
    return true;
  }
  return false;
}

void report_round(const BenchRun& run, const BenchCaseRun& cr, int round) {
  if (!run.options.progress) return;
  BenchProgress p;
  p.case_label = cr.bench_case->label;
  p.case_index = cr.index;
  p.cases = run.gate.bench.cases.size();
  p.phase = "round";
  p.rounds = round + 1;
  p.decision = decide(cr.input);
  p.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - cr.start).count();
  p.budget_s = cr.budget_s;
  if (p.decision.more_rounds > 0) p.eta_s = p.decision.more_rounds * p.elapsed_s / p.rounds;
  run.options.progress(p);
}

bool round_ends_case(const BenchRun& run, BenchCaseRun& cr, int round) {
  BenchCaseResult& bc = cr.bc;
  cr.input.base = bc.base;
  cr.input.candidate = bc.candidate;
  // A self-timed candidate's faster needs densefeed's own clock to agree
  // (check_wall_confirms): until it does, the runner goes on to its next
  // look, and the cap or the last look ends it inconclusive; not when the
  // wall growth already flags the candidate (more rounds cannot clear it).
  const auto unconfirmed = [&] {
    const double b = mean_sample(bc.base), k = mean_sample(bc.candidate);
    return !run.driven && decide(cr.input).verdict == BenchVerdict::faster &&
           check_wall_growth(bc.base_walls, bc.candidate_walls, b, k, !run.options.agent_base).empty() &&
           check_wall_confirms(bc.base_walls, bc.candidate_walls, b, k).has_value();
  };
  if (!run.options.fixed_rounds && should_stop(cr.input) && !unconfirmed()) return true;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - cr.start).count();
  // An interval needs two rounds: the budget ends a case from its second on.
  if (elapsed > cr.budget_s && round >= 1 && round + 1 < run.max_rounds) {
    bc.capped = true;
    return true;
  }
  return false;
}

void decide_bench_case(const BenchRun& run, BenchCaseRun& cr, const std::optional<std::string>& freeze) {
  const GateSpec& gate = run.gate;
  BenchCaseResult& bc = cr.bc;
  bc.decision = decide(cr.input);
  // What the rounds said before the budget ended them (a self-timed faster
  // still waiting for densefeed's clock to confirm it is named as such).
  const BenchVerdict before_cap = bc.decision.verdict;
  const double timed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - cr.start).count();
  const double per_round_s = bc.base.empty() ? 0 : timed_s / static_cast<double>(bc.base.size());
  if (bc.capped) {
    bc.decision.verdict = BenchVerdict::inconclusive;
    const int more = bc.decision.more_rounds;
    const std::string need =
        more > 0 ? fmt::format("at the noise seen (paired log-ratio sd {:.2g}) a verdict needs about {} more rounds, about {:.0f} s more",
                               bc.decision.log_ratio_sd, more, more * per_round_s)
                 : "at the noise seen no number of rounds the gate allows decides (the speedup sits on the band's edge, or "
                   "a guard holds)";
    // The figures are the last look's (which may be fewer rounds than ran);
    // its own words, not the wait for the next look, which the cap ended.
    const std::string& look = bc.decision.look_reason;
    bc.decision.reason = fmt::format("inconclusive: the case's measurement budget of {:g} s (timed rounds only; warm-up apart) "
                                     "was spent after {} rounds; {}{}",
                                     cr.budget_s, bc.base.size(), need,
                                     look.empty() ? std::string(", before the first look")
                                                  : fmt::format(" (the last look, after {} rounds: {})", bc.decision.rounds_used, look));
  }
  bc.base_warmup_s = cr.warmup_s[0];
  bc.candidate_warmup_s = cr.warmup_s[1];
  bc.budget_s = cr.budget_s;
  bc.more_rounds = bc.decision.more_rounds;
  if (bc.more_rounds > 0) bc.more_seconds = bc.more_rounds * per_round_s;
  bc.checks["warmup"] = {{"base_s", cr.warmup_s[0]},
                         {"candidate_s", cr.warmup_s[1]},
                         {"max_warmup_seconds", gate.bench.max_warmup_seconds},
                         {"what", "each arm's first call in bench mode (compilation, autotuning, caches), before the first timed "
                                  "round and outside the measurement budget; its samples are not kept"}};
  bc.checks["budget"] = {{"budget_s", cr.budget_s},
                         {"timed_s", timed_s},
                         {"rounds", bc.base.size()},
                         {"more_rounds", bc.decision.more_rounds},
                         {"more_seconds", bc.decision.more_rounds > 0 ? nlohmann::ordered_json(bc.decision.more_rounds * per_round_s)
                                                                      : nlohmann::ordered_json(nullptr)},
                         {"late_rounds", cr.late_rounds}};
  // densefeed's own cross-checks of the timings (timing_checks.h).
  for (const auto& [walls, arm] : {std::pair{&bc.base_walls, "base"}, std::pair{&bc.candidate_walls, "candidate"}}) {
    for (auto& f : check_round_sums(*walls, arm)) bc.flags.push_back(std::move(f));
  }
  // The claims the wall checks test are what the driver (or harness)
  // wrote, not densefeed's own clock.
  const auto claimed_mean = [&](int arm, const std::vector<ArmRound>& rounds) {
    if (!run.outside) return mean_sample(rounds);
    double sum = 0;
    std::size_t n = 0;
    for (const auto& r : cr.clock_rounds[arm]) {
      for (double v : r.inside) sum += v, ++n;
    }
    return n ? sum / static_cast<double>(n) : 0.0;
  };
  const double base_claimed = claimed_mean(0, bc.base), candidate_claimed = claimed_mean(1, bc.candidate);
  outside_clock_checks(run, cr);
  // Under a trusted driver the untimed work is the driver's own, the same
  // in both arms; a self-timed base the agent wrote credits nothing.
  const bool credit_base_untimed = run.driven || !run.options.agent_base;
  for (auto& f : check_wall_growth(bc.base_walls, bc.candidate_walls, base_claimed, candidate_claimed, credit_base_untimed)) {
    bc.flags.push_back(std::move(f));
  }
  if (!run.driven && before_cap == BenchVerdict::faster && bc.flags.empty()) {
    if (auto f = check_wall_confirms(bc.base_walls, bc.candidate_walls, base_claimed, candidate_claimed)) bc.flags.push_back(std::move(*f));
  }
  if (freeze) bc.checks["freeze"] = *freeze;  // how the other arm's session was held still
  if (run.driven) {
    bc.checks["inputs"] = {
        {"sets", cr.pool.size()},
        {"pool_seed", cr.pool_seed},
        {"gated", cr.rotated},
        {"reference_runs", cr.reference_runs},
        {"reference_wall_s", cr.reference_wall_s},
        {"what", fmt::format("every timed iteration of a round has an input set of its own, drawn in a random order from {} "
                             "sets of a pool seed no arm was told (input_sets.h); warm-ups get sets outside the pool; each "
                             "timed iteration of the candidate is gated against the reference of its set", cr.pool.size())}};
  }
  bc.checks["wall_fit"] = {{"base", fit_json(fit_wall(bc.base_walls))}, {"candidate", fit_json(fit_wall(bc.candidate_walls))},
                           {"base_claimed_ms", base_claimed}, {"candidate_claimed_ms", candidate_claimed},
                           {"long_round_factor", cr.long_factor}};
  std::vector<double> clocks;
  for (std::size_t r = 0; r < bc.base.size() && r < bc.candidate.size(); ++r) {
    if (bc.base[r].sm_clock_mhz) clocks.push_back(*bc.base[r].sm_clock_mhz);
    if (bc.candidate[r].sm_clock_mhz) clocks.push_back(*bc.candidate[r].sm_clock_mhz);
  }
  if (auto d = check_drift(round_medians(bc.base), round_medians(bc.candidate), bc.threshold, clocks)) bc.flags.push_back(std::move(*d));
  if (bc.predicted_speedup && *bc.predicted_speedup > 0 && bc.decision.speedup > 0) {
    bc.prediction_error = bc.decision.speedup / *bc.predicted_speedup - 1;
  }
}

}  // namespace densefeed
