#include "ledger_printers.h"

#include <cmath>

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
      tail += fmt::format("{}{}: {} {:.3f}x [{:.3f}, {:.3f}]", tail.empty() ? "" : "; ", line(s["case"]),
                          line(s["verdict"]), s["speedup"].get<double>(), s["speedup_lo"].get<double>(),
                          s["speedup_hi"].get<double>());
    }
    if (tail.empty()) tail = line(r["reason"]);
    out << fmt::format("{:>4}  {:<32} {:<20} {:<11} {:<8} {:<7} {:<21} {}\n", r["id"].get<std::int64_t>(), line(r["name"]),
                             line(r["gate"]), line(r["state"]), line(r["verdict"]),
                             r["profile"].is_string() ? line(r["profile"]) : "-", line(r["submitted_at"]), tail);
  }
}

void print_ledger_show(std::ostream& out, const nlohmann::ordered_json& e) {
  out << fmt::format("experiment {} '{}' by '{}', submitted {}\n", e["id"].get<std::int64_t>(), line(e["name"]),
                           line(e["author"]), line(e["submitted_at"]));
  out << fmt::format("  manifest {} (sha256 {})\n  hypothesis: {}\n  predicted:  {}\n", line(e["manifest_path"]),
                           line(e["manifest_sha256"]), line(e["hypothesis"]),
                           line(e["predicted_effect"]));
  out << fmt::format("  candidate {} {}   base {} {}\n", line(e["candidate_revision"]), e["candidate_params"].dump(),
                           line(e["base_revision"]), e["base_params"].dump());
  const auto& r = e["record"];
  out << fmt::format("  verdict: {}{}{}\n", line(r["verdict"]),
                           line(r["verdict_stage"]).empty() ? "" : " (" + line(r["verdict_stage"]) + ")",
                           line(r["reason"]).empty() ? "" : " — " + line(r["reason"]));
  for (const auto& [stage, o] : r["stages"].items()) {
    const auto& f = o["failure"];
    std::string failure;
    if (f["kind"] != "none") {
      failure = fmt::format(" [{}{}{}{}{}]", line(f["kind"]), line(f["who"]).empty() ? "" : " by " + line(f["who"]),
                            f.contains("signal") ? fmt::format(", signal {}", f["signal"].get<int>()) : "",
                            f.contains("exit_code") ? fmt::format(", exit code {}", f["exit_code"].get<int>()) : "",
                            f.contains("output") ? fmt::format(", {}{}", line(f["output"]),
                                                               f.contains("metric") ? "." + line(f["metric"]) : "") : "");
    }
    out << fmt::format("  stage {:<10} {}{}{}\n", stage, line(o["verdict"]), failure,
                             line(o["reason"]).empty() ? "" : " — " + line(o["reason"]));
  }
  const auto& g = e["gate_run"];
  if (g.is_null()) {
    out << "  gate: no gate run recorded\n";
  } else {
    out << fmt::format("  gate {} (sha256 {}), profile {}, seed {}: {}{}\n", line(g["gate"]),
                             line(g["gate_sha256"]).substr(0, 16), line(g["profile"]),
                             line(g["seed"]), line(g["verdict"]),
                             line(g["reason"]).empty() ? "" : " — " + line(g["reason"]));
    for (const auto& p : g["lock_problems"]) out << "    lock: " << line(p) << "\n";
    for (const auto& c : g["cases"]) {
      std::string metrics;
      for (const auto& m : c["metrics"]) {
        // A metric the gate does not bound says nothing the reader can act on.
        if (!m["bound"].is_number() || !std::isfinite(m["bound"].get<double>())) continue;
        metrics += fmt::format(" {}.{}={} (bound {:.1e})", line(m["output"]), line(m["metric"]),
                               m["value"].is_null() ? "nan" : fmt::format("{:.2e}", m["value"].get<double>()), m["bound"].get<double>());
      }
      out << fmt::format("    {:<6} {:<50}{}{}\n", line(c["verdict"]), line(c["case_label"]), metrics,
                               metrics.empty() ? " " + line(c["reason"]) : "");
    }
  }
  if (!e["bench_cases"].empty()) {
    const auto& origin = e["record"]["base_origin"];
    const auto kind = origin.value("kind", std::string("unrecorded"));
    out << fmt::format("  base: {} — {}{}\n", one_line(kind), one_line(origin.value("reason", std::string())),
                             is_agent_base(base_origin_kind_from_string(kind))
                                 ? "; a base the agent wrote: promotion needs --accept-agent-base" : "");
  }
  for (const auto& b : e["bench_cases"]) {
    out << fmt::format("  bench {}: {} — speedup {:.3f}x [{:.3f}, {:.3f}], p = {:.3g}, {} rounds; base {:.4g} {}, candidate {:.4g} {}\n",
                             line(b["case_label"]), line(b["verdict"]), b["speedup"].get<double>(),
                             b["speedup_lo"].get<double>(), b["speedup_hi"].get<double>(), b["p_value"].get<double>(),
                             b["rounds"].get<std::int64_t>(), b["base_median"].get<double>(), line(b["unit"]),
                             b["candidate_median"].get<double>(), line(b["unit"]));
    out << (b.value("timing", "candidate") == "driver" ? "    timed by the gate's trusted driver\n"
                                                              : "    timed by the candidate (promotion needs --accept-candidate-timing)\n");
    for (const auto& f : b.value("timing_flags", nlohmann::ordered_json::array())) {
      out << fmt::format("    {}: {}\n", one_line(f.value("kind", "")), one_line(f.value("reason", "")));
    }
  }
  for (const auto& t : e["trace_findings"]) {
    out << fmt::format("  trace {} check {} ({}): {} — value {}, bound {}\n", line(t["arm"]),
                             t["check_index"].get<std::int64_t>(), line(t["kind"]),
                             t["passed"].get<bool>() ? "passed" : "FAILED", cell(t["value"]), cell(t["bound"]));
  }
  out << "  state: " << line(e["state"]);
  for (const auto& [category, decision] : e["categories"].items()) out << fmt::format("; {}: {}", category, cell(decision));
  if (!e["promotion"].is_null()) {
    out << fmt::format("; promoted by {} at {}", line(e["promotion"]["promoted_by"]),
                             line(e["promotion"]["promoted_at"]));
  }
  out << "\n";
  for (const auto& a : e["acceptance_runs"]) {
    out << fmt::format("  acceptance: {}{}\n", line(a["verdict"]),
                             line(a["reason"]).empty() ? "" : " — " + line(a["reason"]));
    for (const auto& c : a["criteria"]) {
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
