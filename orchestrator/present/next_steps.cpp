#include "next_steps.h"

#include "arm_replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness_protocol.h"
#include "command_template.h"
#include "experiment_runner.h"
#include "gate_spec.h"
#include "process_runner.h"
#include "trace_report.h"

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

// Where the case's interval lies against the +-threshold band, in words
// (it reached no verdict: it crosses an edge, or no interval was recorded).
std::string interval_text(const BenchFact& b) {
  if (!std::isfinite(b.lo) || !std::isfinite(b.hi)) return "no interval yet (fewer than 2 rounds)";
  const double up = 1 + b.threshold, down = 1 / (1 + b.threshold);
  const auto pct = 100 * b.threshold;
  if (b.lo > up || b.hi < down) return fmt::format("the interval is beyond the +-{:.1f}% band, but a guard or a timing check held the verdict back", pct);
  if (b.lo > down && b.hi < up) return fmt::format("the interval is inside the +-{:.1f}% band", pct);
  const bool crosses_up = b.lo <= up && b.hi >= up, crosses_down = b.lo <= down && b.hi >= down;
  return fmt::format("the interval crosses the band's {} edge{} ({:.3f}{})", crosses_up && crosses_down ? "two" : crosses_up ? "upper" : "lower",
                     crosses_up && crosses_down ? "s" : "", crosses_up && !crosses_down ? up : down,
                     crosses_up && crosses_down ? fmt::format(" and {:.3f}", up) : "");
}

// "relative spread base 21.2%, candidate 14.0% (limit < 10%)": the spread
// guard's figures (bench_statistics.cpp says the same in its reason).
std::string spread_text(const BenchFact& b) {
  return fmt::format("relative spread base {:.1f}%, candidate {:.1f}% (limit < 10%)", 100 * b.base_spread, 100 * b.candidate_spread);
}

// How a red case failed, from its typed failure (failure.h), never from its
// reason text.
enum class FailureClass { none, timeout, crash, exit_code, no_start, missing, dtype, shape, malformed, nonfinite, tolerance };

FailureClass classify(const CaseFact& c) {
  const densefeed::Failure& f = c.failure;
  if (f.who == FailureWho::reference) return FailureClass::none;  // the reference's failure is an error, not the candidate's step
  switch (f.kind) {
    case FailureKind::timeout: return FailureClass::timeout;
    case FailureKind::crash: return FailureClass::crash;
    case FailureKind::exit_code: return FailureClass::exit_code;
    case FailureKind::no_start:
    case FailureKind::sandbox:
    case FailureKind::limit: return FailureClass::no_start;
    case FailureKind::missing_output: return FailureClass::missing;
    case FailureKind::malformed_output:
      return f.metric == "nonfinite" ? FailureClass::nonfinite : f.metric == "dtype" ? FailureClass::dtype : f.metric == "shape" ? FailureClass::shape
                                                                                                        : FailureClass::malformed;
    case FailureKind::tolerance:
    case FailureKind::trend: return FailureClass::tolerance;
    case FailureKind::none:
    case FailureKind::implausible_timing:  // a bench stage's, not a case's
    case FailureKind::lock:
    case FailureKind::infrastructure:
    case FailureKind::unknown: break;
  }
  // Recorded before failures were values: a failed metric is still a value.
  for (const auto& m : c.metrics) {
    if (!m.passed) return FailureClass::tolerance;
  }
  return FailureClass::none;
}

// How far over its bound the case's worst metric is (value / bound; +inf for NaN).
double overshoot(const CaseFact& c) {
  double worst = 0;
  for (const auto& m : c.metrics) {
    if (m.passed) continue;
    const double r = std::isfinite(m.value) && m.bound > 0 ? m.value / m.bound : std::numeric_limits<double>::infinity();
    worst = std::max(worst, r);
  }
  return worst;
}

const MetricFact* worst_metric(const CaseFact& c) {
  const MetricFact* worst = nullptr;
  double ratio = -1;
  for (const auto& m : c.metrics) {
    if (m.passed) continue;
    const double r = std::isfinite(m.value) && m.bound > 0 ? m.value / m.bound : std::numeric_limits<double>::infinity();
    if (r > ratio) ratio = r, worst = &m;
  }
  return worst;
}

std::string value_text(const J& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());  // 1, not 1.0
  return v.dump();
}

std::string metric_text(const MetricFact& m) {
  return fmt::format("{}.{} {} vs bound {:.1e}", m.output, m.metric, std::isfinite(m.value) ? fmt::format("{:.3e}", m.value) : "NaN",
                     m.bound);
}

bool power_of_two(double v) {
  if (!(v >= 1) || v != std::floor(v) || v > 9.0e15) return false;
  const auto n = static_cast<std::uint64_t>(v);
  return (n & (n - 1)) == 0;
}

// The command that reruns case `c` alone, as the gate ran it (harness
// protocol: the same argv, seed and environment, its own output folder),
// with the params the step suggests (set_params).
// The step's command: densefeed itself replaying case `c` of this
// experiment (run --failing-of ID --case LABEL, issue 30) with the step's
// set_params as --candidate-param, so the replay is gated, recorded and
// linked to this experiment like any run; the same argv whoever prints it
// (run, status, ledger show, the HTML report, MCP). `densefeed repro ID CASE`
// prints the harness commands themselves for a person to run by hand.
void add_rerun(NextStep& step, const ResultFacts& f, const CaseFact& c) {
  if (f.experiment_id <= 0) return;
  step.command = {"densefeed", "run"};
  if (!f.manifest_path.empty()) step.command.push_back(f.manifest_path);
  step.command.insert(step.command.end(), {"--failing-of", std::to_string(f.experiment_id), "--case", c.label});
  for (const auto& [k, v] : step.set_params.items()) {
    step.command.insert(step.command.end(), {"--candidate-param", k + "=" + (v.is_string() ? v.get<std::string>() : v.dump())});
  }
}

// The step's command for what only a person's own run shows (a debugger,
// no time limit): densefeed repro ID CASE, which prints the harness
// commands of both sides, sandbox off.
void add_repro(NextStep& step, const ResultFacts& f, const CaseFact& c) {
  if (f.experiment_id > 0) step.command = {"densefeed", "repro", std::to_string(f.experiment_id), c.label};
}

// The precision swap that separates a precision defect from an algorithmic
// one (gate_structure.h exact_precision_swap).
std::optional<std::pair<std::string, J>> exact_precision(const ResultFacts& f) {
  if (auto swap = exact_precision_swap(f.structure, f.params, f.candidate_params)) return std::pair{swap->param, swap->value};
  return std::nullopt;
}

