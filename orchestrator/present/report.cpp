#include "report.h"

#include "executor.h"

#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error_trend.h"
#include "experiment_document.h"
#include "experiment_summary.h"
#include "trace_report.h"
#include "next_steps.h"
#include "printable.h"
#include "wrong_candidates.h"

namespace densefeed {
namespace {

// Untrusted text (a manifest's hypothesis, a harness's reason) on one line
// of a terminal: printable.h's one_line(), line breaks as "\n".
std::string printable(const std::string& text) { return one_line(text); }

std::string threshold_source(const BenchCaseResult& c) {
  if (!c.calibrated_floor) return "the 1 % minimum; no calibration on this host";
  if (*c.calibrated_floor > 0.01) return fmt::format("the calibrated noise floor");
  return fmt::format("the 1 % minimum; the calibrated floor is {:.2f}%", 100 * *c.calibrated_floor);
}

// As printable(), but keeping line breaks: a log tail shown as lines.
std::string printable_lines(const std::string& text) {
  std::string out;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t nl = text.find('\n', begin);
    out += printable(text.substr(begin, nl == std::string::npos ? std::string::npos : nl - begin));
    if (nl == std::string::npos) break;
    out += '\n';
    begin = nl + 1;
  }
  return out;
}

std::string sci(double v) { return std::isnan(v) ? "nan" : fmt::format("{:.2e}", v); }

nlohmann::ordered_json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
}

// One line for the whole run: a sandbox that could not start is said once,
// not per case.
// The compile caches the arms were given (arm_context.h), each once, with
// their size now.
nlohmann::ordered_json caches_json(const ExperimentOutcome& o) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  std::set<std::string> seen;
  for (const auto& [arm, ctx] : {std::pair{"reference", &o.reference_arm}, std::pair{"candidate", &o.candidate_arm},
                                 std::pair{"base", &o.base_arm}}) {
    if (ctx->cache_dir.empty() || !seen.insert(ctx->cache_dir.string()).second) continue;
    out.push_back({{"arm", arm}, {"path", ctx->cache_dir.string()}, {"bytes", folder_bytes(ctx->cache_dir)}});
  }
  return out;
}

// What a harness session measured for a case (null without sessions).
nlohmann::ordered_json session_json(const std::optional<SessionCaseRecord>& s) {
  if (!s) return nullptr;
  return {{"slot", s->slot}, {"session", s->session}, {"request", s->request}, {"rss_bytes", s->rss_bytes}, {"wall_s", s->wall_s}};
}

std::string sandbox_line(const SandboxStatus& s) {
  switch (s.mode) {
    case SandboxMode::on: return "on (bwrap: candidate and base commands see a read-only filesystem, no network)";
    case SandboxMode::off: return fmt::format("OFF ({}): candidate and base commands ran unconfined", s.reason);
    case SandboxMode::unavailable:
      return fmt::format("WARNING: unavailable, candidate and base commands ran unconfined: {}", s.reason);
  }
  return "?";
}

nlohmann::ordered_json timing_flags_json(const std::vector<TimingFlag>& flags) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& f : flags) out.push_back({{"kind", to_string(f.kind)}, {"arm", f.arm}, {"reason", f.reason}, {"figures", f.figures}});
  return out;
}

// Every stage that ran untrusted commands, and how: "gate on, bench on,
// trace on" (revision builds and acceptance go through the same launcher).
std::string stage_sandboxes(const ExperimentOutcome& o) {
  std::string s;
  const auto add = [&](const char* stage, const SandboxStatus& st) { s += fmt::format("{}{} {}", s.empty() ? "" : ", ", stage, st.text()); };
  if (!o.gate_result.cases.empty()) add("gate", o.gate_result.sandbox);
  if (o.bench) add("bench", o.bench->sandbox);
  if (o.trace) add("trace", o.trace->sandbox);
  return s.empty() ? "no untrusted command ran" : s;
}

