#include "verdict_document.h"

#include "workspace.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "error_trend.h"
#include "gate_runner.h"
#include "gate_spec.h"
#include "next_steps.h"

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

double number(const J& v) { return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN(); }

bool truthy(const J& v) { return v.is_boolean() ? v.get<bool>() : v.is_number() && v.get<double>() != 0; }

// Numbers the schema allows: finite, or the strings nan / inf / -inf.
J number_or_text(double v) {
  return std::isfinite(v) ? J(v) : J(std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
}

Verdict verdict_of(const std::string& text) {
  return text == "green" ? Verdict::green : text == "red" ? Verdict::red : Verdict::error;
}

}  // namespace

GateResult gate_result_from_record(const nlohmann::ordered_json& record) {
  GateResult result;
  const J& g = record.contains("gate_run") ? record["gate_run"] : J();
  if (!g.is_object()) return result;
  result.verdict = verdict_of(g.value("verdict", std::string("error")));
  result.reason = g.value("reason", std::string());
  for (const auto& c : g.value("cases", J::array())) {
    CaseResult cr;
    cr.gate_case = Case{c.value("case_json", J::object()), c.value("case_label", std::string())};
    cr.verdict = verdict_of(c.value("verdict", std::string("error")));
    cr.reason = c.value("reason", std::string());
    for (const auto& m : c.value("metrics", J::array())) {
      const std::string output = m.value("output", std::string());
      auto it = std::find_if(cr.outputs.begin(), cr.outputs.end(), [&](const OutputResult& o) { return o.output == output; });
      if (it == cr.outputs.end()) {
        cr.outputs.push_back(OutputResult{output, {}});
        it = cr.outputs.end() - 1;
      }
      MetricCheck check;
      check.metric = m.value("metric", std::string());
      check.value = number(m["value"]);
      check.bound = number(m["bound"]);
      check.passed = truthy(m["passed"]);
      check.violations = m["violations"].is_number() ? m["violations"].get<std::size_t>() : 0;
      it->comparison.checks.push_back(check);
    }
    result.cases.push_back(std::move(cr));
  }
  return result;
}