// A case key that counts parts of a split computation (shards, ranks, tiles, ...).
bool partition_like(const std::string& key) {
  for (const char* word : {"shard", "part", "split", "rank", "tile", "chunk", "world", "cp", "tp"}) {
    if (key.find(word) != std::string::npos) return true;
  }
  return false;
}

// Numeric case keys that vary across the cases, in first-seen order.
std::vector<std::string> numeric_varying_keys(const std::vector<CaseFact>& cases) {
  std::vector<std::string> keys;
  std::map<std::string, std::set<double>> seen;
  std::set<std::string> non_numeric;
  for (const auto& c : cases) {
    if (!c.values.is_object()) continue;
    for (const auto& [k, v] : c.values.items()) {
      if (!seen.count(k) && !non_numeric.count(k)) keys.push_back(k);
      if (v.is_number()) seen[k].insert(v.get<double>());
      else non_numeric.insert(k);
    }
  }
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (!non_numeric.count(k) && seen[k].size() > 1) out.push_back(k);
  }
  return out;
}

std::vector<std::string> varying_keys(const std::vector<CaseFact>& cases) {
  std::vector<std::string> keys;
  std::map<std::string, std::set<std::string>> seen;
  for (const auto& c : cases) {
    if (!c.values.is_object()) continue;
    for (const auto& [k, v] : c.values.items()) {
      if (!seen.count(k)) keys.push_back(k);
      seen[k].insert(v.dump());
    }
  }
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (seen[k].size() > 1) out.push_back(k);
  }
  return out;
}

// Red only where numeric key `k` is above its smallest value, every case at
// the smallest value green: the partitioning key (shards = 1 is the
// unpartitioned computation itself).
bool red_only_above_minimum(const std::vector<CaseFact>& cases, const std::vector<const CaseFact*>& red, const std::string& k,
                            double& minimum) {
  minimum = std::numeric_limits<double>::infinity();
  for (const auto& c : cases) {
    if (c.values.contains(k) && c.values[k].is_number()) minimum = std::min(minimum, c.values[k].get<double>());
  }
  bool any_at_minimum = false;
  for (const auto& c : cases) {
    if (!c.values.contains(k) || c.values[k].get<double>() != minimum) continue;
    any_at_minimum = true;
    if (c.verdict != "green") return false;
  }
  if (!any_at_minimum) return false;
  for (const auto* c : red) {
    if (!c->values.contains(k) || c->values[k].get<double>() <= minimum) return false;
  }
  return true;
}

// 0. The gate's structure first (gate_structure.h, issue 30): partitioned
// (parts > 1) against unpartitioned cases. Red only where the work is
// partitioned, with every unpartitioned case green: the defect is in what
// partitioning adds (the chain and merge of the parts, the states handed
// between them), and a precision swap tells precision from algorithm. Red
// partitioned or not: the algorithm or the inputs, not the partitioning.
// Returns whether the structure separated green from red (then numeric
// patterns, 1. and 2. below, are not looked at).
bool add_structure_step(std::vector<NextStep>& steps, const ResultFacts& f, const std::vector<const CaseFact*>& red,
                        const CaseFact& worst) {
  if (!f.structure.partition) return false;
  std::size_t partitioned = 0, unpartitioned_green = 0, red_partitioned = 0, red_unpartitioned = 0;
  const CaseFact* smallest = nullptr;  // the red case with the fewest parts (ties: furthest over)
  for (const auto& c : f.cases) {
    if (!c.parts) continue;
    if (*c.parts > 1) ++partitioned;
    else if (c.verdict == "green") ++unpartitioned_green;
  }
  // The fewest parts over a bound of their own first: a case red only by a
  // trend its row failed is no onset.
  const auto earlier = [](const CaseFact* a, const CaseFact* b) {
    const bool a_trend = a->failure.kind == FailureKind::trend, b_trend = b->failure.kind == FailureKind::trend;
    if (a_trend != b_trend) return b_trend;
    return *a->parts < *b->parts || (*a->parts == *b->parts && overshoot(*a) > overshoot(*b));
  };
  const CaseFact* red_single = nullptr;  // a red unpartitioned case (furthest over)
  for (const auto* c : red) {
    if (!c->parts) continue;
    if (*c->parts > 1) {
      ++red_partitioned;
      if (!smallest || earlier(c, smallest)) smallest = c;
    } else {
      ++red_unpartitioned;
      if (!red_single || overshoot(*c) > overshoot(*red_single)) red_single = c;
    }
  }
  const std::string by = f.structure.partition->reported ? "as the candidate reported its parts"
                                                         : fmt::format("parts counted by case key {}", f.structure.partition->key);
  const std::string states = f.structure.states.empty() ? "" : fmt::format(", the state{} {} handed between them", f.structure.states.size() > 1 ? "s" : "",
                                                                          fmt::join(f.structure.states, ", "));
  const auto exact = exact_precision(f);
  NextStep s;
  if (red_partitioned > 0 && red_unpartitioned == 0 && red_partitioned == red.size() && unpartitioned_green > 0) {
    s.case_label = smallest->label;
    const std::string where = fmt::format("red only where the work is partitioned ({} of {} partitioned cases red, {}; the fewest "
                                          "parts red: {}), every unpartitioned case green ({})",
                                          red_partitioned, partitioned, by, *smallest->parts, unpartitioned_green);
    if (exact) {
      s.kind = "isolate-precision";
      s.set_params = {{exact->first, exact->second}};
      s.suggestion = fmt::format("rerun case {} with {}={} to separate the precision of what partitioning adds from the "
                                 "partitioned algorithm",
                                 smallest->label, exact->first, value_text(exact->second));
      s.why = fmt::format("{}: green with {}={} puts the error on the precision of the products partitioning adds (the chain and "
                          "merge of the parts{}); still red puts it on the partitioned algorithm itself",
                          where, exact->first, value_text(exact->second), states);
    } else {
      s.kind = "isolate-value";
      s.suggestion = fmt::format("compare case {} part by part: find the first part boundary where the partitioned result leaves "
                                 "the unpartitioned one{}",
                                 smallest->label, states.empty() ? std::string() : fmt::format(" ({})", fmt::join(f.structure.states, ", ")));
      s.why = fmt::format("{}: the defect is in what partitioning adds (splitting the work, merging the parts{}), not in what "
                          "every case computes",
                          where, states);
    }
    if (const auto* m = worst_metric(*smallest); m && m->first_failing_slice) {
      s.why += fmt::format("; {} first fails at slice {}", m->output, *m->first_failing_slice);
    }
    add_rerun(s, f, *smallest);
    steps.push_back(s);
    return true;
  }
  if (red_partitioned > 0 && red_unpartitioned > 0) {
    const CaseFact& single = red_single ? *red_single : worst;
    s.case_label = single.label;
    s.kind = exact ? "isolate-precision" : "inspect-case";
    s.suggestion = fmt::format("look at case {}, red unpartitioned, first: the defect is in the algorithm or the inputs, not "
                               "the partitioning",
                               single.label);
    s.why = fmt::format("red partitioned or not ({} partitioned, {} unpartitioned case(s) red, {})", red_partitioned,
                        red_unpartitioned, by);
    if (exact) {
      s.set_params = {{exact->first, exact->second}};
      s.why += fmt::format("; rerunning with {}={} separates precision from algorithm", exact->first, value_text(exact->second));
    }
    add_rerun(s, f, single);
    steps.push_back(s);
  }
  return false;
}