nlohmann::ordered_json process_json(const ProcessResult& p) {
  using J = nlohmann::ordered_json;
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

std::string indented(const std::string& text, const std::string& indent) {
  std::string out = indent;
  for (char c : text) {
    out += c;
    if (c == '\n') out += indent;
  }
  return out;
}

std::vector<TrendTable> trends(const ExperimentOutcome& o) {
  if (!o.gate || o.gate->trend_rows.empty()) return {};
  return build_trend_tables(o.gate_result, o.gate->trend_rows, o.gate->trend_columns);
}

std::string worst_text(const Comparison& c) {
  if (c.worst_index.empty()) return "";
  return fmt::format("worst element [{}]: candidate {:.6g}, reference {:.6g}", fmt::join(c.worst_index, ","),
                     c.worst_candidate, c.worst_reference);
}

}  // namespace

std::string render_next_steps_text(const nlohmann::ordered_json& next) {
  if (!next.is_array() || next.empty()) return "";
  std::string s = "\nnext (cheapest first):\n";
  for (const auto& step : next) {
    s += fmt::format("  - [{}] {}\n    why: {}\n", step["kind"].get<std::string>(), printable(step["suggestion"].get<std::string>()),
                     printable(step["why"].get<std::string>()));
  }
  return s;
}

nlohmann::ordered_json comparison_json(const Comparison& c) {
  using J = nlohmann::ordered_json;
  J checks = J::array();
  for (const auto& chk : c.checks) {
    checks.push_back({{"metric", chk.metric},
                      {"value", number_or_null(chk.value)},
                      {"bound", chk.bound},
                      {"passed", chk.passed},
                      {"violations", chk.violations}});
  }
  J slices = J::array();
  for (const auto& sl : c.slices) {
    slices.push_back({{"index", sl.index}, {"begin", sl.begin}, {"end", sl.end}, {"rel_l2", number_or_null(sl.rel_l2)},
                      {"max_abs", number_or_null(sl.max_abs)}, {"violations", sl.violations}, {"passed", sl.passed}});
  }
  return {{"verdict", to_string(c.verdict)},
          {"reason", c.reason},
          {"metrics", checks},
          {"elements", c.elements},
          {"reference_max_abs", number_or_null(c.reference_max_abs)},
          {"judged_relative", c.judged_relative},
          {"note", c.note},
          {"worst_index", c.worst_index},
          {"worst_candidate", number_or_null(c.worst_candidate)},
          {"worst_reference", number_or_null(c.worst_reference)},
          {"candidate_nonfinite", c.candidate_nonfinite},
          {"reference_nonfinite", c.reference_nonfinite},
          {"first_failing_slice", c.first_failing_slice ? J(*c.first_failing_slice) : J(nullptr)},
          {"slices", slices}};
}

std::string render_comparison_text(const Comparison& c) {
  std::string s = fmt::format("{}{}\n", to_string(c.verdict), c.reason.empty() ? "" : " — " + c.reason);
  for (const auto& m : c.checks) {
    s += fmt::format("  {:<12} {:>10} bound {:.1e}  {}{}\n", m.metric, sci(m.value), m.bound, m.passed ? "ok" : "OVER",
                     m.violations ? fmt::format(" ({} of {} element(s) beyond)", m.violations, c.elements) : "");
  }
  if (!c.worst_index.empty()) s += "  " + worst_text(c) + "\n";
  if (!c.note.empty()) s += "  " + printable(c.note) + "\n";
  return s;
}

