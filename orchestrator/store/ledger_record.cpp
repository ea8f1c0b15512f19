#include "ledger_record.h"

#include <limits>

#include "ledger.h"

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

const J& at(const J& o, const char* key) {
  static const J null;
  return o.is_object() && o.contains(key) ? o[key] : null;
}

std::string text(const J& o, const char* key) {
  const J& v = at(o, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

double number(const J& o, const char* key) {
  const J& v = at(o, key);
  return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

std::optional<double> maybe_number(const J& o, const char* key) {
  const J& v = at(o, key);
  return v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt;
}

std::optional<std::int64_t> maybe_integer(const J& o, const char* key) {
  const J& v = at(o, key);
  return v.is_number_integer() ? std::optional<std::int64_t>(v.get<std::int64_t>()) : std::nullopt;
}

// SQLite has no boolean: 0/1 columns, or true/false where show() converted them.
bool flag(const J& o, const char* key, bool otherwise) {
  const J& v = at(o, key);
  return v.is_boolean() ? v.get<bool>() : v.is_number() ? v.get<double>() != 0 : otherwise;
}

J array_or_empty(const J& v) { return v.is_array() ? v : J::array(); }

std::vector<std::string> strings(const J& v) {
  std::vector<std::string> out;
  for (const auto& s : array_or_empty(v)) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

MetricRow metric_row(const J& m) {
  MetricRow r;
  r.output = text(m, "output");
  r.metric = text(m, "metric");
  r.value = number(m, "value");
  r.bound = number(m, "bound");
  r.passed = flag(m, "passed", false);
  const J& v = at(m, "violations");
  r.violations = v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0) ? v.get<std::uint64_t>() : 0;
  for (const auto& i : array_or_empty(at(m, "worst_index"))) {
    if (i.is_number_unsigned() || (i.is_number_integer() && i.get<std::int64_t>() >= 0)) r.worst_index.push_back(i.get<std::size_t>());
  }
  r.first_failing_slice = maybe_integer(m, "first_failing_slice");
  return r;
}

GateCaseRow gate_case_row(const J& c) {
  GateCaseRow r;
  const auto index = maybe_integer(c, "case_index");
  r.index = index && *index >= 0 ? static_cast<std::size_t>(*index) : 0;
  r.label = text(c, "case_label");
  r.values = at(c, "case_json").is_object() ? at(c, "case_json") : J::object();
  r.verdict = text(c, "verdict");
  r.reason = text(c, "reason");
  r.failure.kind = failure_kind_from(text(c, "failure_kind"));
  r.failure.who = failure_who_from(text(c, "failure_who"));
  if (const auto s = maybe_integer(c, "failure_signal")) r.failure.signal = static_cast<int>(*s);
  if (const auto e = maybe_integer(c, "failure_exit_code")) r.failure.exit_code = static_cast<int>(*e);
  r.failure.output = text(c, "failure_output");
  r.failure.metric = text(c, "failure_metric");
  for (const auto& m : array_or_empty(at(c, "metrics"))) r.metrics.push_back(metric_row(m));
  if (const auto p = maybe_integer(c, "parts"); p && *p >= 1) r.parts = *p;
  return r;
}

GateRunRow gate_run_row(const J& g) {
  GateRunRow r;
  r.gate = text(g, "gate");
  r.verdict = at(g, "verdict").is_string() ? text(g, "verdict") : "error";
  r.reason = text(g, "reason");
  r.profile = text(g, "profile");
  r.seed = at(g, "seed").is_number() ? at(g, "seed").dump() : text(g, "seed");
  r.gate_sha256 = text(g, "gate_sha256");
  r.lock_problems = strings(at(g, "lock_problems"));
  r.provenance = at(g, "provenance");
  r.wall_s = maybe_number(g, "wall_s");
  r.sandbox = text(g, "sandbox");
  for (const auto& c : array_or_empty(at(g, "cases"))) r.cases.push_back(gate_case_row(c));
  return r;
}

BenchCaseRow bench_case_row(const J& b) {
  BenchCaseRow r;
  r.label = text(b, "case_label");
  r.verdict = text(b, "verdict");
  r.reason = text(b, "reason");
  if (at(b, "unit").is_string()) r.unit = text(b, "unit");
  r.speedup = number(b, "speedup");
  r.lo = number(b, "speedup_lo");
  r.hi = number(b, "speedup_hi");
  r.ci_confidence = number(b, "ci_confidence");
  r.p_value = number(b, "p_value");
  r.threshold = number(b, "threshold");
  r.capped = flag(b, "capped", false);
  r.rounds = maybe_integer(b, "rounds").value_or(0);
  r.base_median = number(b, "base_median");
  r.candidate_median = number(b, "candidate_median");
  r.predicted_speedup = maybe_number(b, "predicted_speedup");
  r.prediction_error = maybe_number(b, "prediction_error");
  if (at(b, "guards").is_array()) {
    r.guards.emplace();
    for (const auto& g : at(b, "guards")) {
      if (const auto guard = g.is_string() ? bench_guard_from(g.get<std::string>()) : std::nullopt) r.guards->push_back(*guard);
    }
  }
  r.base_spread = number(b, "base_relative_spread");
  r.candidate_spread = number(b, "candidate_relative_spread");
  if (at(b, "timing").is_string()) r.timing = text(b, "timing");
  if (at(b, "timing_flags").is_array()) r.timing_flags = at(b, "timing_flags");
  if (at(b, "timing_checks").is_object()) r.timing_checks = at(b, "timing_checks");
  // Written by densefeed (bench_case.cpp), inside the chained row: read as numbers or not at all.
  const auto checked = [&](const char* group, const char* key) -> std::optional<double> {
    const J& g = at(r.timing_checks, group);
    if (!g.is_object() || !g.contains(key) || !g[key].is_number()) return std::nullopt;
    return g[key].get<double>();
  };
  r.base_warmup_s = checked("warmup", "base_s");
  r.candidate_warmup_s = checked("warmup", "candidate_s");
  r.budget_s = checked("budget", "budget_s");
  if (const auto more = checked("budget", "more_rounds")) r.more_rounds = static_cast<std::int64_t>(*more);
  r.more_seconds = checked("budget", "more_seconds");
  for (const auto& round : array_or_empty(at(b, "rounds_json"))) {
    BenchRoundSamples samples;
    for (const auto& x : array_or_empty(at(round, "base_ms"))) samples.base_ms.push_back(x.get<double>());
    for (const auto& x : array_or_empty(at(round, "candidate_ms"))) samples.candidate_ms.push_back(x.get<double>());
    r.samples.push_back(std::move(samples));
  }
  return r;
}

TraceFindingRow trace_finding_row(const J& t) {
  TraceFindingRow r;
  r.arm = text(t, "arm");
  r.index = maybe_integer(t, "check_index").value_or(0);
  r.kind = text(t, "kind");
  r.passed = flag(t, "passed", true);
  r.value = maybe_number(t, "value");
  r.bound = maybe_number(t, "bound");
  r.check = at(t, "check_json");
  r.details = at(t, "details");
  r.trace_file = text(t, "trace_file");
  return r;
}

ArmRow arm_row(const J& e, const char* revision, const char* sha, const char* params) {
  ArmRow a;
  a.revision = text(e, revision);
  a.sha = text(e, sha);
  a.params = at(e, params).is_object() ? at(e, params) : J::object();
  return a;
}

}  // namespace

ExperimentRecord experiment_record_from_rows(const nlohmann::ordered_json& e) {
  ExperimentRecord r;
  r.summary.id = maybe_integer(e, "id").value_or(0);
  r.summary.name = text(e, "name");
  r.summary.gate = text(e, "gate");
  r.summary.author = text(e, "author");
  r.summary.submitted_at = text(e, "submitted_at");
  r.summary.state = experiment_state_from(text(e, "state")).value_or(ExperimentState::finished);
  r.manifest_path = text(e, "manifest_path");
  r.manifest_sha256 = text(e, "manifest_sha256");
  r.author = text(e, "author");
  r.hypothesis = text(e, "hypothesis");
  r.predicted_effect = text(e, "predicted_effect");
  r.candidate = arm_row(e, "candidate_revision", "candidate_sha", "candidate_params");
  if (r.candidate.revision.empty()) r.candidate.revision = "WORKTREE";
  r.base = arm_row(e, "base_revision", "base_sha", "base_params");
  r.risk = strings(at(e, "risk"));
  r.has_acceptance = at(e, "acceptance").is_object() && at(e, "acceptance").contains("criteria");
  r.acceptance = at(e, "acceptance");
  for (const auto& ev : array_or_empty(at(e, "events"))) {
    r.events.push_back({text(ev, "event"), text(ev, "owner"), text(ev, "owner_host"), maybe_integer(ev, "owner_pid"), text(ev, "detail"),
                        text(ev, "at")});
  }
  if (at(e, "gate_run").is_object()) r.gate_run = gate_run_row(at(e, "gate_run"));
  for (const auto& b : array_or_empty(at(e, "bench_cases"))) r.bench_cases.push_back(bench_case_row(b));
  for (const auto& t : array_or_empty(at(e, "trace_findings"))) r.trace_findings.push_back(trace_finding_row(t));
  for (const auto& a : array_or_empty(at(e, "acceptance_runs"))) {
    r.acceptance_runs.push_back({maybe_integer(a, "id").value_or(0), text(a, "started_at"), text(a, "verdict"), text(a, "reason"),
                                 array_or_empty(at(a, "criteria"))});
  }
  for (const auto& v : array_or_empty(at(e, "reviews"))) {
    r.reviews.push_back({text(v, "category"), text(v, "decision"), text(v, "reviewer"), text(v, "note"), text(v, "reviewed_at")});
  }
  if (at(e, "categories").is_object()) r.categories = at(e, "categories");
  r.promotion = at(e, "promotion");
  r.parent_id = maybe_integer(e, "parent_id");
  r.step = text(e, "step");
  r.case_filter = strings(at(e, "case_filter"));
  for (const auto& c : array_or_empty(at(e, "children"))) r.children.emplace_back(maybe_integer(c, "id").value_or(0), text(c, "step"));
  for (const auto& n : array_or_empty(at(e, "narrowings"))) {
    r.narrowings.push_back({text(n, "layer"), text(n, "conclusion"), at(n, "result").is_object() ? at(n, "result") : J::object(),
                            text(n, "recorded_at")});
  }
  if (const J& env = at(e, "environment"); env.is_object()) {
    Environment m;
    m.host = text(env, "host");
    m.cpu_model = text(env, "cpu_model");
    if (at(env, "gpus").is_array()) m.gpus = nlohmann::json::parse(at(env, "gpus").dump());
    m.cuda_version = text(env, "cuda_version");
    m.compiler = text(env, "compiler");
    m.flags = text(env, "flags");
    r.environment = m;
    const J& clocks = at(env, "clocks");
    const J parsed = clocks.is_string() ? J::parse(clocks.get<std::string>(), nullptr, false) : clocks;
    if (parsed.is_object()) r.clocks = parsed;
  }
  return r;
}

ExperimentRecord Ledger::record(std::int64_t experiment_id) const {
  ExperimentRecord r = experiment_record_from_rows(show(experiment_id));
  r.summary = summary(experiment_id);
  return r;
}

}  // namespace densefeed