nlohmann::ordered_json status_document(const nlohmann::ordered_json& e, const GateSpec* gate,
                                       const std::filesystem::path& ledger_path) {
  const std::int64_t id = e.value("id", std::int64_t{0});
  const auto work_dir = Workspace{ledger_path}.runs() / std::to_string(id);
  const J& g = e.contains("gate_run") ? e["gate_run"] : J();

  J doc = {{"experiment_id", id}, {"experiment", e.value("name", std::string())}, {"gate", e.value("gate", std::string())},
           {"state", e.value("state", std::string())}};
  doc["gate_verdict"] = g.is_object() ? g["verdict"] : J("pending");
  doc["reason"] = g.is_object() ? g["reason"] : J("");
  // The one typed record (experiment_summary.h): the overall verdict and
  // every stage's outcome, as ledger list and show print them.
  const J record = e.contains("record") ? e["record"] : J();
  doc["verdict"] = record.is_object() ? record["verdict"] : J("pending");
  doc["record"] = record;
  const auto stage_of = [&](const char* name) { return record.is_object() ? record["stages"][name] : J(); };
  // The compact bench list older clients read, kept as it was.
  doc["bench"] = J::array();
  for (const auto& b : e.value("bench_cases", J::array())) {
    doc["bench"].push_back({{"case", b["case_label"]}, {"verdict", b["verdict"]}, {"speedup", b["speedup"]},
                            {"speedup_lo", b["speedup_lo"]}, {"speedup_hi", b["speedup_hi"]}});
  }
  doc["events"] = e.value("events", J::array());

  // Gate: every case that is not green, with what was over which bound and where.
  J gate_stage = {{"verdict", doc["gate_verdict"]}, {"reason", doc["reason"]}, {"profile", nullptr}, {"seed", nullptr},
                  {"lock_problems", J::array()}, {"cases_total", 0}, {"failing_cases", J::array()}, {"trend_tables", J::array()}};
  if (g.is_object()) {
    gate_stage["profile"] = g["profile"];
    gate_stage["seed"] = g["seed"];
    gate_stage["lock_problems"] = g.value("lock_problems", J::array());
    const J cases = g.value("cases", J::array());
    gate_stage["cases_total"] = cases.size();
    J failing = J::array();
    for (const auto& c : cases) {
      if (c.value("verdict", std::string()) == "green") continue;
      J metrics = J::array();
      for (const auto& m : c.value("metrics", J::array())) {
        metrics.push_back({{"output", m["output"]}, {"metric", m["metric"]}, {"value", number_or_text(number(m["value"]))},
                           {"bound", m["bound"]}, {"passed", truthy(m["passed"])}, {"violations", m["violations"]},
                           {"worst_index", m["worst_index"].is_array() ? m["worst_index"] : J::array()},
                           {"first_failing_slice", m["first_failing_slice"]}});
      }
      failing.push_back({{"case", c["case_label"]}, {"index", c["case_index"]}, {"values", c["case_json"]}, {"verdict", c["verdict"]},
                         {"reason", c["reason"]}, {"metrics", metrics},
                         {"run_dir", (work_dir / fmt::format("candidate-{:03}", c.value("case_index", 0))).string()}});
    }
    gate_stage["failing_cases"] = failing;
    J tables = J::array();
    if (gate && !gate->trend_rows.empty()) {
      for (const auto& t : build_trend_tables(gate_result_from_record(e), gate->trend_rows, gate->trend_columns)) {
        tables.push_back(trend_table_json(t));
      }
    }
    gate_stage["trend_tables"] = tables;
  }

  // Bench: what the ledger holds (a benchmark is recorded only when it ran on a green gate).
  const J bench_rows = e.value("bench_cases", J::array());
  const std::string gate_verdict = doc["gate_verdict"].get<std::string>();
  const J bench_record = stage_of("bench");
  const std::string bench_verdict = bench_record.is_object() ? bench_record["verdict"].get<std::string>() : "";
  J bench_stage = {{"status", gate_verdict == "pending" ? "pending"
                              : gate_verdict != "green" ? "skipped"
                              : bench_verdict == "red" || bench_verdict == "error" || bench_verdict == "unknown" ? bench_verdict
                              : bench_rows.empty()      ? "none"
                                                        : "measured"}};
  if (bench_record.is_object()) {
    bench_stage["verdict"] = bench_record["verdict"];
    bench_stage["failure"] = bench_record["failure"];
    bench_stage["reason"] = bench_record["reason"];
  }
  bench_stage["cases"] = J::array();
  for (const auto& b : bench_rows) {
    bench_stage["cases"].push_back({{"case", b["case_label"]}, {"verdict", b["verdict"]}, {"reason", b["reason"]}, {"unit", b["unit"]},
                                    {"speedup", number_or_text(number(b["speedup"]))},
                                    {"speedup_ci", {number_or_text(number(b["speedup_lo"])), number_or_text(number(b["speedup_hi"]))}},
                                    {"ci_confidence", b["ci_confidence"]}, {"p_value", number_or_text(number(b["p_value"]))},
                                    {"rounds", b["rounds"]}, {"threshold", b["threshold"]}, {"capped", truthy(b["capped"])},
                                    {"base_median", number_or_text(number(b["base_median"]))},
                                    {"candidate_median", number_or_text(number(b["candidate_median"]))},
                                    {"predicted_speedup", b["predicted_speedup"]}, {"prediction_error", b["prediction_error"]}});
  }

  // Trace: the failed checks with the intervals involved.
  const J findings = e.value("trace_findings", J::array());
  J failed = J::array();
  for (const auto& t : findings) {
    if (truthy(t["passed"])) continue;
    failed.push_back({{"arm", t["arm"]}, {"check_index", t["check_index"]}, {"kind", t["kind"]}, {"check", t["check_json"]},
                      {"value", t["value"]}, {"bound", t["bound"]}, {"intervals", t["details"]}, {"trace_file", t["trace_file"]}});
  }
  const J trace_record = stage_of("trace");
  const std::string trace_verdict = trace_record.is_object() ? trace_record["verdict"].get<std::string>() : "";
  J trace_stage = {{"status", trace_verdict == "red" || !failed.empty() ? "failed"
                              : trace_verdict == "error" || trace_verdict == "unknown" ? trace_verdict
                              : findings.empty() ? "none" : "passed"},
                   {"verdict", trace_record.is_object() ? trace_record["verdict"] : J("pending")},
                   {"failure", trace_record.is_object() ? trace_record["failure"] : J()},
                   {"reason", trace_record.is_object() ? trace_record["reason"] : J("")},
                   {"checks", findings.size()},
                   {"failed_checks", failed}};

  J acceptance = nullptr;
  if (e.contains("acceptance_runs") && e["acceptance_runs"].is_array() && !e["acceptance_runs"].empty()) {
    const auto& a = e["acceptance_runs"].back();
    acceptance = {{"verdict", a["verdict"]}, {"reason", a["reason"]}, {"criteria", a.value("criteria", J::array())}};
  }
  doc["stages"] = {{"gate", gate_stage}, {"bench", bench_stage}, {"trace", trace_stage}, {"acceptance", acceptance}};
  doc["review"] = {{"categories", e.value("categories", J::object())}, {"promotion", e.value("promotion", J())}};
  doc["next"] = next_steps_json(next_steps(facts_from_record(e, gate, work_dir)));
  return doc;
}

}  // namespace densefeed