// 1. Red only above the smallest value of a key with three or more values
// (e.g. shards > 1); with two values it is "red at one value" (2. below).
// Returns the key it found ('' for none).
std::string add_partition_step(std::vector<NextStep>& steps, const ResultFacts& f, const std::vector<const CaseFact*>& red) {
  for (const auto& k : numeric_varying_keys(f.cases)) {
    double minimum = 0;
    std::set<double> values;
    for (const auto& c : f.cases) {
      if (c.values.contains(k)) values.insert(c.values[k].get<double>());
    }
    if (values.size() < 3 || !red_only_above_minimum(f.cases, red, k, minimum)) continue;
    // The red case at the largest value of k (ties: the furthest over).
    const CaseFact* at_max = red.front();
    for (const auto* c : red) {
      const double v = c->values[k].get<double>(), best = at_max->values[k].get<double>();
      if (v > best || (v == best && overshoot(*c) > overshoot(*at_max))) at_max = c;
    }
    std::size_t above = 0;
    for (const auto& c : f.cases) above += c.values.contains(k) && c.values[k].get<double>() > minimum;
    const std::string where = fmt::format("red only at {} > {} ({} of {} such cases); every {}={} case is green", k,
                                          value_text(J(minimum)), red.size(), above, k, value_text(J(minimum)));
    NextStep s;
    s.case_label = at_max->label;
    if (const auto exact = exact_precision(f)) {
      s.kind = "isolate-precision";
      s.set_params = {{exact->first, exact->second}};
      s.suggestion = fmt::format("rerun case {} with {}={} (a new manifest: the same revision, candidate params {{{}: {}}}) "
                                 "to separate precision from algorithm",
                                 at_max->label, exact->first, value_text(exact->second), exact->first, value_text(exact->second));
      s.why = fmt::format("{}: green with {}={} puts the error on the precision of the products that {} > {} adds; "
                          "still red puts it on the partitioned algorithm itself",
                          where, exact->first, value_text(exact->second), k, value_text(J(minimum)));
      add_rerun(s, f, *at_max);
    } else {
      s.kind = "isolate-value";
      s.suggestion = fmt::format("compare case {} slice by slice along the output's partition axis (first_failing_slice) "
                                 "to find the first part that goes wrong",
                                 at_max->label);
      s.why = fmt::format("{}: the defect is in what {} > {} adds{}, not in what every case computes", where, k,
                          value_text(J(minimum)), partition_like(k) ? " (splitting the work and merging the parts)" : "");
    }
    if (const auto* m = worst_metric(*at_max); m && m->first_failing_slice) {
      s.why += fmt::format("; {} first fails at slice {}", m->output, *m->first_failing_slice);
    }
    steps.push_back(s);
    return k;
  }
  return "";
}

// 2. Red at one value of a key only (e.g. T = 8000 only); `partition_key`
// (1. above) is not looked at again.
void add_one_value_step(std::vector<NextStep>& steps, const ResultFacts& f, const std::vector<const CaseFact*>& red,
                        const CaseFact& worst, const std::string& partition_key) {
  for (const auto& k : varying_keys(f.cases)) {
    if (k == partition_key) continue;
    const J& v = red.front()->values.contains(k) ? red.front()->values[k] : J();
    if (v.is_null()) continue;
    bool same = true;
    for (const auto* c : red) same = same && c->values.contains(k) && c->values[k] == v;
    if (!same) continue;
    bool other_values_green = false, other_values_red = false;
    std::set<std::string> others;
    for (const auto& c : f.cases) {
      if (!c.values.contains(k) || c.values[k] == v) continue;
      others.insert(value_text(c.values[k]));
      if (c.verdict == "green") other_values_green = true;
      else other_values_red = true;
    }
    if (!other_values_green || other_values_red) continue;
    NextStep s;
    s.kind = "isolate-value";
    s.case_label = worst.label;
    s.suggestion = fmt::format("rerun case {} alone and look at what is special about {}={}", worst.label, k, value_text(v));
    s.why = fmt::format("red only at {}={} ({} case(s)); every case at {}={} is green", k, value_text(v), red.size(), k,
                        fmt::join(others, ","));
    bool others_pow2 = true;
    for (const auto& c : f.cases) {
      if (c.values.contains(k) && c.values[k] != v) others_pow2 = others_pow2 && c.values[k].is_number() && power_of_two(c.values[k].get<double>());
    }
    if (v.is_number() && !power_of_two(v.get<double>()) && others_pow2) {
      s.why += fmt::format(": {} is the only value that is not a power of two, so look at tail and remainder handling "
                           "(a partial last chunk or block, a mask, a loop bound)",
                           value_text(v));
    }
    add_rerun(s, f, worst);
    steps.push_back(s);
    return;
  }
}

// 3. A few elements over the bound: indexing, not rounding.
// `tolerance_by_overshoot`: the tolerance cases, furthest over first.
void add_few_elements_step(std::vector<NextStep>& steps, const ResultFacts& f, const std::vector<const CaseFact*>& tolerance_by_overshoot) {
  for (const auto* c : tolerance_by_overshoot) {
    for (const auto& m : c->metrics) {
      if (m.passed || m.metric != "elementwise" || m.violations == 0 || m.violations > 16) continue;
      NextStep s;
      s.kind = "inspect-elements";
      s.case_label = c->label;
      s.suggestion = fmt::format("look at the {} element(s) of {} over the bound in case {}, the worst at [{}]", m.violations,
                                 m.output, c->label, fmt::join(m.worst_index, ","));
      s.why = "so few elements point to an indexing or boundary defect at those positions (rounding error spreads over "
              "every element)";
      add_rerun(s, f, *c);
      steps.push_back(s);
      return;
    }
  }
}