nlohmann::ordered_json gate_json(const GateSpec& g, const std::vector<std::string>& lock_problems, const BlindSpots* blind,
                                 const std::string& blind_note) {
  using J = nlohmann::ordered_json;
  J params = J::object();
  for (const auto& p : g.params) {
    params[p.name] = {{"type", p.type}, {"enum", p.enum_values}, {"default", p.default_value}, {"description", p.description}};
  }
  J outputs = J::object();
  for (const auto& o : g.outputs) {
    outputs[o.name] = {{"dtype", o.dtype},
                       {"reference_dtype", o.reference_dtype},
                       {"shape", o.shape},
                       {"tolerance", tolerance_to_json(o.tolerance)},
                       {"default_tolerance", o.default_tolerance},
                       {"partition_axis", o.partition_axis ? J(*o.partition_axis) : J(nullptr)},
                       {"trend", J::array()}};
    for (const auto& t : o.trends) {
      outputs[o.name]["trend"].push_back({{"metric", t.metric}, {"along", t.along}, {"max_exponent", t.max_exponent}});
    }
  }
  J could_fail = {{"gate_run_id", nullptr}, {"experiment_id", nullptr}, {"recorded_at", nullptr},
                  {"note", blind_note}, {"cases", J::array()}};
  if (blind && blind->gate_run_id != 0) {
    could_fail["gate_run_id"] = blind->gate_run_id;
    could_fail["experiment_id"] = blind->experiment_id;
    could_fail["recorded_at"] = blind->recorded_at;
    for (const auto& e : blind->entries) {
      could_fail["cases"].push_back({{"case", e.case_label}, {"output", e.output}, {"candidate", e.candidate},
                                     {"finding", wrong_candidate_sentence(e.candidate)}});
    }
  } else if (blind && blind_note.empty()) {
    could_fail["note"] = "no recorded run of this gate judged its cases yet";
  }
  J profiles = J::object();
  for (const auto& [name, filter] : g.profiles) profiles[name] = select_cases(g.cases, filter).size();
  J cases = J::array();
  for (const auto& c : g.cases) cases.push_back(c.label);
  J bench = J::array();
  for (const auto& c : g.bench.cases) bench.push_back(c.label);
  // Who times the benchmark: the gate's frozen driver, or the candidate.
  J driver = nullptr;
  if (const auto& d = g.bench.driver) {
    driver = {{"command", d->command}};
    if (!d->library.empty()) driver["kernel"] = {{"library", d->library}, {"symbol", d->symbol}};
    else driver["kernel"] = {{"module", d->module}, {"function", d->function}, {"path", d->path}};
  }
  J work = J::object();
  if (!g.bench.work.bytes.empty()) work["bytes"] = g.bench.work.bytes;
  if (!g.bench.work.flops.empty()) work["flops"] = g.bench.work.flops;
  return {{"gate", g.name},
          {"description", g.description},
          {"file", g.file.string()},
          {"lock", lock_problems.empty() ? "ok" : "NOT OK"},
          {"lock_problems", lock_problems},
          {"reference_command", g.reference_command},
          {"reference_case_keys", g.reference_case_keys ? J(*g.reference_case_keys) : J(nullptr)},
          {"candidate_command", g.candidate_command},
          {"params", params},
          {"outputs", outputs},
          {"cases", cases},
          {"profiles", profiles},
          {"timeout_s", g.timeout_s},
          {"gpus", g.gpus},
          {"ranks", g.ranks},
          {"rank_outputs", g.per_rank_outputs ? "per_rank" : "gathered"},
          {"protocol", g.sessions ? "session" : "process"},
          {"bench", {{"warmup", g.bench.warmup}, {"iters", g.bench.iters}, {"looks", g.bench.looks},
                     {"max_seconds_per_case", g.bench.max_seconds_per_case}, {"cases", bench},
                     {"timing", g.bench.driver ? "driver" : "candidate"}, {"driver", driver}, {"work", work},
                     {"max_speedup", g.bench.max_speedup}}},
          {"freezes", g.freezes},
          {"wrong_candidates", could_fail}};
}

