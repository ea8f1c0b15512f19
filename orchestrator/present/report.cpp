#include "report.h"


#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error_trend.h"
#include "experiment_document.h"
#include "experiment_summary.h"
#include "next_steps.h"
#include "shell_words.h"
#include "printable.h"
#include "report_parts.h"
#include "trace_report.h"
#include "wrong_candidates.h"

namespace densefeed {

using report_parts::caches_json;
using report_parts::printable;
using report_parts::sci;
using report_parts::worst_text;

namespace {

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

// One line for the whole run: a sandbox that could not start is said once,
// not per case.
std::string sandbox_line(const SandboxStatus& s) {
  switch (s.mode) {
    case SandboxMode::on: return "on (bwrap: candidate and base commands see a read-only filesystem, no network)";
    case SandboxMode::off: return fmt::format("OFF ({}): candidate and base commands ran unconfined", s.reason);
    case SandboxMode::unavailable:
      return fmt::format("WARNING: unavailable, candidate and base commands ran unconfined: {}", s.reason);
  }
  return "?";
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

// The experiment, its hypothesis and its two arms.
std::string experiment_lines(const ExperimentOutcome& o) {
  const Manifest& m = o.manifest;
  std::string s;
  s += fmt::format("experiment {} '{}' — gate {} (profile {}, seed {})\n", o.experiment_id, printable(m.name), printable(m.gate), printable(o.profile), o.seed);
  s += fmt::format("  hypothesis: {}\n  predicted:  {}\n", printable(m.hypothesis), printable(m.predicted_effect));
  s += fmt::format("  candidate: {} {}   base: {} {}\n", printable(m.candidate.revision), o.candidate_params.dump(), printable(m.base.revision),
                   o.base_params.dump());
  return s;
}

// The gate's verdict, its lock, where the gates came from, the sandbox.
std::string gate_header_lines(const ExperimentOutcome& o) {
  std::string s;
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
  return s;
}

// Harness sessions: how many, and their memory from the first request to the last.
std::string session_lines(const GateResult& g) {
  std::string s;
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
  return s;
}

std::string cache_lines(const ExperimentOutcome& o) {
  std::string s;
  std::vector<std::string> used;
  for (const auto& c : caches_json(o)) {
    const auto bytes = c["bytes"].get<std::uintmax_t>();
    if (bytes > 0) used.push_back(fmt::format("{} {:.1f} MiB ({})", c["arm"].get<std::string>(), bytes / 1048576.0, c["path"].get<std::string>()));
  }
  if (!used.empty()) s += fmt::format("  compile caches: {}\n", fmt::join(used, "; "));
  return s;
}

// Where the cases ran, when not on this machine.
std::string executor_lines(const ExperimentOutcome& o) {
  const GateResult& g = o.gate_result;
  std::string s;
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
    s += fmt::format("  executor: {}: {}; candidates ran on {}{}\n", o.executor,
                     o.executor == "slurm-steps" ? "every process an srun step of this allocation" : "each arm's cases a job array",
                     where.empty() ? std::string("-") : fmt::format("{}", fmt::join(where, ", ")),
                     gpus.empty() ? "" : fmt::format(", GPU(s) {}", fmt::join(gpus, ",")));
  }
  return s;
}

// A column pair (value, bound) per metric some output's tolerance bounds,
// in the tolerance's order; a metric no output bounds is left out, and
// an output that does not bound a shown metric has '-' there.
std::vector<std::string> bounded_metrics(const GateResult& g) {
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
  return metrics;
}

// A row per output of each case (a case without outputs: its reason).
std::string case_table_lines(const GateResult& g) {
  std::string s;
  if (g.cases.empty()) return s;
  std::size_t width = 4;
  for (const auto& c : g.cases) width = std::max(width, c.gate_case.label.size());
  const std::vector<std::string> metrics = bounded_metrics(g);
  s += fmt::format("  {:<{}} {:<7} {:<12}", "case", width, "verdict", "output");
  for (const auto& m : metrics) s += fmt::format(" {:>11} {:>9}", m, "bound");
  s += "\n";
  for (const auto& c : g.cases) {
    if (c.outputs.empty()) {
      s += fmt::format("  {:<{}} {:<7} {}\n", c.gate_case.label, width, case_label(to_string(c.verdict), c.failure), printable(c.reason));
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
  return s;
}

// Each case that is not green: why, its worst elements, dropped output, its log's tail.
std::string not_green_lines(const GateResult& g) {
  std::string s;
  bool any_failed = false;
  for (const auto& c : g.cases) {
    if (c.verdict == Verdict::green) continue;
    if (!any_failed) s += "  not green:\n";
    any_failed = true;
    s += fmt::format("    [{}] {}: {}\n", case_label(to_string(c.verdict), c.failure), c.gate_case.label, printable(c.reason));
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
  return s;
}

// Wrong candidates the bounds accept, trend bounds and error trend tables.
std::string gate_finding_lines(const ExperimentOutcome& o) {
  const GateResult& g = o.gate_result;
  std::string s;
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
  return s;
}

std::string bench_lines(const ExperimentOutcome& o) {
  std::string s;
  s += "\nbench: ";
  if (!o.bench) {
    s += "not run (" + (o.bench_skipped.empty() ? std::string("the run ended before it") : printable(o.bench_skipped)) + ")\n";
  } else if (o.bench->verdict != Verdict::green) {
    s += fmt::format("{} — {}\n", to_string(o.bench->verdict), printable(o.bench->reason));
    for (const auto& c : o.bench->cases) {
      for (const auto& f : c.flags) s += fmt::format("  {}: {}: {}\n", c.bench_case.label, to_string(f.kind), printable(f.reason));
    }
  } else {
    if (o.bench->interrupted) s += "interrupted — " + printable(o.bench->reason) + "; what it measured: ";
    s += "candidate vs base, interleaved rounds (speedup = base time / candidate time)";
    if (!o.bench->placement.empty() && o.bench->placement != "local") s += "; every round in " + o.bench->placement;
    s += "\n";
    // Who wrote the base: the record's (judged with the ledger's promotions).
    const BaseOrigin& origin = o.record ? o.record->summary.base_origin : o.base_origin;
    s += fmt::format("  base: {} — {}{}\n", to_string(origin.kind), printable(origin.reason),
                     is_agent_base(origin.kind) ? "; a base the agent wrote: promotion needs --accept-agent-base" : "");
    for (const auto& c : o.bench->cases) {
      const Decision& d = c.decision;
      // Fewer than two rounds (a run stopped early) have no interval.
      const std::string ci = std::isfinite(d.speedup_ci.lo) && std::isfinite(d.speedup_ci.hi)
                                 ? fmt::format("{:.1f}% CI [{:.3f}, {:.3f}], p = {:.3g}", 100 * (1 - d.alpha_at_look), d.speedup_ci.lo,
                                               d.speedup_ci.hi, d.p_value)
                                 : std::string("no interval yet");
      s += fmt::format("  {}: {} — speedup {:.3f}x, {}, {} round{}, threshold {:.2f}% ({})\n", c.bench_case.label,
                       to_string(d.verdict), d.speedup, ci, c.base.size(), c.base.size() == 1 ? "" : "s", 100 * c.threshold,
                       threshold_source(c));
      s += fmt::format("    base median {:.4g} {} (spread {:.1f}%), candidate median {:.4g} {} (spread {:.1f}%)\n",
                       d.base_median_ms, c.unit, 100 * d.base_relative_spread, d.candidate_median_ms, c.unit,
                       100 * d.candidate_relative_spread);
      s += fmt::format("    warm-up: base {:.1f} s, candidate {:.1f} s (each arm's first call, outside the measurement budget of "
                       "{:g} s)\n",
                       c.base_warmup_s, c.candidate_warmup_s, c.budget_s);
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
  return s;
}

std::string trace_lines(const ExperimentOutcome& o) {
  std::string s;
  s += "\ntrace: ";
  if (!o.trace) {
    s += "not run (" + (o.trace_skipped.empty() ? std::string("the run ended before it") : printable(o.trace_skipped)) + ")\n";
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
      // What the trace readers repaired: a check over a repaired trace is read with that in mind.
      for (const auto& w : arm.report.warnings) {
        s += fmt::format("  {} trace repaired: {} x{}{}{}{}\n", arm.arm, printable(w.kind), w.count,
                         w.file.empty() ? "" : " in " + printable(w.file), w.first.empty() ? "" : " (first " + printable(w.first) + ")",
                         w.message.empty() ? "" : ": " + printable(w.message));
      }
    }
  }
  return s;
}

// `next`, then the verdict and what decided it.
std::string closing_lines(const ExperimentOutcome& o) {
  std::string s;
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
  std::string verdict = o.record ? o.record->summary.verdict : to_string(o.verdict);
  std::string decided_by = o.record ? (o.record->summary.verdict_stage.empty() ? "every stage" : o.record->summary.verdict_stage) : "gate";
  // A run stopped before its verdict has none: say how it ended, not "pending".
  if (o.record && verdict == "pending" && !is_running(o.record->summary.state)) {
    verdict = "none";
    decided_by = to_string(o.record->summary.state);
    if (!o.record->events.empty() && !o.record->events.back().detail.empty()) decided_by += ": " + printable(o.record->events.back().detail);
  }
  s += fmt::format("\nverdict: {} ({}){}   (experiment {}, {:.1f} s{})\n", verdict, decided_by, bench_summary, o.experiment_id,
                   o.wall_s, have_logs ? ", harness logs in " + o.work_dir.string() : "");
  return s;
}

}  // namespace

std::string render_next_steps_text(const nlohmann::ordered_json& next) {
  if (!next.is_array() || next.empty()) return "";
  std::string s = "\nnext (cheapest first):\n";
  for (const auto& step : next) {
    s += fmt::format("  - [{}] {}\n    why: {}\n", step["kind"].get<std::string>(), printable(step["suggestion"].get<std::string>()),
                     printable(step["why"].get<std::string>()));
    // The argv as a shell line (shell_words.h), each argument shown printable().
    if (step.contains("command") && step["command"].is_array() && !step["command"].empty()) {
      std::vector<std::string> words;
      for (const auto& a : step["command"]) words.push_back(printable(a.get<std::string>()));
      s += "    run: " + shell_line(words) + "\n";
    }
  }
  return s;
}

std::string render_text_header(const ExperimentOutcome& o) { return experiment_lines(o); }

std::string render_text_report(const ExperimentOutcome& o, bool header) {
  const GateResult& g = o.gate_result;
  std::string s = header ? experiment_lines(o) : std::string();
  s += gate_header_lines(o);
  s += session_lines(g);
  s += cache_lines(o);
  s += executor_lines(o);
  s += case_table_lines(g);
  s += not_green_lines(g);
  s += gate_finding_lines(o);
  s += bench_lines(o);
  s += trace_lines(o);
  s += closing_lines(o);
  return s;
}

}  // namespace densefeed