// 4. An output unrelated to the reference.
void add_unrelated_output_step(std::vector<NextStep>& steps, const ResultFacts& f, const std::vector<const CaseFact*>& tolerance_by_overshoot) {
  if (const auto* m = tolerance_by_overshoot.empty() ? nullptr : worst_metric(*tolerance_by_overshoot.front());
      m && m->metric == "rel_l2" && std::isfinite(m->value) && m->value >= 0.5) {
    const CaseFact& worst_finite = *tolerance_by_overshoot.front();
    NextStep s;
    s.kind = "inspect-case";
    s.case_label = worst_finite.label;
    s.suggestion = fmt::format("check that case {} computes on the gate's inputs: the harness must take its inputs from "
                               "DENSEFEED_SEED (or the {{seed}} argument) and write every element",
                               worst_finite.label);
    s.why = fmt::format("{}: an error of that size is not rounding; the output is unrelated to the reference (all zeros, "
                        "another seed's inputs, or a different quantity)",
                        metric_text(*m));
    add_rerun(s, f, worst_finite);
    steps.push_back(s);
  }
}

// None of 1.-4. applied: the case furthest over its bound, alone.
void add_worst_case_step(std::vector<NextStep>& steps, const ResultFacts& f, const std::vector<const CaseFact*>& red,
                         const CaseFact& worst) {
  NextStep s;
  s.kind = "inspect-case";
  s.case_label = worst.label;
  const auto* m = worst_metric(worst);
  s.suggestion = fmt::format("rerun case {} alone (the furthest over its bound{}) and compare its output with the reference",
                             worst.label, m ? ": " + metric_text(*m) : "");
  s.why = fmt::format("{} of {} case(s) are red with no single case key separating them from the green ones", red.size(),
                      f.cases.size());
  if (const auto exact = exact_precision(f)) {
    s.set_params = {{exact->first, exact->second}};
    s.why += fmt::format("; rerunning with {}={} separates precision from algorithm", exact->first, value_text(exact->second));
  }
  add_rerun(s, f, worst);
  steps.push_back(s);
}

// `red`: the red cases whose outputs were compared (over a bound, or NaN/Inf);
// `tolerance`: those of them over a bound with finite values.
void add_comparison_steps(std::vector<NextStep>& steps, const ResultFacts& f, const std::vector<const CaseFact*>& red,
                          const std::vector<const CaseFact*>& tolerance) {
  const std::size_t before = steps.size();
  const auto furthest_first = [](std::vector<const CaseFact*> cases) {
    std::stable_sort(cases.begin(), cases.end(), [](const CaseFact* a, const CaseFact* b) { return overshoot(*a) > overshoot(*b); });
    return cases;
  };
  // Worst first: the case furthest over its bound.
  const CaseFact& worst = *furthest_first(red).front();
  if (!add_structure_step(steps, f, red, worst)) {
    const std::string partition_key = add_partition_step(steps, f, red);
    add_one_value_step(steps, f, red, worst, partition_key);
  }
  const std::vector<const CaseFact*> tolerance_by_overshoot = furthest_first(tolerance);
  add_few_elements_step(steps, f, tolerance_by_overshoot);
  add_unrelated_output_step(steps, f, tolerance_by_overshoot);
  if (steps.size() == before && !tolerance.empty()) add_worst_case_step(steps, f, red, worst);
}

void add_process_steps(std::vector<NextStep>& steps, const ResultFacts& f, const std::vector<const CaseFact*>& red) {
  std::set<FailureClass> done;
  for (const auto* c : red) {
    const FailureClass kind = classify(*c);
    if (done.count(kind)) continue;
    std::size_t count = 0;
    for (const auto* o : red) count += classify(*o) == kind;
    const std::string many = count > 1 ? fmt::format(" (and {} more case(s) the same way)", count - 1) : "";
    NextStep s;
    s.case_label = c->label;
    switch (kind) {
      case FailureClass::timeout:
        s.kind = "rerun-case";
        s.suggestion = fmt::format("rerun case {} alone, without the gate's {:g} s limit, and time it (densefeed repro prints its "
                                   "commands){}", c->label, f.timeout_s, many);
        s.why = "it tells a hang (never finishes: a deadlock or an unbounded loop) from a candidate that is only too slow for "
                "this shape (finishes late); the gate's timeout is frozen, so a slow one must get faster";
        break;
      case FailureClass::crash:
        s.kind = "rerun-case";
        s.suggestion = fmt::format("rerun case {} alone under a debugger or with sanitizers ({}){}", c->label,
                                   describe(densefeed::Failure{c->failure.kind, c->failure.who, c->failure.signal, {}, "", "", ""}), many);
        s.why = "the crash site says whether an index or a buffer size overflows at this shape; if only the largest cases "
                "crash, suspect 32-bit index arithmetic";
        break;
      case FailureClass::exit_code:
      case FailureClass::no_start:
        s.kind = "rerun-case";
        s.suggestion = f.sessions
                           ? fmt::format("read the stderr of the candidate's session that served case {} "
                                         "({}/session-candidate-S-K/stderr.log: S is the report's candidate_session.slot, K its "
                                         "session - 1; and the report's stderr_tail) and rerun it alone{}",
                                         c->label, f.work_dir.string(), many)
                           : fmt::format("read the candidate's stderr for case {} ({}/candidate-{:03}/stderr.log; the "
                                         "report's stderr_tail) and rerun it alone{}",
                                         c->label, f.work_dir.string(), c->index, many);
        s.why = "the harness itself refused or failed before writing outputs: an argument, a missing file or an error it "
                "printed";
        break;
      case FailureClass::missing:
      case FailureClass::dtype:
      case FailureClass::shape:
      case FailureClass::malformed:
        s.kind = "fix-output";
        s.suggestion = fmt::format("write every declared output as the gate declares it (densefeed gate show {} --json: "
                                   "outputs' dtype and shape) into DENSEFEED_OUT; case {}: {}{}",
                                   f.gate, c->label, c->reason, many);
        s.why = "nothing about correctness can be judged until the output file is what the gate declares";
        break;
      case FailureClass::nonfinite:
        s.kind = "fix-output";
        s.suggestion = fmt::format("find where case {} writes NaN/Inf or leaves elements unwritten (a harness "
                                   "fills its buffers with NaN first, so an element it never writes stays NaN){}",
                                   c->label, many);
        s.why = c->reason;
        break;
      case FailureClass::none:
      case FailureClass::tolerance:
        continue;
    }
    done.insert(kind);
    if (kind == FailureClass::timeout || kind == FailureClass::crash) add_repro(s, f, *c);
    else if (s.kind == "rerun-case" || kind == FailureClass::nonfinite) add_rerun(s, f, *c);
    steps.push_back(s);
  }
}

