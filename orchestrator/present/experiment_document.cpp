#include "experiment_document.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "bench_progress.h"
#include "error_trend.h"
#include "gate_result.h"
#include "gate_spec.h"
#include "next_steps.h"
#include "workspace.h"

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

// Numbers the schema allows: finite, or the strings nan / inf / -inf.
J number_or_text(double v) { return std::isfinite(v) ? J(v) : J(std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf")); }

J optional_number(const std::optional<double>& v) { return v ? J(*v) : J(); }

Verdict verdict_of(const std::string& text) {
  return text == "green" ? Verdict::green : text == "red" ? Verdict::red : Verdict::error;
}

J metric_json(const MetricRow& m) {
  return {{"output", m.output},
          {"metric", m.metric},
          {"value", number_or_text(m.value)},
          {"bound", number_or_text(m.bound)},
          {"passed", m.passed},
          {"violations", m.violations},
          {"worst_index", m.worst_index},
          {"first_failing_slice", m.first_failing_slice ? J(*m.first_failing_slice) : J()}};
}

J gate_stage(const ExperimentRecord& e, const GateSpec* gate, const std::filesystem::path& work_dir) {
  const StageOutcome& outcome = e.summary.stage("gate");
  J stage = {{"verdict", e.gate_verdict()}, {"reason", e.gate_run ? J(e.gate_run->reason) : J("")}, {"failure", to_json(outcome.failure)},
             {"profile", nullptr}, {"seed", nullptr}, {"gate_sha256", nullptr}, {"provenance", nullptr},
             {"wall_s", optional_number(outcome.wall_s)}, {"lock_problems", J::array()}, {"cases_total", 0},
             {"failing_cases", J::array()}, {"trend_tables", J::array()}};
  if (!e.gate_run) {
    // While it runs: how far the gate has come (run_progress.h events).
    const J events = read_bench_progress(work_dir / "progress.jsonl", 1u << 16);
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if (it->value("stage", std::string()) != "gate") continue;
      stage["cases_total"] = it->value("total", 0);
      stage["cases_done"] = it->value("done", 0);
      break;
    }
    return stage;
  }
  const GateRunRow& g = *e.gate_run;
  stage["profile"] = g.profile.empty() ? J() : J(g.profile);
  stage["seed"] = g.seed.empty() ? J() : J(g.seed);
  stage["gate_sha256"] = g.gate_sha256;
  stage["provenance"] = g.provenance;
  stage["lock_problems"] = g.lock_problems;
  stage["cases_total"] = g.cases.size();
  for (const auto& c : g.cases) {
    if (c.verdict == "green") continue;
    J metrics = J::array();
    for (const auto& m : c.metrics) metrics.push_back(metric_json(m));
    stage["failing_cases"].push_back({{"case", c.label}, {"index", c.index}, {"values", c.values}, {"verdict", c.verdict},
                                      {"reason", c.reason}, {"failure", to_json(c.failure)}, {"metrics", metrics},
                                      {"parts", c.parts ? J(*c.parts) : J()},
                                      {"run_dir", (work_dir / fmt::format("candidate-{:03}", c.index)).string()}});
  }
  if (gate && !gate->trend_rows.empty()) {
    for (const auto& t : build_trend_tables(gate_result_from_record(e), gate->trend_rows, gate->trend_columns)) {
      stage["trend_tables"].push_back(trend_table_json(t));
    }
  }
  return stage;
}

// measured (the benchmark ran: its findings are the cases' verdicts);
// skipped (the gate is not green, or the run asked for none); pending; red,
// error, unknown, started, interrupted: the bench stage's own outcome.
std::string bench_status(const ExperimentRecord& e) {
  const std::string gate_verdict = e.gate_verdict();
  if (gate_verdict == "pending") return "pending";
  if (gate_verdict != "green") return "skipped";
  const StageVerdict v = e.summary.stage("bench").verdict;
  if (v == StageVerdict::green || (v == StageVerdict::unknown && !e.bench_cases.empty())) return "measured";
  return to_string(v);
}

J bench_stage(const ExperimentRecord& e) {
  const StageOutcome& outcome = e.summary.stage("bench");
  J stage = {{"status", bench_status(e)}, {"verdict", to_string(outcome.verdict)}, {"failure", to_json(outcome.failure)},
             {"reason", outcome.reason}, {"cases", J::array()}};
  for (const auto& b : e.bench_cases) {
    J guards = nullptr;
    if (b.guards) {
      guards = J::array();
      for (const auto g : *b.guards) guards.push_back(to_string(g));
    }
    stage["cases"].push_back({{"case", b.label},
                              {"verdict", b.verdict},
                              {"reason", b.reason},
                              {"unit", b.unit},
                              {"speedup", number_or_text(b.speedup)},
                              {"speedup_ci", {number_or_text(b.lo), number_or_text(b.hi)}},
                              {"ci_confidence", number_or_text(b.ci_confidence)},
                              {"p_value", number_or_text(b.p_value)},
                              {"rounds", b.rounds},
                              {"threshold", b.threshold},
                              {"capped", b.capped},
                              {"base_median", number_or_text(b.base_median)},
                              {"base_relative_spread", number_or_text(b.base_spread)},
                              {"candidate_median", number_or_text(b.candidate_median)},
                              {"candidate_relative_spread", number_or_text(b.candidate_spread)},
                              {"predicted_speedup", optional_number(b.predicted_speedup)},
                              {"prediction_error", optional_number(b.prediction_error)},
                              {"timing", b.timing},
                              {"timing_flags", b.timing_flags},
                              {"timing_checks", b.timing_checks},
                              {"guards", guards}});
  }
  return stage;
}

J trace_stage(const ExperimentRecord& e) {
  const StageOutcome& outcome = e.summary.stage("trace");
  J failed = J::array();
  for (const auto& t : e.trace_findings) {
    if (t.passed) continue;
    failed.push_back({{"arm", t.arm}, {"check_index", t.index}, {"kind", t.kind}, {"check", t.check}, {"value", optional_number(t.value)},
                      {"bound", optional_number(t.bound)}, {"intervals", t.details}, {"trace_file", t.trace_file}});
  }
  return {{"status", to_string(outcome.verdict)}, {"verdict", to_string(outcome.verdict)}, {"failure", to_json(outcome.failure)},
          {"reason", outcome.reason},         {"checks", e.trace_findings.size()},      {"failed_checks", failed}};
}

J arm_json(const ArmRow& a) { return {{"revision", a.revision}, {"sha", a.sha}, {"params", a.params}}; }

}  // namespace

