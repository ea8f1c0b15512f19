// ledger list|show|compare|export|verify and audit: what engineers and CI
// read from the ledger. All of them open it read-only except that an old
// ledger is migrated on open.
#include <charconv>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>

#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <fmt/format.h>

#include "cli.h"
#include "error.h"
#include "gate_lock.h"
#include "gate_spec.h"
#include "experiment_document.h"
#include "ledger.h"
#include "pending_results.h"
#include "printable.h"
#include "workspace.h"

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

void print_ledger_list(const nlohmann::ordered_json& rows) {
  std::cout << fmt::format("{:>4}  {:<32} {:<20} {:<11} {:<8} {:<7} {:<21} {}\n", "id", "experiment", "gate", "state", "verdict",
                           "profile", "submitted", "speedups / reason");
  for (const auto& r : rows) {
    std::string tail;
    for (const auto& s : r["speedups"]) {
      tail += fmt::format("{}{}: {} {:.3f}x [{:.3f}, {:.3f}]", tail.empty() ? "" : "; ", line(s["case"]),
                          line(s["verdict"]), s["speedup"].get<double>(), s["speedup_lo"].get<double>(),
                          s["speedup_hi"].get<double>());
    }
    if (tail.empty()) tail = line(r["reason"]);
    std::cout << fmt::format("{:>4}  {:<32} {:<20} {:<11} {:<8} {:<7} {:<21} {}\n", r["id"].get<std::int64_t>(), line(r["name"]),
                             line(r["gate"]), line(r["state"]), line(r["verdict"]),
                             r["profile"].is_string() ? line(r["profile"]) : "-", line(r["submitted_at"]), tail);
  }
}