std::string render_gate_text(const nlohmann::ordered_json& d) {
  std::string s = fmt::format("gate {} ({})\n  {}\n", d["gate"].get<std::string>(), d["file"].get<std::string>(),
                              d["description"].get<std::string>());
  s += fmt::format("  lock: {}\n", d["lock"].get<std::string>());
  for (const auto& p : d["lock_problems"]) s += "    " + p.get<std::string>() + "\n";
  s += "  reference: " + fmt::format("{}", fmt::join(d["reference_command"].get<std::vector<std::string>>(), " ")) + "\n";
  if (d.contains("reference_case_keys") && d["reference_case_keys"].is_array()) {
    s += fmt::format("    depends on case keys {} (cases that agree on them share one reference run)\n",
                     fmt::join(d["reference_case_keys"].get<std::vector<std::string>>(), ", "));
  }
  s += "  candidate: " + fmt::format("{}", fmt::join(d["candidate_command"].get<std::vector<std::string>>(), " ")) + "\n";
  for (const auto& [name, p] : d["params"].items()) {
    s += fmt::format("  param {}: {} {} default {} — {}\n", name, p["type"].get<std::string>(), p["enum"].dump(),
                     p["default"].dump(), p["description"].get<std::string>());
  }
  for (const auto& [name, o] : d["outputs"].items()) {
    s += fmt::format("  output {}: {} (reference {}), shape {}, tolerance {}{}\n", name, o["dtype"].get<std::string>(),
                     o["reference_dtype"].get<std::string>(), o["shape"].dump(), o["tolerance"].dump(),
                     o["default_tolerance"].get<bool>() ? " (dtype default)" : "");
  }
  for (const auto& [name, n] : d["profiles"].items()) s += fmt::format("  profile {}: {} case(s)\n", name, n.get<std::size_t>());
  s += fmt::format("  timeout per process: {} s\n", d["timeout_s"].get<double>());
  s += fmt::format("  protocol: {}\n", d["protocol"].get<std::string>());
  if (d.value("ranks", std::string("1")) != "1") {
    s += fmt::format("  ranks per candidate: {} ({} outputs)\n", d["ranks"].get<std::string>(), d["rank_outputs"].get<std::string>());
  }
  s += fmt::format("  bench cases: {}\n", d["bench"]["cases"].dump());
  const auto& b = d["bench"];
  if (b["driver"].is_null()) {
    s += "  bench timed by: the candidate's harness (no bench.driver; promotion needs --accept-candidate-timing)\n";
  } else {
    const auto& k = b["driver"]["kernel"];
    s += fmt::format("  bench timed by: the frozen driver {} loading {}\n",
                     fmt::join(b["driver"]["command"].get<std::vector<std::string>>(), " "),
                     k.contains("library") ? fmt::format("{} from the arm's bin folders ({})", k["library"].get<std::string>(), k["symbol"].get<std::string>())
                                           : fmt::format("{}.{} from the arm's tree ({})", k["module"].get<std::string>(), k["function"].get<std::string>(),
                                                         k["path"].get<std::string>()));
  }
  s += fmt::format("  bench work: {}; speedups above {}x need a person's acceptance\n",
                   b["work"].empty() ? std::string("not declared (no check against the machine's ceilings)") : b["work"].dump(),
                   b["max_speedup"].get<double>());
  s += fmt::format("  freezes: {}\n", d["freezes"].dump());
  for (const auto& [name, o] : d["outputs"].items()) {
    for (const auto& t : o["trend"]) {
      s += fmt::format("  trend bound on {}: {} ~ {}^p with p <= {}\n", name, t["metric"].get<std::string>(),
                       t["along"].get<std::string>(), t["max_exponent"].get<double>());
    }
  }
  const auto& w = d["wrong_candidates"];
  if (w["gate_run_id"].is_null()) {
    s += fmt::format("  could it fail? unknown: {}\n", w["note"].get<std::string>());
  } else if (w["cases"].empty()) {
    s += fmt::format("  could it fail? yes: in gate run {} (experiment {}, {}) every case fails the simple wrong candidates "
                     "(zeros, the reference's mean, the last partition zeroed)\n",
                     w["gate_run_id"].get<std::int64_t>(), w["experiment_id"].get<std::int64_t>(), w["recorded_at"].get<std::string>());
  } else {
    s += fmt::format("  could it fail? NOT everywhere: in gate run {} (experiment {}, {}) — tighten these bounds:\n",
                     w["gate_run_id"].get<std::int64_t>(), w["experiment_id"].get<std::int64_t>(), w["recorded_at"].get<std::string>());
    for (const auto& c : w["cases"]) {
      s += fmt::format("    case {}: {}: {}\n", c["case"].get<std::string>(), c["output"].get<std::string>(),
                       c["finding"].get<std::string>());
    }
  }
  return s;
}