GateResult gate_result_from_record(const ExperimentRecord& record) {
  GateResult result;
  if (!record.gate_run) return result;
  result.verdict = verdict_of(record.gate_run->verdict);
  result.reason = record.gate_run->reason;
  for (const auto& c : record.gate_run->cases) {
    CaseResult cr;
    cr.gate_case = Case{c.values, c.label};
    cr.parts = c.parts;
    cr.verdict = verdict_of(c.verdict);
    cr.reason = c.reason;
    cr.failure = c.failure;
    for (const auto& m : c.metrics) {
      auto it = std::find_if(cr.outputs.begin(), cr.outputs.end(), [&](const OutputResult& o) { return o.output == m.output; });
      if (it == cr.outputs.end()) {
        cr.outputs.push_back(OutputResult{m.output, {}, {}, {}});
        it = cr.outputs.end() - 1;
      }
      it->comparison.checks.push_back(MetricCheck{m.metric, m.value, m.bound, m.passed, static_cast<std::size_t>(m.violations)});
    }
    result.cases.push_back(std::move(cr));
  }
  return result;
}

nlohmann::ordered_json experiment_document(const ExperimentRecord& e, const GateSpec* gate, const std::filesystem::path& ledger_path) {
  const auto work_dir = Workspace{ledger_path}.runs() / std::to_string(e.id());
  J doc = {{"experiment_id", e.id()},
           {"experiment", e.summary.name},
           {"gate", e.summary.gate},
           {"state", to_string(e.summary.state)},
           {"gate_verdict", e.gate_verdict()},
           {"reason", e.gate_run ? e.gate_run->reason : std::string()},
           {"verdict", e.summary.verdict},
           {"record", to_json(e.summary)},
           {"profile", e.summary.profile.empty() ? J() : J(e.summary.profile)},
           {"seed", e.gate_run && !e.gate_run->seed.empty() ? J(e.gate_run->seed) : J()},
           {"candidate", arm_json(e.candidate)},
           {"base", arm_json(e.base)}};
  // The compact bench list older clients read, kept as it was.
  doc["bench"] = J::array();
  for (const auto& b : e.bench_cases) {
    doc["bench"].push_back({{"case", b.label}, {"verdict", b.verdict}, {"speedup", std::isfinite(b.speedup) ? J(b.speedup) : J()},
                            {"speedup_lo", std::isfinite(b.lo) ? J(b.lo) : J()}, {"speedup_hi", std::isfinite(b.hi) ? J(b.hi) : J()}});
  }
  doc["events"] = J::array();
  for (const auto& ev : e.events) {
    doc["events"].push_back({{"event", ev.event}, {"owner", ev.owner}, {"owner_host", ev.owner_host},
                             {"owner_pid", ev.owner_pid ? J(*ev.owner_pid) : J()}, {"detail", ev.detail}, {"at", ev.at}});
  }
  J acceptance = nullptr;
  if (!e.acceptance_runs.empty()) {
    const auto& a = e.acceptance_runs.back();
    acceptance = {{"verdict", a.verdict}, {"reason", a.reason}, {"criteria", a.criteria}};
  }
  doc["stages"] = {{"gate", gate_stage(e, gate, work_dir)}, {"bench", bench_stage(e)}, {"trace", trace_stage(e)}, {"acceptance", acceptance}};
  doc["review"] = {{"categories", e.categories}, {"promotion", e.promotion}};
  doc["next"] = next_steps_json(next_steps(facts_from_record(e, gate, work_dir)));
  // While it runs: the bench's last warm-ups and rounds (bench_progress.h).
  doc["progress"] = read_bench_progress(work_dir / "progress.jsonl", 20);
  return doc;
}

}  // namespace densefeed