void print_ledger_show(const nlohmann::ordered_json& e) {
  std::cout << fmt::format("experiment {} '{}' by '{}', submitted {}\n", e["id"].get<std::int64_t>(), line(e["name"]),
                           line(e["author"]), line(e["submitted_at"]));
  std::cout << fmt::format("  manifest {} (sha256 {})\n  hypothesis: {}\n  predicted:  {}\n", line(e["manifest_path"]),
                           line(e["manifest_sha256"]), line(e["hypothesis"]),
                           line(e["predicted_effect"]));
  std::cout << fmt::format("  candidate {} {}   base {} {}\n", line(e["candidate_revision"]), e["candidate_params"].dump(),
                           line(e["base_revision"]), e["base_params"].dump());
  const auto& r = e["record"];
  std::cout << fmt::format("  verdict: {}{}{}\n", line(r["verdict"]),
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
    std::cout << fmt::format("  stage {:<10} {}{}{}\n", stage, line(o["verdict"]), failure,
                             line(o["reason"]).empty() ? "" : " — " + line(o["reason"]));
  }
  const auto& g = e["gate_run"];
  if (g.is_null()) {
    std::cout << "  gate: no gate run recorded\n";
  } else {
    std::cout << fmt::format("  gate {} (sha256 {}), profile {}, seed {}: {}{}\n", line(g["gate"]),
                             line(g["gate_sha256"]).substr(0, 16), line(g["profile"]),
                             line(g["seed"]), line(g["verdict"]),
                             line(g["reason"]).empty() ? "" : " — " + line(g["reason"]));
    for (const auto& p : g["lock_problems"]) std::cout << "    lock: " << line(p) << "\n";
    for (const auto& c : g["cases"]) {
      std::string metrics;
      for (const auto& m : c["metrics"]) {
        // A metric the gate does not bound says nothing the reader can act on.
        if (!m["bound"].is_number() || !std::isfinite(m["bound"].get<double>())) continue;
        metrics += fmt::format(" {}.{}={} (bound {:.1e})", line(m["output"]), line(m["metric"]),
                               m["value"].is_null() ? "nan" : fmt::format("{:.2e}", m["value"].get<double>()), m["bound"].get<double>());
      }
      std::cout << fmt::format("    {:<6} {:<50}{}{}\n", line(c["verdict"]), line(c["case_label"]), metrics,
                               metrics.empty() ? " " + line(c["reason"]) : "");
    }
  }
  if (!e["bench_cases"].empty()) {
    const auto& origin = e["record"]["base_origin"];
    const auto kind = origin.value("kind", std::string("unrecorded"));
    std::cout << fmt::format("  base: {} — {}{}\n", one_line(kind), one_line(origin.value("reason", std::string())),
                             is_agent_base(base_origin_kind_from_string(kind))
                                 ? "; a base the agent wrote: promotion needs --accept-agent-base" : "");
  }
  for (const auto& b : e["bench_cases"]) {
    std::cout << fmt::format("  bench {}: {} — speedup {:.3f}x [{:.3f}, {:.3f}], p = {:.3g}, {} rounds; base {:.4g} {}, candidate {:.4g} {}\n",
                             line(b["case_label"]), line(b["verdict"]), b["speedup"].get<double>(),
                             b["speedup_lo"].get<double>(), b["speedup_hi"].get<double>(), b["p_value"].get<double>(),
                             b["rounds"].get<std::int64_t>(), b["base_median"].get<double>(), line(b["unit"]),
                             b["candidate_median"].get<double>(), line(b["unit"]));
    std::cout << (b.value("timing", "candidate") == "driver" ? "    timed by the gate's trusted driver\n"
                                                              : "    timed by the candidate (promotion needs --accept-candidate-timing)\n");
    for (const auto& f : b.value("timing_flags", nlohmann::ordered_json::array())) {
      std::cout << fmt::format("    {}: {}\n", one_line(f.value("kind", "")), one_line(f.value("reason", "")));
    }
  }
  for (const auto& t : e["trace_findings"]) {
    std::cout << fmt::format("  trace {} check {} ({}): {} — value {}, bound {}\n", line(t["arm"]),
                             t["check_index"].get<std::int64_t>(), line(t["kind"]),
                             t["passed"].get<bool>() ? "passed" : "FAILED", cell(t["value"]), cell(t["bound"]));
  }
  std::cout << "  state: " << line(e["state"]);
  for (const auto& [category, decision] : e["categories"].items()) std::cout << fmt::format("; {}: {}", category, cell(decision));
  if (!e["promotion"].is_null()) {
    std::cout << fmt::format("; promoted by {} at {}", line(e["promotion"]["promoted_by"]),
                             line(e["promotion"]["promoted_at"]));
  }
  std::cout << "\n";
  for (const auto& a : e["acceptance_runs"]) {
    std::cout << fmt::format("  acceptance: {}{}\n", line(a["verdict"]),
                             line(a["reason"]).empty() ? "" : " — " + line(a["reason"]));
    for (const auto& c : a["criteria"]) {
      std::cout << fmt::format("    {:<6} {:<48} {} {} vs {}\n", c["passed"].get<bool>() ? "pass" : "FAIL", line(c["criterion"]),
                               line(c["statistic"]), cell(c["lhs"]), cell(c["rhs"]));
    }
  }
}

// What two experiments are compared on, as flat "path" -> value pairs.
void flatten(const nlohmann::ordered_json& v, const std::string& path, std::map<std::string, nlohmann::ordered_json>& out) {
  if (v.is_object()) {
    for (const auto& [k, x] : v.items()) flatten(x, path.empty() ? k : path + "." + k, out);
  } else {
    out[path] = v;
  }
}

