#include "report_json.h"


#include <fmt/format.h>

#include "comparison_report.h"
#include "experiment_document.h"
#include "next_steps.h"
#include "report_parts.h"
#include "trace_report.h"

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;
using report_parts::number_or_null;

// What a harness session measured for a case (null without sessions).
J session_json(const std::optional<SessionCaseRecord>& s) {
  if (!s) return nullptr;
  return {{"slot", s->slot}, {"session", s->session}, {"request", s->request}, {"rss_bytes", s->rss_bytes}, {"wall_s", s->wall_s}};
}

J timing_flags_json(const std::vector<TimingFlag>& flags) {
  J out = J::array();
  for (const auto& f : flags) out.push_back({{"kind", to_string(f.kind)}, {"arm", f.arm}, {"reason", f.reason}, {"figures", f.figures}});
  return out;
}

J process_json(const ProcessResult& p) {
  return {{"started", p.started},
          {"exit_code", p.started && p.signal == 0 && !p.timed_out ? J(p.exit_code) : J(nullptr)},
          {"signal", p.signal != 0 ? J(p.signal) : J(nullptr)},
          {"timed_out", p.timed_out},
          {"sigkill_needed", p.sigkill_needed},
          {"strays_killed", p.strays_killed},
          {"stdout_bytes", p.stdout_capture.bytes},
          {"stdout_dropped", p.stdout_capture.dropped},
          {"stderr_bytes", p.stderr_capture.bytes},
          {"stderr_dropped", p.stderr_capture.dropped},
          {"wall_s", p.wall_s},
          {"description", p.describe()}};
}

// The record's document keeps what it has: the run's view only adds keys.
void add(J& into, const char* key, J value) {
  if (!into.contains(key)) into[key] = std::move(value);
}

// Never recorded (the ledger could not be written): the run's inputs alone.
void add_run_inputs(J& doc, const ExperimentOutcome& o) {
  add(doc, "experiment_id", o.experiment_id);
  add(doc, "experiment", o.manifest.name);
  add(doc, "gate", o.manifest.gate);
  add(doc, "verdict", to_string(o.verdict));
  add(doc, "record", J());
  if (doc["profile"].is_null()) doc["profile"] = o.profile;
  if (doc["seed"].is_null()) doc["seed"] = std::to_string(o.seed);
  add(doc, "candidate", {{"revision", o.manifest.candidate.revision}, {"sha", o.candidate_sha}, {"params", o.candidate_params}});
  add(doc, "base", {{"revision", o.manifest.base.revision}, {"sha", o.base_sha}, {"params", o.base_params}});
  add(doc, "stages", J::object());
  J& stages = doc["stages"];
  add(stages, "gate", {{"verdict", to_string(o.gate_result.verdict)}, {"reason", o.gate_result.reason}, {"gate_sha256", o.gate_sha256},
                       {"lock_problems", o.lock_problems}, {"trend_tables", J::array()}});
  add(stages, "bench", {{"status", "skipped"}, {"reason", o.bench_skipped}, {"cases", J::array()}});
  add(stages, "trace", {{"status", "skipped"}, {"reason", o.trace_skipped}});
}

// Every case of the gate run as the run saw it: each process's end,
// sessions, placements, comparisons in full.
J gate_cases_json(const GateResult& g) {
  J cases = J::array();
  for (const auto& c : g.cases) {
    J outputs = J::array();
    for (const auto& out : c.outputs) {
      J o = {{"output", out.output}};
      o.update(comparison_json(out.comparison));
      o["passing_wrong_candidates"] = out.passing_wrong_candidates;
      outputs.push_back(o);
    }
    cases.push_back({{"case", c.gate_case.label},
                     {"values", c.gate_case.values},
                     {"verdict", to_string(c.verdict)},
                     {"reason", c.reason},
                     {"failure", to_json(c.failure)},
                     {"candidate_ranks", c.candidate_ranks},
                     {"outputs", outputs},
                     {"reference_wall_s", c.reference_wall_s},
                     {"candidate_wall_s", c.candidate_wall_s},
                     {"parts", c.parts ? J(*c.parts) : J()},
                     {"stderr_tail", c.log_tail},
                     {"log_tail_stream", c.log_tail_stream},
                     {"reference_process", process_json(c.reference_process)},
                     {"candidate_process", process_json(c.candidate_process)},
                     {"candidate_gpu", c.candidate_gpu},
                     {"candidate_placement", to_string(c.candidate_placement)},
                     {"reference_session", session_json(c.reference_session)},
                     {"candidate_session", session_json(c.candidate_session)},
                     {"reference_placement", to_string(c.reference_placement)}});
  }
  return cases;
}

J trend_bounds_json(const GateResult& g) {
  J trend_bounds = J::array();
  for (const auto& j : g.trends) {
    J labels = J::array();
    for (const auto i : j.cases) labels.push_back(g.cases[i].gate_case.label);
    trend_bounds.push_back({{"output", j.output}, {"metric", j.metric}, {"along", j.along}, {"row", j.row},
                            {"max_exponent", j.max_exponent}, {"exponent", j.exponent ? J(*j.exponent) : J(nullptr)},
                            {"r2", j.exponent ? J(j.r2) : J(nullptr)}, {"points", j.points}, {"passed", j.passed},
                            {"text", j.text}, {"cases", labels}});
  }
  return trend_bounds;
}