void add_bench_steps(std::vector<NextStep>& steps, const ResultFacts& f) {
  // An arm's warm-up call (bench_round.cpp) ran past the gate's
  // bench.max_warmup_seconds: nothing was timed, and neither "fix bench
  // mode" nor "check the base builds" is what helps.
  if ((f.bench_status == "red" || f.bench_status == "error") && f.bench_failure.kind == FailureKind::timeout &&
      f.bench_failure.metric == "warmup") {
    NextStep s;
    const bool candidate = f.bench_status == "red";
    s.kind = candidate ? "fix-bench-mode" : "rerun-bench";
    s.suggestion = candidate ? "make the candidate's first call in bench mode cheaper (fewer kernel variants to compile or "
                               "autotune), or ask a person to raise the gate's bench.max_warmup_seconds (a gate change)"
                             : "rerun once the base's compile caches are warm (its warm-up call compiles and autotunes), or ask a "
                               "person to raise the gate's bench.max_warmup_seconds (a gate change)";
    s.why = f.bench_reason;
    steps.push_back(s);
    return;
  }
  if (f.bench_status == "red") {
    NextStep s;
    s.kind = "fix-bench-mode";
    s.suggestion = "make the harness compute in bench mode (DENSEFEED_MODE=bench) exactly what it computes in gate mode, "
                   "and write the last timed iteration's outputs";
    s.why = f.bench_reason;
    steps.push_back(s);
    return;
  }
  if (f.bench_status == "error") {
    NextStep s;
    s.kind = "report-reference";
    s.suggestion = "check the base: its revision must build and run (the base, not the candidate, failed)";
    s.why = f.bench_reason;
    steps.push_back(s);
    return;
  }
  bool calibrate_suggested = false;
  for (const auto& b : f.bench) {
    NextStep s;
    s.case_label = b.label;
    const std::string figures = fmt::format("speedup {:.3f}x [{:.3f}, {:.3f}] over {} rounds, noise threshold {:.1f}%", b.speedup,
                                            b.lo, b.hi, b.rounds, 100 * b.threshold);
    if (b.verdict == "inconclusive") {
      // Which guard held the decision back decides what helps (bench_statistics.h BenchGuard).
      const auto held = [&](BenchGuard g) { return b.guards && std::find(b.guards->begin(), b.guards->end(), g) != b.guards->end(); };
      const std::string where = interval_text(b);
      if (held(BenchGuard::stall)) {
        s.kind = "profile";
        s.suggestion = "find the iterations that stall (the candidate's samples per round in rounds_json: a few far above the "
                       "rest) and the work they do that the others defer; the arms' total time is what counts";
        s.why = fmt::format("{}; its typical iteration is faster but its total time is not: the medians hide a few long "
                            "iterations, and more rounds do not change that", figures);
      } else if (held(BenchGuard::clock) || held(BenchGuard::throttle)) {
        s.kind = "rerun-bench";
        s.suggestion = "resubmit with the GPU's clocks steady (locked application clocks, a cool idle GPU)";
        s.why = fmt::format("{}; the arms did not run at the same clock, so their times are not comparable", figures);
      } else if (b.more_rounds && *b.more_rounds > 0 && b.more_seconds && b.budget_s) {
        // The budget ran out before the noise allowed a verdict: the run that would reach one.
        const double budget = std::ceil((*b.budget_s + *b.more_seconds) * 1.25);
        s.kind = "rerun-bench";
        if (!f.manifest_path.empty()) {
          s.command = {"densefeed", "run", f.manifest_path, "--bench-seconds", fmt::format("{:.0f}", budget)};
        }
        s.suggestion = fmt::format("rerun with a measurement budget of {:.0f} s per case (densefeed run MANIFEST --bench-seconds "
                                   "{:.0f}): at the noise seen a verdict needs about {} more rounds",
                                   budget, budget, *b.more_rounds);
        s.why = fmt::format("{}{}; {}; about {:.0f} s more of timed rounds would narrow it to a verdict", figures,
                            b.capped ? fmt::format(", ended by the measurement budget of {:g} s", *b.budget_s) : "", where,
                            *b.more_seconds);
      } else if (held(BenchGuard::spread)) {
        s.kind = "rerun-bench";
        s.suggestion = "resubmit when the machine is idle (nothing else on its CPUs or GPU): the paired rounds are too noisy to decide";
        s.why = fmt::format("{}; {}; {}: no number of rounds the gate allows narrows the interval enough at this noise", figures,
                            where, spread_text(b));
      } else if (b.threshold <= 0.01 && !calibrate_suggested) {
        s.kind = "calibrate";
        s.command = {"densefeed", "bench", "calibrate", f.gate, "--comparisons", "20"};
        s.suggestion = fmt::format("measure this host's noise floor (densefeed bench calibrate {} --comparisons 20), then resubmit",
                                   f.gate);
        s.why = fmt::format("{}{}; {}: a calibrated floor says whether a difference of this size is measurable here at all",
                            figures, b.capped ? ", ended by the measurement budget" : "", where);
        calibrate_suggested = true;
      } else {
        s.kind = "rerun-bench";
        s.suggestion = "resubmit on an idle machine, or accept that the effect is below what this host can resolve";
        s.why = fmt::format("{}{}; {}", figures, b.capped ? ", ended by the measurement budget before a decision" : "", where);
      }
    } else if (b.verdict == "slower") {
      s.kind = "profile";
      if (b.predicted_speedup && *b.predicted_speedup < 1) {
        s.suggestion = "find where the extra time goes (a trace section in the manifest, or a profile of both arms) and try "
                       "a cheaper way to the same result";
        s.why = fmt::format("{}; slower as predicted ({:.3f}x): what the candidate buys costs time, and a slower case blocks "
                            "promotion",
                            figures, *b.predicted_speedup);
      } else {
        s.suggestion = "find where the time goes before changing more: add a trace section to the manifest (see the "
                       "kv-transfer example) or profile the candidate against the base";
        s.why = fmt::format("{}: a slower case blocks promotion", figures);
      }
    } else if (b.verdict == "same") {
      s.kind = "profile";
      s.suggestion = "the change does not move the time of this case: check that the changed code is on its hot path "
                     "(a trace or a profile) before the next change";
      s.why = fmt::format("{}{}", figures,
                          b.predicted_speedup ? fmt::format("; predicted {:.3f}x", *b.predicted_speedup) : std::string());
    } else if (b.prediction_error && std::abs(*b.prediction_error) > 0.25) {
      s.kind = "revise-prediction";
      s.suggestion = fmt::format("revise the model behind predicted_speedup {:.3f}x: measured {:.3f}x", *b.predicted_speedup,
                                 b.speedup);
      s.why = fmt::format("the prediction is off by {:+.0f}%: the cost model behind the hypothesis misses something, and the "
                          "next prediction will too",
                          100 * *b.prediction_error);
    } else {
      continue;
    }
    steps.push_back(s);
  }
}