nlohmann::ordered_json comparable(const nlohmann::ordered_json& e) {
  nlohmann::ordered_json c;
  for (const char* k : {"name", "gate", "author", "candidate_revision", "candidate_sha", "base_revision", "base_sha",
                        "worktree_dirty", "state"}) {
    c["experiment"][k] = e[k];
  }
  c["experiment"]["candidate_params"] = e["candidate_params"];
  c["experiment"]["base_params"] = e["base_params"];
  c["experiment"]["risk"] = e["risk"].dump();
  if (!e["gate_run"].is_null()) {
    const auto& g = e["gate_run"];
    for (const char* k : {"verdict", "reason", "profile", "seed", "gate_sha256"}) c["gate"][k] = g[k];
    for (const auto& cs : g["cases"]) {
      auto& row = c["gate"]["cases"][cs["case_label"].get<std::string>()];
      row["verdict"] = cs["verdict"];
      for (const auto& m : cs["metrics"]) row[m["output"].get<std::string>() + "." + m["metric"].get<std::string>()] = m["value"];
    }
  }
  for (const auto& b : e["bench_cases"]) {
    auto& row = c["bench"][b["case_label"].get<std::string>()];
    for (const char* k : {"verdict", "speedup", "speedup_lo", "speedup_hi", "base_median", "candidate_median"}) row[k] = b[k];
  }
  for (const auto& t : e["trace_findings"]) {
    auto& row = c["trace"][fmt::format("{}[{}]", t["arm"].get<std::string>(), t["check_index"].get<std::int64_t>())];
    row["kind"] = t["kind"];
    row["passed"] = t["passed"];
    row["value"] = t["value"];
  }
  if (!e["acceptance_runs"].empty()) {
    const auto& a = e["acceptance_runs"].back();
    c["acceptance"]["verdict"] = a["verdict"];
    for (const auto& k : a["criteria"]) c["acceptance"][k["criterion"].get<std::string>()] = k["lhs"];
  }
  return c;
}

}  // namespace

// A readable ledger for ledger list/show/compare/export and status: its
// schema objects are checked on open (Ledger), and its chain here: a broken
// chain is refused as bad input (exit 2), naming the first broken link.
void require_intact_chain(const Ledger& ledger) {
  const ChainCheck c = ledger.verify();
  if (c.ok) return;
  throw InputError(ledger.path().string(), {}, "",
                   fmt::format("the hash chain is broken at link {} ({} row {}{}: {}); densefeed will not read an edited ledger "
                               "(densefeed audit says more)", c.first_broken_seq, c.table, c.row_id,
                               c.experiment_id ? fmt::format(", experiment {}", c.experiment_id) : "", c.problem));
}

namespace {

// --since: a UTC date or time, YYYY-MM-DD[THH:MM[:SS]][Z], with real ranges.
void check_since(const std::string& text) {
  const auto bad = [&] {
    throw InputError("command line", {}, "--since",
                     "expected a UTC date or time such as 2026-11-29 or 2026-11-29T20:00 (YYYY-MM-DD[THH:MM[:SS]]), got '" + text + "'");
  };
  std::string t = text;
  if (!t.empty() && t.back() == 'Z') t.pop_back();
  const auto digits = [&](std::size_t at, std::size_t n, int lo, int hi) {
    if (t.size() < at + n) bad();
    int v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(t[i]))) bad();
      v = v * 10 + (t[i] - '0');
    }
    if (v < lo || v > hi) bad();
    return v;
  };
  if (t.size() != 10 && t.size() != 16 && t.size() != 19) bad();
  const int year = digits(0, 4, 1970, 9999);
  if (t[4] != '-' || t[7] != '-') bad();
  const int month = digits(5, 2, 1, 12);
  static const int days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const int day = digits(8, 2, 1, days[month - 1]);
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (month == 2 && day == 29 && !leap) bad();
  if (t.size() > 10) {
    if (t[10] != 'T' || t[13] != ':') bad();
    digits(11, 2, 0, 23);
    digits(14, 2, 0, 59);
    if (t.size() == 19) {
      if (t[16] != ':') bad();
      digits(17, 2, 0, 59);
    }
  }
}

