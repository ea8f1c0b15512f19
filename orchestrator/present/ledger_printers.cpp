#include "ledger_printers.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "base_origin.h"
#include "printable.h"

namespace densefeed {
namespace {

// A string field of a ledger document as one line of text (printable.h):
// a manifest's or a harness's text can never draw a line of its own.
std::string line(const nlohmann::ordered_json& v) { return one_line(v.get<std::string>()); }

std::string cell(const nlohmann::ordered_json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return one_line(v.get<std::string>());
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  return v.dump();
}

// RFC 4180: quote a field that holds a comma, quote, CR or LF; double quotes inside.
std::string csv_field(const nlohmann::ordered_json& v) {
  std::string s = v.is_null() ? "" : v.is_string() ? v.get<std::string>() : v.is_number_float() ? fmt::format("{}", v.get<double>()) : v.dump();
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

}  // namespace

void print_ledger_list(std::ostream& out, const nlohmann::ordered_json& rows) {
  out << fmt::format("{:>4}  {:<32} {:<20} {:<11} {:<8} {:<7} {:<21} {}\n", "id", "experiment", "gate", "state", "verdict",
                           "profile", "submitted", "speedups / reason");
  for (const auto& r : rows) {
    std::string tail;
    for (const auto& s : r["speedups"]) {
      // null: a run stopped before the case had a round (or two, for the interval).
      const auto f3 = [](const nlohmann::ordered_json& v) { return v.is_number() ? fmt::format("{:.3f}", v.get<double>()) : "-"; };
      tail += fmt::format("{}{}: {} {}x [{}, {}]", tail.empty() ? "" : "; ", line(s["case"]), line(s["verdict"]), f3(s["speedup"]),
                          f3(s["speedup_lo"]), f3(s["speedup_hi"]));
    }
    if (tail.empty()) tail = line(r["reason"]);
    out << fmt::format("{:>4}  {:<32} {:<20} {:<11} {:<8} {:<7} {:<21} {}\n", r["id"].get<std::int64_t>(), line(r["name"]),
                             line(r["gate"]), line(r["state"]), line(r["verdict"]),
                             r["profile"].is_string() ? line(r["profile"]) : "-", line(r["submitted_at"]), tail);
  }
}

namespace {

// " — reason", or nothing for an empty one.
std::string dash(const std::string& reason) { return reason.empty() ? "" : " — " + one_line(reason); }

// A number the ledger may have left NULL: "-" then, as cell() prints it.
std::string number_cell(const std::optional<double>& v) { return v ? fmt::format("{:.6g}", *v) : "-"; }

// " [tolerance by candidate, exit code 3, out.rel_l2]", or nothing when it did not fail.
std::string failure_text(const Failure& f) {
  if (f.kind == FailureKind::none) return "";
  const std::string who = to_string(f.who);
  return fmt::format(" [{}{}{}{}{}]", to_string(f.kind), who.empty() ? "" : " by " + who,
                     f.signal ? fmt::format(", signal {}", *f.signal) : "", f.exit_code ? fmt::format(", exit code {}", *f.exit_code) : "",
                     f.output.empty() ? "" : fmt::format(", {}{}", one_line(f.output), f.metric.empty() ? "" : "." + one_line(f.metric)));
}

void print_gate_run(std::ostream& out, const GateRunRow& g) {
  out << fmt::format("  gate {} (sha256 {}), profile {}, seed {}: {}{}\n", one_line(g.gate), one_line(g.gate_sha256).substr(0, 16),
                     one_line(g.profile), one_line(g.seed), one_line(g.verdict), dash(g.reason));
  for (const auto& p : g.lock_problems) out << "    lock: " << one_line(p) << "\n";
  for (const auto& c : g.cases) {
    std::string metrics;
    for (const auto& m : c.metrics) {
      // A metric the gate does not bound says nothing the reader can act on.
      if (!std::isfinite(m.bound)) continue;
      metrics += fmt::format(" {}.{}={} (bound {:.1e})", one_line(m.output), one_line(m.metric),
                             std::isnan(m.value) ? "nan" : fmt::format("{:.2e}", m.value), m.bound);
    }
    out << fmt::format("    {:<6} {:<50}{}{}\n", one_line(case_label(c.verdict, c.failure)), one_line(c.label), metrics,
                       metrics.empty() ? " " + one_line(c.reason) : "");
  }
}

void print_bench_cases(std::ostream& out, const ExperimentRecord& e) {
  if (e.bench_cases.empty()) return;
  const auto& origin = e.summary.base_origin;
  out << fmt::format("  base: {} — {}{}\n", one_line(to_string(origin.kind)), one_line(origin.reason),
                     is_agent_base(origin.kind) ? "; a base the agent wrote: promotion needs --accept-agent-base" : "");
  for (const auto& b : e.bench_cases) {
    out << fmt::format("  bench {}: {} — speedup {:.3f}x [{:.3f}, {:.3f}], p = {:.3g}, {} rounds; base {:.4g} {}, candidate {:.4g} {}\n",
                       one_line(b.label), one_line(b.verdict), b.speedup, b.lo, b.hi, b.p_value, b.rounds, b.base_median, one_line(b.unit),
                       b.candidate_median, one_line(b.unit));
    if (b.base_warmup_s && b.candidate_warmup_s) {
      out << fmt::format("    warm-up: base {:.1f} s, candidate {:.1f} s (outside the measurement budget)\n", *b.base_warmup_s,
                         *b.candidate_warmup_s);
    }
    if (b.verdict == "inconclusive") out << "    " << one_line(b.reason) << "\n";
    out << (b.timing == "driver" ? "    timed by the gate's trusted driver\n"
                                 : "    timed by the candidate (promotion needs --accept-candidate-timing)\n");
    for (const auto& f : b.timing_flags) out << fmt::format("    {}: {}\n", one_line(f.value("kind", "")), one_line(f.value("reason", "")));
  }
}

// A stage's line says what happened: "inconclusive" for a bench whose every
// case concluded nothing, "not declared" for an acceptance the manifest has
// none of, "not run" for a stage an ended experiment never reached.
std::string stage_text(const ExperimentRecord& e, const StageOutcome& o) {
  const bool ended = !is_running(e.summary.state);
  if (o.stage == "acceptance" && o.verdict == StageVerdict::pending) {
    return e.has_acceptance ? "not run yet — densefeed promote runs the pre-registered criteria once the experiment is reviewed"
                            : "not declared — the manifest pre-registers no acceptance criteria";
  }
  if (o.stage == "bench" && o.verdict == StageVerdict::green && !e.bench_cases.empty()) {
    std::map<std::string, int> count;
    for (const auto& b : e.bench_cases) ++count[b.verdict];
    std::string counts;
    for (const auto& [verdict, n] : count) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, one_line(verdict));
    if (count["inconclusive"] == static_cast<int>(e.bench_cases.size())) {
      return fmt::format("inconclusive — {} of {} case(s) inconclusive: no difference concluded (the bench ran to its end)",
                         e.bench_cases.size(), e.bench_cases.size());
    }
    return fmt::format("green — {}", counts);
  }
  if (o.verdict == StageVerdict::pending && ended) return "not run" + dash(o.reason);
  return to_string(o.verdict) + failure_text(o.failure) + dash(o.reason);
}

}  // namespace

void print_ledger_show(std::ostream& out, const ExperimentRecord& e) {
  const auto& s = e.summary;
  out << fmt::format("experiment {} '{}' by '{}', submitted {}\n", s.id, one_line(s.name), one_line(e.author), one_line(s.submitted_at));
  out << fmt::format("  manifest {} (sha256 {})\n  hypothesis: {}\n  predicted:  {}\n", one_line(e.manifest_path), one_line(e.manifest_sha256),
                     one_line(e.hypothesis), one_line(e.predicted_effect));
  out << fmt::format("  candidate {} {}   base {} {}\n", one_line(e.candidate.revision), e.candidate.params.dump(), one_line(e.base.revision),
                     e.base.params.dump());
  if (e.parent_id) out << fmt::format("  {} of experiment {}\n", e.step.empty() ? "a step" : one_line(e.step), *e.parent_id);
  if (!e.case_filter.empty()) {
    std::string cases;
    for (const auto& c : e.case_filter) cases += (cases.empty() ? "" : ", ") + one_line(c);
    out << fmt::format("  cases: only those with {} (--case)\n", cases);
  }
  if (!e.children.empty()) {
    std::string kids;
    for (const auto& [id, step] : e.children) kids += fmt::format("{}{} ({})", kids.empty() ? "" : ", ", id, step.empty() ? "-" : one_line(step));
    out << "  replayed or narrowed by: " << kids << "\n";
  }
  for (const auto& n : e.narrowings) {
    out << fmt::format("  narrowed ({}): layer {}: {}\n", one_line(n.recorded_at), one_line(n.layer), one_line(n.conclusion));
  }
  if (s.verdict == "pending" && !is_running(s.state)) {
    // Stopped before a verdict (interrupted, cancelled, rejected): how it ended, not "pending".
    out << fmt::format("  verdict: none ({}{})\n", to_string(s.state),
                       e.events.empty() || e.events.back().detail.empty() ? "" : ": " + one_line(e.events.back().detail));
  } else {
    out << fmt::format("  verdict: {}{}{}\n", one_line(s.verdict), s.verdict_stage.empty() ? "" : " (" + one_line(s.verdict_stage) + ")",
                       dash(s.reason));
  }
  for (const auto& o : s.stages) {
    out << fmt::format("  stage {:<10} {}\n", o.stage, stage_text(e, o));
  }
  if (e.gate_run) print_gate_run(out, *e.gate_run);
  else out << "  gate: no gate run recorded\n";
  print_bench_cases(out, e);
  for (const auto& t : e.trace_findings) {
    out << fmt::format("  trace {} check {} ({}): {} — value {}, bound {}\n", one_line(t.arm), t.index, one_line(t.kind),
                       t.passed ? "passed" : "FAILED", number_cell(t.value), number_cell(t.bound));
  }
  out << "  state: " << to_string(s.state);
  for (const auto& [category, decision] : e.categories.items()) out << fmt::format("; {}: {}", category, cell(decision));
  if (!e.promotion.is_null()) {
    out << fmt::format("; promoted by {} at {}", line(e.promotion["promoted_by"]), line(e.promotion["promoted_at"]));
  }
  out << "\n";
  for (const auto& a : e.acceptance_runs) {
    out << fmt::format("  acceptance: {}{}\n", one_line(a.verdict), dash(a.reason));
    for (const auto& c : a.criteria) {
      out << fmt::format("    {:<6} {:<48} {} {} vs {}\n", c["passed"].get<bool>() ? "pass" : "FAIL", line(c["criterion"]),
                         line(c["statistic"]), cell(c["lhs"]), cell(c["rhs"]));
    }
  }
}

void print_ledger_show_json(std::ostream& out, nlohmann::ordered_json rows, const nlohmann::ordered_json& document) {
  for (const auto& [key, value] : document.items()) {
    if (!rows.contains(key)) rows[key] = value;
  }
  out << rows.dump(2) << "\n";
}

void print_comparison(std::ostream& out, const ExperimentComparison& c, bool json) {
  if (json) {
    out << nlohmann::ordered_json{{"a", c.a}, {"b", c.b}, {"differences", c.differences}}.dump(2) << "\n";
    return;
  }
  out << fmt::format("{:<56} {:>18} {:>18} {:>12}\n", "field (only what differs)", fmt::format("#{}", c.a), fmt::format("#{}", c.b), "delta");
  for (const auto& r : c.differences) {
    std::string delta;
    if (r.contains("delta")) {
      delta = fmt::format("{:+.3g}", r["delta"].get<double>());
      if (r.contains("ratio")) delta += fmt::format(" (x{:.3g})", r["ratio"].get<double>());
    }
    out << fmt::format("{:<56} {:>18} {:>18} {:>12}\n", line(r["field"]), cell(r["a"]), cell(r["b"]), delta);
  }
  if (c.differences.empty()) out << "no differences\n";
}

void print_csv(std::ostream& out, const std::vector<std::string>& columns, const nlohmann::ordered_json& rows) {
  for (std::size_t i = 0; i < columns.size(); ++i) out << (i ? "," : "") << csv_field(columns[i]);
  out << "\r\n";
  for (const auto& r : rows) {
    std::size_t i = 0;
    for (const auto& c : columns) out << (i++ ? "," : "") << csv_field(r[c]);
    out << "\r\n";
  }
}

}  // namespace densefeed