void add_trace_steps(std::vector<NextStep>& steps, const ResultFacts& f) {
  for (const auto& t : f.trace) {
    // Only the candidate's checks decide the stage; the base's are recorded for comparison
    // (in the KV example the base is the one expected to fail).
    if (t.passed || t.arm != "candidate") continue;
    NextStep s;
    s.kind = "trace-intervals";
    std::string involved = t.details.is_null() ? "" : t.details.dump();
    if (involved.size() > 400) involved = involved.substr(0, 400) + "...";
    s.suggestion = fmt::format("look at the intervals of trace check {} ({}, {} arm) that should overlap: {}", t.index, t.kind,
                               t.arm, involved.empty() ? "see ledger show --json, trace_findings[].details" : involved);
    s.why = fmt::format("value {} vs bound {}: which interval waits on which names the lock, stream or copy that serialises them",
                        t.value ? fmt::format("{:.4g}", *t.value) : "?", t.bound ? fmt::format("{:.4g}", *t.bound) : "?");
    steps.push_back(s);
  }
}

// A benchmark against a base the agent wrote: whatever else it says, its
// speedup counts only once measured against a base the agent did not write.
void add_base_steps(std::vector<NextStep>& steps, const ResultFacts& f) {
  if (f.promoted || !is_agent_base(f.base_origin.kind) || f.bench.empty()) return;
  NextStep s;
  s.kind = "trusted-base";
  s.suggestion = "rerun it against a base the agent did not write: the manifest's base.revision as the trusted ref "
                 "(densefeed.yaml trusted_ref), or the candidate of an experiment promoted before";
  s.why = fmt::format("its base is {} ({}): a speedup over a base the agent wrote may be a slowed base, so promote refuses it "
                      "unless a person accepts it (densefeed promote {} --accept-agent-base)",
                      to_string(f.base_origin.kind), f.base_origin.reason, f.experiment_id);
  steps.push_back(s);
}

void add_review_steps(std::vector<NextStep>& steps, const ResultFacts& f) {
  if (f.promoted) return;
  for (const auto& b : f.bench) {
    if (b.verdict == "slower") return;  // promotion is refused anyway; the bench step says why
  }
  std::vector<std::string> pending;
  if (f.categories.is_object()) {
    for (const auto& [category, decision] : f.categories.items()) {
      if (decision != "approve") pending.push_back(category);
    }
  } else {
    pending = f.risk;
  }
  if (!pending.empty()) {
    NextStep s;
    s.kind = "ask-review";
    s.suggestion = fmt::format("ask a person to review risk categor{} {} (they run: densefeed review approve {} --by NAME); "
                               "an agent never approves its own experiment",
                               pending.size() > 1 ? "ies" : "y", fmt::join(pending, ", "), f.experiment_id);
    s.why = "promotion needs every declared risk category approved by a person";
    steps.push_back(s);
    return;
  }
  if (!f.has_acceptance) {
    NextStep s;
    s.kind = "add-acceptance";
    s.suggestion = "to promote, submit a new manifest that pre-registers acceptance criteria (acceptance.command, "
                   "acceptance.criteria) before any result";
    s.why = "promotion runs the pre-registered end-to-end criteria; this manifest has none";
    steps.push_back(s);
    return;
  }
  if (is_agent_base(f.base_origin.kind) && !f.bench.empty()) return;  // add_base_steps said what to do first

  NextStep s;
  s.kind = "promote";
  s.command = {"densefeed", "promote", std::to_string(f.experiment_id), "--json"};
  s.suggestion = fmt::format("promote it (densefeed promote {}), which runs the pre-registered acceptance criteria", f.experiment_id);
  s.why = "the gate is green, no bench case is slower and every declared category is approved";
  steps.push_back(s);
}

// densefeed narrow ID: the steps above, run by densefeed itself within a
// budget, ending with the layer at fault (narrow.h). Second, so that an
// agent that reads only the first two sees both the cheapest own step and
// the one that does the rest.
void add_narrow_step(std::vector<NextStep>& steps, const ResultFacts& f, std::size_t red) {
  if (f.experiment_id <= 0) return;
  if (!f.narrowed_layer.empty() && f.narrowed_layer != "undetermined") {
    NextStep s;
    s.kind = "narrow";
    s.command = {"densefeed", "ledger", "show", std::to_string(f.experiment_id)};
    s.suggestion = fmt::format("fix what densefeed narrow named ({}), then submit again", f.narrowed_layer);
    s.why = f.narrowed_conclusion;
    steps.insert(steps.begin(), s);
    return;
  }
  NextStep s;
  s.kind = "narrow";
  s.command = {"densefeed", "narrow", std::to_string(f.experiment_id), "--budget", "10m"};
  s.suggestion = fmt::format("let densefeed narrow it (densefeed narrow {} --budget 10m): it reruns the {} red case(s), swaps "
                             "precision, bisects the partition and the commits, each a recorded experiment",
                             f.experiment_id, red);
  s.why = "it ends by naming the layer at fault (precision of what partitioning adds, the partitioned algorithm, a commit, an "
          "input regime, nondeterminism) with the experiments that show it";
  steps.insert(steps.begin() + std::min<std::size_t>(1, steps.size()), s);
}

// A gate that no case could run because of its lock: never locked, changed
// since (a person re-locks or the change is undone), or a frozen file the
// candidate changed. True when it added the steps (they are the only ones).
bool add_lock_steps(const ResultFacts& f, std::vector<NextStep>& steps) {
  if (f.gate_unlocked) {
    NextStep s;
    s.kind = "ask-to-lock";
    s.suggestion = "ask a person to review the gate and lock it: they commit it on the trusted ref and run "
                   "densefeed gate lock (agents never lock a gate)";
    s.why = fmt::format("no case ran: {}", f.lock_problems.front());
    steps.push_back(s);
    return true;
  }
  if (!f.lock_problems.empty()) {
    // The gate as read (the trusted ref's commit) differs from its lock: a
    // person's reviewed change not yet re-locked, or an edit to undo.
    NextStep lock;
    lock.kind = "ask-to-lock";
    lock.command = {"densefeed", "gate", "lock", f.gate};
    lock.suggestion = fmt::format("if the change to gate '{}' is reviewed, a person re-locks it: densefeed gate lock {}, then "
                                  "commits gates/gates.lock on the trusted ref (agents never lock a gate): {}",
                                  f.gate, f.gate, f.lock_problems.front());
    lock.why = "no case ran: a gate that differs from gates/gates.lock is never trusted, and only a person re-locks it";
    steps.push_back(lock);
    NextStep s;
    s.kind = "restore-frozen";
    s.command = {"densefeed", "gate", "verify", "--json"};
    s.suggestion = "otherwise restore the gate and its frozen files to their locked content (git checkout -- the files "
                   "densefeed gate verify names)";
    s.why = "the lock records the content a person reviewed";
    steps.push_back(s);
    return true;
  }
  if (f.gate_failure.kind == FailureKind::lock && f.gate_failure.who == FailureWho::candidate) {
    NextStep s;
    s.kind = "revert-frozen";
    if (f.gate_failure.metric == "worktree") {
      s.suggestion = fmt::format("restore the gate, gates.lock and frozen files in the project folder to the trusted ref's "
                                 "(git checkout main -- {}), then submit again; a change to them is a person's, on main",
                                 f.gate_failure.detail.empty() ? std::string("the files the reason names") : f.gate_failure.detail);
    } else {
      s.suggestion = "make a commit that leaves the gate, gates.lock and every frozen file as they are, and submit that revision";
    }
    s.why = f.gate_reason;
    steps.push_back(s);
    return true;
  }
  return false;
}

}  // namespace