// --verdict: an overall verdict or a state.
void check_verdict(const std::string& text) {
  static const std::vector<std::string> allowed = {"green", "red", "error", "unknown", "pending", "queued", "started", "requeued",
                                                   "interrupted", "finished", "cancel_requested", "cancelled", "rejected", "recorded"};
  for (const auto& a : allowed) {
    if (a == text) return;
  }
  throw InputError("command line", {}, "--verdict",
                   fmt::format("'{}' is neither a verdict (green, red, error, unknown, pending) nor a state (queued, started, "
                               "requeued, interrupted, finished, cancel_requested, cancelled, rejected)", text));
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

std::vector<CliVerb> add_ledger_verbs(CLI::App& app, CliContext& ctx) {
  std::vector<CliVerb> verbs;
  auto* ledger_cmd = app.add_subcommand("ledger", "read the ledger");
  ledger_cmd->require_subcommand(1);

  auto* list = ledger_cmd->add_subcommand("list", "every recorded experiment with its state and verdicts");
  auto filter = std::make_shared<Ledger::ListFilter>();
  list->add_option("--gate", filter->gate, "only this gate");
  list->add_option("--verdict", filter->verdict, "only this overall verdict (green, red, error, unknown, pending) or state (queued, started, finished, interrupted, cancelled, ...)");
  list->add_option("--since", filter->since, "only submitted at or after this UTC time (ISO 8601 prefix, e.g. 2026-11-29 or 2026-11-29T20:00)");
  add_ledger_and_json(list, ctx);
  verbs.push_back({list, [&ctx, filter] {
                     if (!filter->since.empty()) check_since(filter->since);
                     if (!filter->verdict.empty()) check_verdict(filter->verdict);
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     require_intact_chain(ledger);
                     const auto rows = ledger.list(*filter);
                     if (ctx.json) std::cout << rows.dump(2) << "\n";
                     else print_ledger_list(rows);
                     return 0;
                   }});

  auto* show = ledger_cmd->add_subcommand("show", "everything recorded for one experiment");
  auto show_id = std::make_shared<std::string>();
  show->add_option("ID", *show_id, "experiment id")->required();
  add_ledger_and_json(show, ctx);
  verbs.push_back({show, [&ctx, show_id] {
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     require_intact_chain(ledger);
                     const auto id = parse_experiment_id(*show_id);
                     auto doc = ledger.show(id);
                     if (ctx.json) {
                       // The rows as recorded, and beside them the verdict document
                       // that status and run print (experiment_document.h): where the
                       // two share a key they say the same (OneRecord test).
                       const auto gate = locked_gate_for_next(ctx, doc["gate"].get<std::string>());
                       const auto document = experiment_document(ledger.record(id), gate ? &*gate : nullptr, ctx.ledger_path());
                       for (const auto& [key, value] : document.items()) {
                         if (!doc.contains(key)) doc[key] = value;
                       }
                       std::cout << doc.dump(2) << "\n";
                     } else {
                       print_ledger_show(doc);
                     }
                     return 0;
                   }});

  auto* compare = ledger_cmd->add_subcommand("compare", "two experiments side by side: only what differs, with deltas");
  auto ids = std::make_shared<std::pair<std::string, std::string>>();
  compare->add_option("ID1", ids->first, "experiment id")->required();
  compare->add_option("ID2", ids->second, "experiment id")->required();
  add_ledger_and_json(compare, ctx);
  verbs.push_back({compare, [&ctx, ids] {
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     require_intact_chain(ledger);
                     const auto a_id = parse_experiment_id(ids->first), b_id = parse_experiment_id(ids->second);
                     std::map<std::string, nlohmann::ordered_json> a, b;
                     flatten(comparable(ledger.show(a_id)), "", a);
                     flatten(comparable(ledger.show(b_id)), "", b);
                     std::map<std::string, std::pair<nlohmann::ordered_json, nlohmann::ordered_json>> keys;
                     for (const auto& [k, v] : a) keys[k].first = v;
                     for (const auto& [k, v] : b) keys[k].second = v;
                     nlohmann::ordered_json rows = nlohmann::ordered_json::array();
                     for (const auto& [k, v] : keys) {
                       if (v.first == v.second) continue;
                       nlohmann::ordered_json row = {{"field", k}, {"a", v.first}, {"b", v.second}};
                       if (v.first.is_number() && v.second.is_number()) {
                         const double x = v.first.get<double>(), y = v.second.get<double>();
                         row["delta"] = y - x;
                         if (x != 0) row["ratio"] = y / x;
                       }
                       rows.push_back(row);
                     }
                     if (ctx.json) {
                       std::cout << nlohmann::ordered_json{{"a", a_id}, {"b", b_id}, {"differences", rows}}.dump(2) << "\n";
                       return 0;
                     }
                     std::cout << fmt::format("{:<56} {:>18} {:>18} {:>12}\n", "field (only what differs)", fmt::format("#{}", a_id),
                                              fmt::format("#{}", b_id), "delta");
                     for (const auto& r : rows) {
                       std::string delta;
                       if (r.contains("delta")) {
                         delta = fmt::format("{:+.3g}", r["delta"].get<double>());
                         if (r.contains("ratio")) delta += fmt::format(" (x{:.3g})", r["ratio"].get<double>());
                       }
                       std::cout << fmt::format("{:<56} {:>18} {:>18} {:>12}\n", line(r["field"]), cell(r["a"]),
                                                cell(r["b"]), delta);
                     }
                     if (rows.empty()) std::cout << "no differences\n";
                     return 0;
                   }});

  auto* exp = ledger_cmd->add_subcommand("export", "the ledger's tables as JSON ({table: [rows]}), or one table or view as CSV");
  auto format = std::make_shared<std::string>("json");
  auto table = std::make_shared<std::string>("experiment_verdicts");
  exp->add_option("--format", *format, "json or csv")->check(CLI::IsMember({"json", "csv"}))->capture_default_str();
  exp->add_option("--table", *table, "csv: the table or view to write")->capture_default_str();
  exp->add_option("--ledger", ctx.ledger_text, "SQLite ledger (default ROOT/.densefeed/ledger.db)");
  verbs.push_back({exp, [&ctx, format, table] {
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     if (*format == "json") {
                       std::cout << ledger.export_tables().dump(2) << "\n";
                       return 0;
                     }
                     const auto rows = ledger.rows(*table);
                     std::vector<std::string> columns = ledger.columns(*table);
                     for (std::size_t i = 0; i < columns.size(); ++i) std::cout << (i ? "," : "") << csv_field(columns[i]);
                     std::cout << "\r\n";
                     for (const auto& r : rows) {
                       std::size_t i = 0;
                       for (const auto& c : columns) std::cout << (i++ ? "," : "") << csv_field(r[c]);
                       std::cout << "\r\n";
                     }
                     return 0;
                   }});

  auto* verify = ledger_cmd->add_subcommand("verify", "recompute the hash chain of every recorded row; report the first broken link");
  add_ledger_and_json(verify, ctx);
  verbs.push_back({verify, [&ctx] {
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::audit);
                     const ChainCheck c = ledger.verify();
                     if (ctx.json) {
                       nlohmann::ordered_json doc = {{"ok", c.ok}, {"links", c.links}};
                       if (!c.ok) {
                         doc["first_broken"] = {{"seq", c.first_broken_seq}, {"table", c.table}, {"row_id", c.row_id},
                                                {"experiment_id", c.experiment_id}, {"problem", c.problem}};
                       }
                       std::cout << doc.dump(2) << "\n";
                     } else if (c.ok) {
                       std::cout << fmt::format("{}: hash chain intact ({} links)\n", ctx.ledger_path().string(), c.links);
                     } else {
                       std::cout << fmt::format("{}: hash chain BROKEN at link {}: {} row {}{}: {}\n", ctx.ledger_path().string(),
                                                c.first_broken_seq, c.table, c.row_id,
                                                c.experiment_id ? fmt::format(" (experiment {})", c.experiment_id) : "", c.problem);
                     }
                     return c.ok ? 0 : 1;
                   }});

  auto* head = ledger_cmd->add_subcommand("head", "the chain's head (SEQ:HASH of its last link): keep it outside the ledger, then 'audit --expect-head'");
  add_ledger_and_json(head, ctx);
  verbs.push_back({head, [&ctx] {
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     require_intact_chain(ledger);
                     const ChainHead h = ledger.head();
                     if (ctx.json) {
                       std::cout << nlohmann::ordered_json{{"head", h.text()}, {"seq", h.seq}, {"hash", h.hash},
                                                           {"key_fingerprint", ledger.key_fingerprint()}}.dump(2) << "\n";
                     } else {
                       std::cout << h.text() << "\n";
                     }
                     return 0;
                   }});

  auto* backup = ledger_cmd->add_subcommand("backup", "copy the ledger to FILE with SQLite's online backup API (consistent while workers write)");
  auto backup_file = std::make_shared<std::string>();
  backup->add_option("FILE", *backup_file, "where the copy goes (must not exist)")->required();
  add_ledger_and_json(backup, ctx);
  verbs.push_back({backup, [&ctx, backup_file] {
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     require_intact_chain(ledger);
                     const ChainHead h = ledger.head();
                     ledger.backup(*backup_file);
                     if (ctx.json) std::cout << nlohmann::ordered_json{{"backup", *backup_file}, {"head", h.text()}}.dump(2) << "\n";
                     else std::cout << fmt::format("{}: backup of {} at head {}\n", *backup_file, ctx.ledger_path().string(), h.text());
                     return 0;
                   }});

  auto* recover = ledger_cmd->add_subcommand(
      "recover", "record the results a run kept in its run folder when the ledger's write lock was not free or it was killed while waiting");
  add_ledger_and_json(recover, ctx);
  verbs.push_back({recover, [&ctx] {
                     Ledger ledger(ctx.ledger_path());
                     require_intact_chain(ledger);
                     const auto runs = Workspace{ctx.ledger_path()}.runs();
                     const auto recovered = recover_pending(ledger, runs);
                     nlohmann::ordered_json doc = {{"ledger", ctx.ledger_path().string()}, {"recovered", nlohmann::ordered_json::array()}};
                     bool refused = false;
                     for (const auto& r : recovered) {
                       nlohmann::ordered_json one = {{"experiment_id", r.experiment_id}, {"file", r.file}, {"outcome", r.outcome},
                                                     {"verdict", r.verdict}, {"cases", r.cases}};
                       if (r.refusal != PendingRefusal::none) {
                         refused = true;
                         one["refusal"] = to_string(r.refusal);
                         one["reason"] = r.reason;
                       }
                       doc["recovered"].push_back(one);
                     }
                     if (ctx.json) {
                       std::cout << doc.dump(2) << "\n";
                     } else if (recovered.empty()) {
                       std::cout << fmt::format("nothing to recover under {}\n", runs.string());
                     } else {
                       for (const auto& r : recovered) {
                         if (r.refusal != PendingRefusal::none) {
                           std::cout << fmt::format("experiment {}: REFUSED ({}): {}; the file is kept — {}\n", r.experiment_id,
                                                    to_string(r.refusal), r.reason, r.file);
                           continue;
                         }
                         std::cout << fmt::format("experiment {}: {} ({} case(s)), verdict {} — from {}\n", r.experiment_id, r.outcome,
                                                  r.cases, r.verdict, one_line(r.file));
                       }
                     }
                     return refused ? 1 : 0;
                   }});

  auto* audit = app.add_subcommand("audit", "CI: exit 1 if a result lacks a green gate, a gate or frozen file differs from gates/gates.lock, the hash chain is broken, or a tamper event is unacknowledged");
  // A person's verb: what densefeed found altered (and replaced) was seen.
  auto* acknowledge = audit->add_subcommand("acknowledge", "a person acknowledges a tamper event (an altered export or cached build densefeed replaced)");
  auto ack_id = std::make_shared<std::string>();
  auto ack_by = std::make_shared<std::string>();
  auto ack_note = std::make_shared<std::string>();
  acknowledge->add_option("ID", *ack_id, "the tamper event's id (densefeed audit names it)")->required();
  acknowledge->add_option("--by", *ack_by, "who acknowledges it")->required();
  acknowledge->add_option("--note", *ack_note, "what was found out about it")->required();
  add_ledger_and_json(acknowledge, ctx);
  verbs.push_back({acknowledge, [&ctx, ack_id, ack_by, ack_note] {
                     const std::int64_t id = parse_experiment_id(*ack_id);
                     Ledger ledger(ctx.ledger_path());
                     require_intact_chain(ledger);
                     ledger.acknowledge_tamper(id, *ack_by, *ack_note);
                     if (ctx.json) {
                       std::cout << nlohmann::ordered_json{{"tamper_event", id}, {"acknowledged_by", *ack_by}, {"note", *ack_note}}.dump(2) << "\n";
                     } else {
                       std::cout << fmt::format("tamper event {}: acknowledged by {}\n", id, *ack_by);
                     }
                     return 0;
                   }});
  auto junit = std::make_shared<std::string>();
  auto allow_unsandboxed = std::make_shared<bool>(false);
  auto allow_untrusted_gates = std::make_shared<bool>(false);
  auto expect_head = std::make_shared<std::string>();
  auto head_file = std::make_shared<std::string>();
  audit->add_option("--junit", *junit, "also write JUnit XML here");
  audit->add_flag("--allow-untrusted-gates", *allow_untrusted_gates,
                  "accept green results whose gates came from another ref than the trusted one");
  audit->add_flag("--allow-unsandboxed", *allow_unsandboxed,
                  "accept green results whose untrusted commands ran without the sandbox (--no-sandbox)");
  audit->add_option("--expect-head", *expect_head, "fail unless the chain still holds this head (SEQ:HASH from 'ledger head')");
  audit->add_option("--head-file", *head_file, "like --expect-head with the head kept in FILE (when it exists); on success the current head is written there");
  add_ledger_and_json(audit, ctx);
  verbs.push_back({audit, [&ctx, junit, allow_unsandboxed, allow_untrusted_gates, expect_head, head_file] {
                     struct Check {
                       std::string name;
                       std::vector<std::string> failures;
                     };
                     std::vector<Check> checks;
                     std::vector<ChainHead> expected;
                     if (!expect_head->empty()) expected.push_back(ChainHead::parse(*expect_head, "--expect-head"));
                     if (!head_file->empty() && std::filesystem::exists(*head_file)) {
                       std::ifstream in(*head_file);
                       std::string text;
                       std::getline(in, text);
                       expected.push_back(ChainHead::parse(text, *head_file));
                     }
                     ChainHead current;
                     const std::string trusted_ref = ctx.store().ref;  // as the trusted ref's densefeed.yaml names it
                     {
                       const Ledger ledger(ctx.ledger_path(), Ledger::Mode::audit);
                       checks.push_back({"schema objects (tables, views, triggers, indexes) are the SQL compiled into densefeed",
                                         ledger.schema_differences()});
                       checks.push_back({"no speedup, trace or acceptance result without a green gate", ledger.results_without_green_gate()});
                       if (!*allow_untrusted_gates) {
                         checks.push_back({fmt::format("no green result whose gates came from elsewhere than the trusted ref '{}' "
                                                       "(--allow-untrusted-gates accepts them)",
                                                       trusted_ref),
                                           ledger.green_results_not_from(trusted_ref)});
                       }
                       if (!*allow_unsandboxed) {
                         checks.push_back({"no green result whose untrusted commands ran without the sandbox (--allow-unsandboxed accepts them)",
                                           ledger.unsandboxed_green_results()});
                       }
                       checks.push_back({"no promotion or acceptance run without a green gate and green bench and trace stages",
                                         ledger.promotion_violations()});
                       {
                         // A promote killed during its acceptance run left it `started`.
                         Check interrupted{"no acceptance run left started by a promote that no longer runs (interrupted)", {}};
                         for (const auto& r : ledger.running_acceptances()) {
                           if (r.alive) continue;
                           interrupted.failures.push_back(
                               fmt::format("experiment {}: its acceptance run started at {} was interrupted: {}; 'densefeed promote {}' "
                                           "runs it again", r.experiment_id, r.started_at, r.owner, r.experiment_id));
                         }
                         checks.push_back(interrupted);
                       }
                       {
                         Check tamper{"no unacknowledged tamper event (an export or cached build densefeed found altered; "
                                      "'densefeed audit acknowledge ID --by NAME --note TEXT')", {}};
                         for (const auto& e : ledger.tamper_events(true)) {
                           tamper.failures.push_back(fmt::format("tamper event {} ({}, {}): {}: {} (commit {})", e.id, e.kind, e.detected_at,
                                                                 e.path, e.detail, e.commit.substr(0, 12)));
                         }
                         checks.push_back(tamper);
                       }
                       const ChainCheck c = ledger.verify();
                       Check chain{"hash chain intact", {}};
                       if (!c.ok) {
                         chain.failures.push_back(fmt::format("link {}: {} row {}{}: {}", c.first_broken_seq, c.table, c.row_id,
                                                              c.experiment_id ? fmt::format(" (experiment {})", c.experiment_id) : "",
                                                              c.problem));
                       }
                       checks.push_back(chain);
                       current = ledger.head();
                       Check extends{"the chain extends the head recorded earlier", {}};
                       for (const auto& h : expected) {
                         if (auto why = ledger.extends(h); !why.empty()) extends.failures.push_back(fmt::format("head {}: {}", h.text(), why));
                       }
                       if (!expected.empty()) checks.push_back(extends);
                     }
                     const GateStore& store = ctx.store();
                     const auto lock = read_lock(store);
                     const auto names = list_gates(store);
                     if (names.empty()) {
                       throw InputError(store.gate_dir().string(), {}, "", fmt::format("no gates (*.yaml) in {}", store.describe()));
                     }
                     for (const auto& name : names) {
                       auto problems = check_locked_file(store, lock, store.gate_rel(name));
                       if (problems.empty()) {
                         const auto frozen = check_frozen_files(store, lock, load_gate(store, name));
                         problems.insert(problems.end(), frozen.begin(), frozen.end());
                       }
                       checks.push_back({fmt::format("gate {} and its frozen files match {} ({})", name, store.lock_rel(), store.describe()),
                                         problems});
                     }
                     bool ok = true;
                     nlohmann::ordered_json doc = {{"ledger", ctx.ledger_path().string()}, {"checks", nlohmann::ordered_json::array()}};
                     for (const auto& c : checks) {
                       ok = ok && c.failures.empty();
                       doc["checks"].push_back({{"check", c.name}, {"ok", c.failures.empty()}, {"failures", c.failures}});
                       if (!ctx.json) {
                         std::cout << fmt::format("{:<4} {}\n", c.failures.empty() ? "ok" : "FAIL", c.name);
                         for (const auto& f : c.failures) std::cout << "       " << one_line(f) << "\n";
                       }
                     }
                     doc["ok"] = ok;
                     doc["head"] = current.text();
                     if (ok && !head_file->empty()) {
                       std::ofstream out(*head_file, std::ios::trunc);
                       out << current.text() << "\n";
                       if (!out) throw InputError(*head_file, {}, "--head-file", "cannot write the head here");
                     }
                     if (ctx.json) std::cout << doc.dump(2) << "\n";
                     else std::cout << "head " << current.text() << "\n";
                     if (!junit->empty()) {
                       namespace pt = boost::property_tree;
                       pt::ptree suites, suite;
                       std::size_t failed = 0;
                       for (const auto& c : checks) failed += c.failures.empty() ? 0 : 1;
                       suite.put("<xmlattr>.name", "densefeed-audit");
                       suite.put("<xmlattr>.tests", checks.size());
                       suite.put("<xmlattr>.failures", failed);
                       for (const auto& c : checks) {
                         pt::ptree tc;
                         tc.put("<xmlattr>.classname", "densefeed.audit");
                         tc.put("<xmlattr>.name", c.name);
                         if (!c.failures.empty()) {
                           std::string text;
                           for (const auto& f : c.failures) text += f + "\n";
                           pt::ptree failure;
                           failure.put("<xmlattr>.message", c.failures.front());
                           failure.put_value(text);
                           tc.add_child("failure", failure);
                         }
                         suite.add_child("testcase", tc);
                       }
                       suites.add_child("testsuites.testsuite", suite);
                       std::ofstream out(*junit);
                       if (!out) throw InputError(*junit, {}, "--junit", "cannot write the JUnit file here");
                       pt::write_xml(out, suites, pt::xml_writer_make_settings<std::string>(' ', 2));
                     }
                     return ok ? 0 : 1;
                   }});
  return verbs;
}

}  // namespace densefeed