std::string render_text_report(const ExperimentOutcome& o) {
  const Manifest& m = o.manifest;
  std::string s;
  s += fmt::format("experiment {} '{}' — gate {} (profile {}, seed {})\n", o.experiment_id, printable(m.name), printable(m.gate), printable(o.profile), o.seed);
  s += fmt::format("  hypothesis: {}\n  predicted:  {}\n", printable(m.hypothesis), printable(m.predicted_effect));
  s += fmt::format("  candidate: {} {}   base: {} {}\n", printable(m.candidate.revision), o.candidate_params.dump(), printable(m.base.revision),
                   o.base_params.dump());
  const GateResult& g = o.gate_result;
  s += fmt::format("\ngate: {}{}\n", to_string(g.verdict), g.reason.empty() ? "" : " — " + printable(g.reason));
  if (!o.lock_problems.empty()) {
    s += "  lock: NOT OK\n";
    for (const auto& p : o.lock_problems) s += "    " + printable(p) + "\n";
  } else {
    s += fmt::format("  lock: ok (gate sha256 {})\n", o.gate_sha256);
  }
  const Provenance& p = o.provenance;
  if (p.clean()) {
    s += fmt::format("  provenance: {} at commit {}; gates from {}\n", p.project, p.commit.substr(0, 12), p.gate_store);
  } else {
    s += fmt::format("  provenance: WARNING ({}; gates from {}): {}\n", p.project, p.gate_store, printable(fmt::format("{}", fmt::join(p.notes, "; "))));
  }
  s += "  sandbox: " + sandbox_line(o.sandbox) + "\n";
  s += "  sandbox by stage: " + stage_sandboxes(o) + "\n";
  {
    // Harness sessions: how many, and their memory from the first request to the last.
    for (const auto& [arm, pick] : {std::pair{"reference", &CaseResult::reference_session}, std::pair{"candidate", &CaseResult::candidate_session}}) {
      std::uint64_t first = 0, last = 0, peak = 0;
      int sessions = 0, requests = 0;
      // Cases that share a reference run share its request: count each once.
      std::set<std::tuple<int, int, int>> seen;
      for (const auto& c : g.cases) {
        const auto& rec = c.*pick;
        if (!rec || !seen.insert({rec->slot, rec->session, rec->request}).second) continue;
        ++requests;
        sessions = std::max(sessions, rec->session);
        if (rec->rss_bytes == 0) continue;
        if (first == 0) first = rec->rss_bytes;
        last = rec->rss_bytes;
        peak = std::max(peak, rec->rss_bytes);
      }
      if (requests == 0) continue;
      s += fmt::format("  {} sessions: {} request(s), at most {} session(s) per job thread; RSS {:.1f} MiB after the first, {:.1f} MiB "
                       "after the last, peak {:.1f} MiB\n",
                       arm, requests, sessions, first / 1048576.0, last / 1048576.0, peak / 1048576.0);
    }
  }
  {
    std::vector<std::string> used;
    for (const auto& c : caches_json(o)) {
      const auto bytes = c["bytes"].get<std::uintmax_t>();
      if (bytes > 0) used.push_back(fmt::format("{} {:.1f} MiB ({})", c["arm"].get<std::string>(), bytes / 1048576.0, c["path"].get<std::string>()));
    }
    if (!used.empty()) s += fmt::format("  compile caches: {}\n", fmt::join(used, "; "));
  }
  if (o.executor != "local") {
    // Where the cases ran: the nodes and GPUs of their jobs.
    std::map<std::string, int> nodes;
    std::set<std::string> gpus;
    for (const auto& c : g.cases) {
      if (!c.candidate_placement.node.empty()) ++nodes[c.candidate_placement.node];
      if (!c.candidate_gpu.empty()) gpus.insert(c.candidate_gpu);
    }
    std::vector<std::string> where;
    for (const auto& [node, n] : nodes) where.push_back(fmt::format("{} ({} case(s))", node, n));
    s += fmt::format("  executor: {}: every process a job of its own; candidates ran on {}{}\n", o.executor,
                     where.empty() ? std::string("-") : fmt::format("{}", fmt::join(where, ", ")),
                     gpus.empty() ? "" : fmt::format(", GPU(s) {}", fmt::join(gpus, ",")));
  }
  std::size_t width = 4;
  for (const auto& c : g.cases) width = std::max(width, c.gate_case.label.size());
  if (!g.cases.empty()) {
    // A column pair (value, bound) per metric some output's tolerance bounds,
    // in the tolerance's order; a metric no output bounds is left out, and
    // an output that does not bound a shown metric has '-' there.
    std::vector<std::string> metrics;
    for (const char* m : {"rel_l2", "max_abs", "elementwise", "max_ulp"}) {
      bool bounded = false;
      for (const auto& c : g.cases) {
        for (const auto& out : c.outputs) {
          for (const auto& chk : out.comparison.checks) bounded = bounded || chk.metric == m;
        }
      }
      if (bounded) metrics.emplace_back(m);
    }
    s += fmt::format("  {:<{}} {:<7} {:<12}", "case", width, "verdict", "output");
    for (const auto& m : metrics) s += fmt::format(" {:>11} {:>9}", m, "bound");
    s += "\n";
    for (const auto& c : g.cases) {
      if (c.outputs.empty()) {
        s += fmt::format("  {:<{}} {:<7} {}\n", c.gate_case.label, width, to_string(c.verdict), printable(c.reason));
        continue;
      }
      for (const auto& out : c.outputs) {
        s += fmt::format("  {:<{}} {:<7} {:<12}", c.gate_case.label, width, to_string(out.comparison.verdict), out.output);
        for (const auto& m : metrics) {
          std::string value = "-", bound = "-";
          for (const auto& chk : out.comparison.checks) {
            if (chk.metric == m) value = sci(chk.value), bound = fmt::format("{:.2e}", chk.bound);
          }
          s += fmt::format(" {:>11} {:>9}", value, bound);
        }
        s += "\n";
      }
    }
    bool any_failed = false;
    for (const auto& c : g.cases) {
      if (c.verdict == Verdict::green) continue;
      if (!any_failed) s += "  not green:\n";
      any_failed = true;
      s += fmt::format("    [{}] {}: {}\n", to_string(c.verdict), c.gate_case.label, printable(c.reason));
      for (const auto& out : c.outputs) {
        if (out.comparison.verdict != Verdict::green && !out.comparison.worst_index.empty()) {
          s += fmt::format("      {}: {}\n", out.output, worst_text(out.comparison));
        }
        if (!out.comparison.note.empty()) s += fmt::format("      {}: {}\n", out.output, printable(out.comparison.note));
      }
      for (const auto& [who, pr] : {std::pair{"reference", &c.reference_process}, std::pair{"candidate", &c.candidate_process}}) {
        for (const auto& [stream, counts] : {std::pair{"stdout", pr->stdout_capture}, std::pair{"stderr", pr->stderr_capture}}) {
          if (counts.dropped > 0) {
            s += fmt::format("      the {} wrote {} bytes to {}; {} beyond the cap were dropped\n", who, counts.bytes, stream,
                             counts.dropped);
          }
        }
      }
      if (!c.log_tail.empty()) {
        s += fmt::format("      last lines of its {}:\n{}\n", c.log_tail_stream, indented(printable_lines(c.log_tail), "        | "));
      }
    }
  }
  for (const auto& c : g.cases) {
    for (const auto& out : c.outputs) {
      for (const auto& w : out.passing_wrong_candidates) {
        s += fmt::format("  case {}: {}: {} (the gate's bounds accept it; its owner should tighten them)\n", c.gate_case.label,
                         out.output, wrong_candidate_sentence(w));
      }
    }
  }
  for (const auto& j : g.trends) s += fmt::format("  trend bound: {}{}\n", j.passed ? "" : "OVER: ", j.text);
  for (const auto& t : trends(o)) s += "\n" + render_trend_table(t);

  s += "\nbench: ";
  if (!o.bench) {
    s += "not run (" + printable(o.bench_skipped) + ")\n";
  } else if (o.bench->verdict != Verdict::green) {
    s += fmt::format("{} — {}\n", to_string(o.bench->verdict), printable(o.bench->reason));
    for (const auto& c : o.bench->cases) {
      for (const auto& f : c.flags) s += fmt::format("  {}: {}: {}\n", c.bench_case.label, to_string(f.kind), printable(f.reason));
    }
  } else {
    s += "candidate vs base, interleaved rounds (speedup = base time / candidate time)";
    if (!o.bench->placement.empty() && o.bench->placement != "local") s += "; every round in " + o.bench->placement;
    s += "\n";
    // Who wrote the base: the record's (judged with the ledger's promotions).
    const BaseOrigin& origin = o.record ? o.record->summary.base_origin : o.base_origin;
    s += fmt::format("  base: {} — {}{}\n", to_string(origin.kind), printable(origin.reason),
                     is_agent_base(origin.kind) ? "; a base the agent wrote: promotion needs --accept-agent-base" : "");
    for (const auto& c : o.bench->cases) {
      const Decision& d = c.decision;
      s += fmt::format("  {}: {} — speedup {:.3f}x, {:.1f}% CI [{:.3f}, {:.3f}], p = {:.3g}, {} rounds, threshold {:.2f}% ({})\n",
                       c.bench_case.label, to_string(d.verdict), d.speedup, 100 * (1 - d.alpha_at_look), d.speedup_ci.lo,
                       d.speedup_ci.hi, d.p_value, c.base.size(), 100 * c.threshold, threshold_source(c));
      s += fmt::format("    base median {:.4g} {} (spread {:.1f}%), candidate median {:.4g} {} (spread {:.1f}%)\n",
                       d.base_median_ms, c.unit, 100 * d.base_relative_spread, d.candidate_median_ms, c.unit,
                       100 * d.candidate_relative_spread);
      if (c.predicted_speedup) {
        s += fmt::format("    predicted {:.3f}x, measured {:.3f}x: prediction error {:+.1f}%\n", *c.predicted_speedup,
                         d.speedup, 100 * c.prediction_error.value_or(NAN));
      }
      s += "    " + printable(d.reason) + "\n";
      s += c.timing == "driver" ? "    timed by the gate's trusted driver\n"
                                : "    timed by the candidate (the gate has no bench.driver): promotion needs --accept-candidate-timing\n";
      for (const auto& f : c.flags) s += fmt::format("    {}: {}\n", to_string(f.kind), printable(f.reason));
    }
  }
  s += "\ntrace: ";
  if (!o.trace) {
    s += "not run (" + printable(o.trace_skipped) + ")\n";
  } else {
    s += fmt::format("{}{}\n", to_string(o.trace->verdict), o.trace->reason.empty() ? "" : " — " + printable(o.trace->reason));
    for (const auto& arm : o.trace->arms) {
      if (!arm.ran) {
        s += fmt::format("  {}: {}\n", arm.arm, printable(arm.failure));
        continue;
      }
      for (const auto& r : arm.report.results) {
        s += fmt::format("  {} {} {}: {} — {}{}\n", arm.arm, r.check.field, to_string(r.check.kind), r.passed ? "passed" : "FAILED",
                         r.value ? fmt::format("{:.4g} {}", *r.value, r.unit) : std::string("no value"),
                         fmt::format(" (bound {:.4g}{})", r.check.bound, r.rank ? fmt::format(", worst rank {}", *r.rank) : ""));
        if (!r.reason.empty()) s += "    " + printable(r.reason) + "\n";
        for (std::size_t k = 0; k < r.intervals.size() && k < 5; ++k) {
          const auto& iv = r.intervals[k];
          s += fmt::format("    {} on {}: {:.3f} .. {:.3f} ms ({:.3f} ms counted)\n", printable(iv.name), printable(iv.lane),
                           iv.start / 1e6, iv.end / 1e6, iv.ns / 1e6);
        }
        if (r.intervals_total > 5) s += fmt::format("    ... {} interval(s) in all\n", r.intervals_total);
      }
    }
  }
  // From the record, as the JSON document's `next` (experiment_document.h).
  s += render_next_steps_text(next_steps_json(next_steps(o.record ? facts_from_record(*o.record, o.gate ? &*o.gate : nullptr, o.work_dir)
                                                                  : facts_from_outcome(o))));
  std::error_code ec;
  const bool have_logs = std::filesystem::exists(o.work_dir, ec);
  std::string bench_summary;
  if (o.bench && o.bench->verdict == Verdict::green) {
    std::map<std::string, int> count;
    for (const auto& c : o.bench->cases) ++count[to_string(c.decision.verdict)];
    for (const auto& [verdict, n] : count) bench_summary += fmt::format("{}{} {} of {}", bench_summary.empty() ? "" : ", ", verdict, n, o.bench->cases.size());
    bench_summary = "; benchmark: " + bench_summary;
  }
  const std::string verdict = o.record ? o.record->summary.verdict : to_string(o.verdict);
  const std::string decided_by = o.record ? (o.record->summary.verdict_stage.empty() ? "every stage" : o.record->summary.verdict_stage) : "gate";
  s += fmt::format("\nverdict: {} ({}){}   (experiment {}, {:.1f} s{})\n", verdict, decided_by, bench_summary, o.experiment_id,
                   o.wall_s, have_logs ? ", harness logs in " + o.work_dir.string() : "");
  return s;
}