std::vector<NextStep> next_steps(const ResultFacts& f, std::size_t max_steps) {
  std::vector<NextStep> steps;
  const std::string id = std::to_string(f.experiment_id);
  if (is_running(f.state)) {
    NextStep s;
    s.kind = "wait";
    s.command = {"densefeed", "status", id, "--wait", "--json"};
    s.suggestion = fmt::format("wait for the verdict (densefeed status {} --wait --json); a queued experiment runs only while a "
                               "worker is running (densefeed worker, or densefeed worker --once)",
                               id);
    s.why = "there is no verdict yet";
    steps.push_back(s);
    return steps;
  }
  if (f.state == ExperimentState::interrupted) {
    // Stopped from outside (a signal: a timeout, Ctrl-C; a worker that
    // died): nothing about the candidate is wrong, the run only needs to
    // be let finish. What it measured is kept in the record.
    NextStep s;
    s.kind = "resubmit";
    if (!f.manifest_path.empty()) s.command = {"densefeed", "run", f.manifest_path};
    s.suggestion = fmt::format("run it again where nothing stops it first (densefeed run {}; under a timeout, allow the "
                               "gate's cases and each bench case's measurement budget)",
                               f.manifest_path.empty() ? "MANIFEST" : f.manifest_path);
    s.why = fmt::format("it was stopped before a verdict{}; the rounds it had are kept in the record",
                        f.state_detail.empty() ? "" : ": " + f.state_detail);
    steps.push_back(s);
    return steps;
  }
  if (f.state == ExperimentState::cancelled || f.state == ExperimentState::rejected) {
    NextStep s;
    s.kind = "resubmit";
    s.suggestion = "resubmit the manifest (densefeed submit MANIFEST) once the cause is fixed";
    s.why = fmt::format("it ended {} without a verdict{}", to_string(f.state), f.state_detail.empty() ? "" : ": " + f.state_detail);
    steps.push_back(s);
    return steps;
  }
  if (add_lock_steps(f, steps)) return steps;
  if (!f.missing_in_candidate.empty()) {
    // A revision older than its gate: no rerun of it can help.
    NextStep s;
    s.kind = "resubmit";
    s.suggestion = fmt::format("merge the trusted ref into the candidate's revision (git merge, or rebase it), so that it has {}, "
                               "then submit again",
                               fmt::join(f.missing_in_candidate, ", "));
    s.why = fmt::format("the candidate did not run: its command names {}, which the trusted ref has and the candidate's tree lacks",
                        fmt::join(f.missing_in_candidate, ", "));
    steps.push_back(s);
    return steps;
  }
  if (f.gate_failure.kind == FailureKind::infrastructure && f.gate_failure.metric == "build") {
    NextStep s;
    s.kind = "fix-build";
    s.suggestion = fmt::format("make the candidate revision build with the gate's build commands (densefeed gate show {} "
                               "--json), then resubmit",
                               f.gate);
    s.why = f.gate_reason;
    steps.push_back(s);
    return steps;
  }

  // Red cases: those whose harness failed (nothing to compare), those whose
  // outputs hold NaN/Inf, and those over a bound.
  std::vector<const CaseFact*> errors, process, nonfinite, tolerance, compared;
  for (const auto& c : f.cases) {
    if (c.verdict == "error") errors.push_back(&c);
    if (c.verdict != "red") continue;
    const FailureClass kind = classify(c);
    if (kind == FailureClass::tolerance) tolerance.push_back(&c);
    else if (kind == FailureClass::nonfinite) nonfinite.push_back(&c);
    else process.push_back(&c);
    if (kind == FailureClass::tolerance || kind == FailureClass::nonfinite) compared.push_back(&c);
  }
  if (f.gate_verdict == "error" || !errors.empty()) {
    NextStep s;
    s.kind = "report-reference";
    s.case_label = errors.empty() ? "" : errors.front()->label;
    s.suggestion = "report it to a person: the gate's reference (frozen, from the trusted ref) failed, not the candidate; "
                   "resubmitting helps only if the machine was at fault (out of memory or disk)";
    s.why = errors.empty() ? f.gate_reason : errors.front()->label + ": " + errors.front()->reason;
    steps.push_back(s);
  }
  add_process_steps(steps, f, process);
  if (!compared.empty()) {
    add_comparison_steps(steps, f, compared, tolerance);
    add_narrow_step(steps, f, compared.size());
  }
  add_process_steps(steps, f, nonfinite);
  if (f.gate_verdict == "green") {
    add_base_steps(steps, f);
    const std::size_t base_steps = steps.size();
    add_bench_steps(steps, f);
    add_trace_steps(steps, f);
    if (steps.size() == base_steps) add_review_steps(steps, f);
  }
  if (steps.size() > max_steps) steps.resize(max_steps);
  return steps;
}

nlohmann::ordered_json next_steps_json(const std::vector<NextStep>& steps) {
  J out = J::array();
  for (const auto& s : steps) {
    J j = {{"kind", s.kind}, {"suggestion", s.suggestion}, {"why", s.why}};
    if (!s.case_label.empty()) j["case"] = s.case_label;
    if (!s.set_params.empty()) j["set_params"] = s.set_params;
    if (!s.command.empty()) j["command"] = s.command;
    if (!s.env.empty()) j["env"] = s.env;
    if (!s.cwd.empty()) j["cwd"] = s.cwd;
    out.push_back(j);
  }
  return out;
}