// One benchmark case as the run measured it.
J bench_case_json(const BenchCaseResult& c) {
  const Decision& d = c.decision;
  return {{"case", c.bench_case.label},
          {"verdict", to_string(d.verdict)},
          {"reason", d.reason},
          {"unit", c.unit},
          {"speedup", number_or_null(d.speedup)},
          {"speedup_ci", {number_or_null(d.speedup_ci.lo), number_or_null(d.speedup_ci.hi)}},
          {"ci_confidence", 1 - d.alpha_at_look},
          {"p_value", number_or_null(d.p_value)},
          {"rounds", c.base.size()},
          {"threshold", c.threshold},
          {"capped", c.capped},
          {"base_median", number_or_null(d.base_median_ms)},
          {"base_relative_spread", number_or_null(d.base_relative_spread)},
          {"candidate_median", number_or_null(d.candidate_median_ms)},
          {"candidate_relative_spread", number_or_null(d.candidate_relative_spread)},
          {"predicted_speedup", c.predicted_speedup ? J(*c.predicted_speedup) : J(nullptr)},
          {"prediction_error", c.prediction_error ? J(*c.prediction_error) : J(nullptr)},
          {"timing", c.timing},
          {"timing_flags", timing_flags_json(c.flags)},
          {"timing_checks", c.checks},
          {"guards", guards_json(d)}};
}

void add_bench_view(J& bench, const ExperimentOutcome& o) {
  add(bench, "placement", o.bench ? J(o.bench->placement) : J(nullptr));
  // The ledger keeps no case rows of a benchmark that failed to run or was
  // red (its stage row says why, experiment_record.h): the run shows what it
  // measured all the same, the timing flags that made it red among them.
  if (o.bench && bench["cases"].empty() && !o.bench->cases.empty()) {
    for (const auto& c : o.bench->cases) bench["cases"].push_back(bench_case_json(c));
  }
  if (o.bench && bench["cases"].size() == o.bench->cases.size()) {
    for (std::size_t i = 0; i < o.bench->cases.size(); ++i) {
      const auto& floor = o.bench->cases[i].calibrated_floor;
      add(bench["cases"][i], "calibrated_floor", floor ? J(*floor) : J(nullptr));
    }
  }
}

J trace_arms_json(const ExperimentOutcome& o) {
  J arms = J::array();
  if (o.trace) {
    for (const auto& arm : o.trace->arms) {
      J a = {{"arm", arm.arm}, {"ran", arm.ran}, {"failure", arm.failure}, {"trace_file", arm.trace_file.string()},
             {"checks", J::array()}, {"warnings", J::array()}};
      for (const auto& r : arm.report.results) a["checks"].push_back(trace_check_json(r));
      for (const auto& w : arm.report.warnings) a["warnings"].push_back(trace_warning_json(w));
      arms.push_back(a);
    }
  }
  return arms;
}

J sandbox_json(const ExperimentOutcome& o) {
  return {{"mode", o.sandbox.on() ? "on" : o.sandbox.mode == SandboxMode::off ? "off" : "unavailable"},
          {"reason", o.sandbox.reason},
          {"text", o.sandbox.text()},
          {"stages", {{"gate", o.gate_result.cases.empty() ? J(nullptr) : J(o.gate_result.sandbox.text())},
                      {"bench", o.bench ? J(o.bench->sandbox.text()) : J(nullptr)},
                      {"trace", o.trace ? J(o.trace->sandbox.text()) : J(nullptr)}}}};
}

}  // namespace

nlohmann::ordered_json report_json(const ExperimentOutcome& o, const std::string& ledger_path) {
  // The record's document (experiment_document.h), the same that status and
  // ledger show print; what follows only adds the run's own view to it.
  J doc = o.record ? experiment_document(*o.record, o.gate ? &*o.gate : nullptr, ledger_path) : J::object();
  add_run_inputs(doc, o);

  // The run's view: what only the process that ran it holds (each process's
  // end, sessions, placements, comparisons in full, sandbox, caches).
  J& gate = doc["stages"]["gate"];
  add(gate, "harness_wall_s", o.gate_result.harness_wall_s);
  add(gate, "cases", gate_cases_json(o.gate_result));
  add(gate, "trend_bounds", trend_bounds_json(o.gate_result));
  add_bench_view(doc["stages"]["bench"], o);
  add(doc["stages"]["trace"], "arms", trace_arms_json(o));
  add(doc, "sandbox", sandbox_json(o));
  add(doc, "wall_s", o.wall_s);
  add(doc, "executor", o.executor);
  add(doc, "caches", report_parts::caches_json(o));
  add(doc, "ledger", ledger_path);
  add(doc, "work_dir", o.work_dir.string());
  add(doc, "next", next_steps_json(next_steps(facts_from_outcome(o))));
  return doc;
}

}  // namespace densefeed