nlohmann::ordered_json report_json(const ExperimentOutcome& o, const std::string& ledger_path) {
  using J = nlohmann::ordered_json;
  // The record's document (experiment_document.h), the same that status and
  // ledger show print; what follows only adds the run's own view to it.
  J doc = o.record ? experiment_document(*o.record, o.gate ? &*o.gate : nullptr, ledger_path) : J::object();
  const auto add = [](J& into, const char* key, J value) {
    if (!into.contains(key)) into[key] = std::move(value);
  };
  // Never recorded (the ledger could not be written): the run's inputs alone.
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

  // The run's view: what only the process that ran it holds (each process's
  // end, sessions, placements, comparisons in full, sandbox, caches).
  J cases = J::array();
  for (const auto& c : o.gate_result.cases) {
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
  J trend_bounds = J::array();
  for (const auto& j : o.gate_result.trends) {
    J labels = J::array();
    for (const auto i : j.cases) labels.push_back(o.gate_result.cases[i].gate_case.label);
    trend_bounds.push_back({{"output", j.output}, {"metric", j.metric}, {"along", j.along}, {"row", j.row},
                            {"max_exponent", j.max_exponent}, {"exponent", j.exponent ? J(*j.exponent) : J(nullptr)},
                            {"r2", j.exponent ? J(j.r2) : J(nullptr)}, {"points", j.points}, {"passed", j.passed},
                            {"text", j.text}, {"cases", labels}});
  }
  J& gate = stages["gate"];
  add(gate, "harness_wall_s", o.gate_result.harness_wall_s);
  add(gate, "cases", cases);
  add(gate, "trend_bounds", trend_bounds);
  J& bench = stages["bench"];
  add(bench, "placement", o.bench ? J(o.bench->placement) : J(nullptr));
  // The ledger keeps no case rows of a benchmark that failed to run or was
  // red (its stage row says why, experiment_record.h): the run shows what it
  // measured all the same, the timing flags that made it red among them.
  if (o.bench && bench["cases"].empty() && !o.bench->cases.empty()) {
    for (const auto& c : o.bench->cases) {
      const Decision& d = c.decision;
      bench["cases"].push_back({{"case", c.bench_case.label},
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
                                {"guards", guards_json(d)}});
    }
  }
  if (o.bench && bench["cases"].size() == o.bench->cases.size()) {
    for (std::size_t i = 0; i < o.bench->cases.size(); ++i) {
      const auto& floor = o.bench->cases[i].calibrated_floor;
      add(bench["cases"][i], "calibrated_floor", floor ? J(*floor) : J(nullptr));
    }
  }
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
  add(stages["trace"], "arms", arms);
  add(doc, "sandbox", {{"mode", o.sandbox.on() ? "on" : o.sandbox.mode == SandboxMode::off ? "off" : "unavailable"},
                       {"reason", o.sandbox.reason},
                       {"text", o.sandbox.text()},
                       {"stages", {{"gate", o.gate_result.cases.empty() ? J(nullptr) : J(o.gate_result.sandbox.text())},
                                   {"bench", o.bench ? J(o.bench->sandbox.text()) : J(nullptr)},
                                   {"trace", o.trace ? J(o.trace->sandbox.text()) : J(nullptr)}}}});
  add(doc, "wall_s", o.wall_s);
  add(doc, "executor", o.executor);
  add(doc, "caches", caches_json(o));
  add(doc, "ledger", ledger_path);
  add(doc, "work_dir", o.work_dir.string());
  add(doc, "next", next_steps_json(next_steps(facts_from_outcome(o))));
  return doc;
}

}  // namespace densefeed