ResultFacts facts_from_outcome(const ExperimentOutcome& o) {
  ResultFacts f;
  f.experiment_id = o.experiment_id;
  f.manifest_path = o.record ? o.record->manifest_path : o.manifest.doc.path;
  f.gate = o.manifest.gate;
  f.gate_verdict = to_string(o.gate_result.verdict);
  f.gate_reason = o.gate_result.reason;
  f.lock_problems = o.lock_problems;
  f.gate_failure = o.gate_result.failure;
  f.gate_unlocked = o.gate_result.failure.kind == FailureKind::lock && o.gate_result.failure.metric == "unlocked";
  for (std::size_t i = 0; i < o.gate_result.cases.size(); ++i) {
    const CaseResult& c = o.gate_result.cases[i];
    if (c.candidate_session || c.reference_session) f.sessions = true;
    CaseFact cf{i, c.gate_case.label, c.gate_case.values, to_string(c.verdict), c.reason, c.failure, {}, c.parts};
    for (const auto& out : c.outputs) {
      for (const auto& m : out.comparison.checks) {
        MetricFact mf{out.output, m.metric, m.value, m.bound, m.passed, m.violations, out.comparison.worst_index, std::nullopt};
        if (out.comparison.first_failing_slice) mf.first_failing_slice = static_cast<std::int64_t>(*out.comparison.first_failing_slice);
        cf.metrics.push_back(mf);
      }
    }
    f.cases.push_back(std::move(cf));
  }
  f.candidate_params = o.candidate_params;
  if (o.gate) {
    f.params = o.gate->params;
    f.structure = o.gate->structure;
    f.candidate_command = o.gate->candidate_command;
    f.missing_in_candidate = o.gate_result.missing_in_candidate;
    f.timeout_s = o.gate->timeout_s;
  }
  // What the record keeps of the candidate's arm (provenance.h), so that the
  // rerun commands here are the ones status and ledger show print.
  f.candidate_arm = o.provenance.candidate_arm;
  f.bench_status = !o.bench ? "skipped" : o.bench->verdict == Verdict::green ? "measured" : to_string(o.bench->verdict);
  f.bench_reason = o.bench ? o.bench->reason : o.bench_skipped;
  if (o.bench) f.bench_failure = o.bench->failure;
  if (o.bench) {
    for (const auto& c : o.bench->cases) {
      const Decision& d = c.decision;
      BenchFact b;
      b.label = c.bench_case.label;
      b.verdict = to_string(d.verdict);
      b.reason = d.reason;
      b.speedup = d.speedup;
      b.lo = d.speedup_ci.lo;
      b.hi = d.speedup_ci.hi;
      b.threshold = c.threshold;
      b.capped = c.capped;
      b.rounds = static_cast<std::int64_t>(c.base.size());
      b.predicted_speedup = c.predicted_speedup;
      b.prediction_error = c.prediction_error;
      b.guards = guards_of(d);
      b.base_spread = d.base_relative_spread;
      b.candidate_spread = d.candidate_relative_spread;
      b.base_warmup_s = c.base_warmup_s;
      b.candidate_warmup_s = c.candidate_warmup_s;
      b.budget_s = c.budget_s;
      b.more_rounds = c.more_rounds;
      b.more_seconds = c.more_seconds;
      f.bench.push_back(std::move(b));
    }
  }
  if (o.trace) {
    for (const auto& arm : o.trace->arms) {
      for (std::size_t i = 0; i < arm.report.results.size(); ++i) {
        const auto& r = arm.report.results[i];
        TraceFact t;
        t.arm = arm.arm;
        t.index = static_cast<std::int64_t>(i);
        t.kind = to_string(r.check.kind);
        t.passed = r.passed;
        t.value = r.value;
        t.bound = r.check.bound;
        t.details = trace_check_json(r);
        f.trace.push_back(std::move(t));
      }
    }
  }
  f.risk = o.manifest.risk;
  f.categories = J::object();
  for (const auto& r : o.manifest.risk) f.categories[r] = nullptr;
  f.has_acceptance = o.manifest.acceptance.is_object() && o.manifest.acceptance.contains("criteria");
  f.seed = std::to_string(o.seed);
  f.work_dir = o.work_dir;
  f.base_origin = o.base_origin;
  return f;
}

ResultFacts facts_from_record(const ExperimentRecord& e, const GateSpec* gate, const std::filesystem::path& work_dir) {
  ResultFacts f;
  f.experiment_id = e.id();
  f.manifest_path = e.manifest_path;
  f.state = e.summary.state;
  if (!e.events.empty()) f.state_detail = e.events.back().detail;
  f.gate = e.summary.gate;
  f.candidate_params = e.candidate.params;
  if (e.gate_run) {
    const GateRunRow& g = *e.gate_run;
    f.gate_verdict = g.verdict;
    f.gate_reason = g.reason;
    f.lock_problems = g.lock_problems;
    const Failure& gf = e.summary.stage("gate").failure;
    f.gate_unlocked = gf.kind == FailureKind::lock && gf.metric == "unlocked";
    f.gate_failure.kind = gf.kind;
    f.gate_failure.who = gf.who;
    f.gate_failure.metric = gf.metric;
    f.gate_failure.detail = gf.detail;
    // A revision older than its gate (gate_runner: metric missing_in_candidate, detail the files).
    if (gf.metric == "missing_in_candidate" && !gf.detail.empty()) f.missing_in_candidate = {gf.detail};
    f.seed = g.seed;
    f.cases = g.cases;
    // Where the candidate ran from, as the run recorded it (arm_replay.h); a
    // record written before that was kept names the harness as the gate does,
    // and a revision's build folder is then not known here.
    if (g.provenance.is_object() && g.provenance.contains("candidate_arm")) f.candidate_arm = arm_from_replay_json(g.provenance["candidate_arm"]);
  }
  f.bench = e.bench_cases;
  // The bench stage's own verdict, as the run's (facts_from_outcome): a
  // bench that was red (the candidate failed in bench mode) or an error
  // (the base failed) records no case, and read as "none" it let the review
  // and promote steps through (a hostile trial: a candidate that crashes
  // only in bench mode was told to ask for review, then to promote).
  const StageOutcome& bench_stage = e.summary.stage("bench");
  if (f.gate_verdict == "pending") {
    f.bench_status = "none";
  } else if (f.gate_verdict != "green") {
    f.bench_status = "skipped";
  } else if (bench_stage.verdict == StageVerdict::red || bench_stage.verdict == StageVerdict::error) {
    f.bench_status = to_string(bench_stage.verdict);
    f.bench_reason = bench_stage.reason;
    f.bench_failure = bench_stage.failure;
  } else {
    f.bench_status = f.bench.empty() ? "none" : "measured";
  }
  f.trace = e.trace_findings;
  f.risk = e.risk;
  f.categories = e.categories;
  f.has_acceptance = e.has_acceptance;
  f.promoted = !e.promotion.is_null();
  f.base_origin = e.summary.base_origin;
  if (!e.narrowings.empty()) {
    f.narrowed_layer = e.narrowings.back().layer;
    f.narrowed_conclusion = e.narrowings.back().conclusion;
  }
  if (gate) {
    f.sessions = gate->sessions;
    f.params = gate->params;
    f.structure = gate->structure;
    f.candidate_command = gate->candidate_command;
    f.timeout_s = gate->timeout_s;
  }
  f.candidate_from_revision = e.candidate.revision != "WORKTREE";
  f.work_dir = work_dir;
  return f;
}

}  // namespace densefeed
