// What `densefeed audit` asks beside the chain: the invariants the triggers
// hold, checked again on the rows (for a ledger whose triggers were
// dropped), and the tamper events with their acknowledgements.
#include "ledger.h"

#include <sqlite3.h>

#include <fmt/format.h>

#include "error.h"
#include "ledger_sql.h"

namespace densefeed {
using namespace ledger_sql;

std::int64_t Ledger::record_tamper(const TamperEvent& e) {
  Transaction t(db_);
  Statement s(db_, "INSERT INTO tamper_events(detected_at, kind, path, detail, commit_sha) VALUES (?,?,?,?,?)");
  s.bind(1, utc_now()).bind(2, to_string(e.kind)).bind(3, e.path).bind(4, e.detail).bind(5, e.commit);
  s.run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  link("tamper_events", id);
  t.commit();
  return id;
}

void Ledger::acknowledge_tamper(std::int64_t id, const std::string& by, const std::string& note) {
  if (by.empty()) throw InputError("command line", {}, "--by", "name the person who acknowledges the tamper event");
  Transaction t(db_);
  {
    Statement q(db_, "SELECT (SELECT COUNT(*) FROM tamper_events WHERE id = ?1), "
                     "(SELECT acknowledged_by FROM tamper_acknowledgements WHERE event_id = ?1)");
    q.bind(1, id);
    q.step();
    if (q.column(0).get<std::int64_t>() == 0) {
      throw InputError("command line", {}, "ID", fmt::format("no tamper event {} in {} (densefeed audit lists them)", id, path_.string()));
    }
    if (!q.column(1).is_null()) {
      throw InputError("command line", {}, "ID", fmt::format("tamper event {} was acknowledged already, by {}", id, q.column(1).get<std::string>()));
    }
  }
  Statement s(db_, "INSERT INTO tamper_acknowledgements(event_id, acknowledged_by, note, acknowledged_at) VALUES (?,?,?,?)");
  s.bind(1, id).bind(2, by).bind(3, note).bind(4, utc_now());
  s.run();
  link("tamper_acknowledgements", sqlite3_last_insert_rowid(db_));
  t.commit();
}

std::vector<RecordedTamper> Ledger::tamper_events(bool unacknowledged_only) const {
  std::vector<RecordedTamper> out;
  Statement s(db_, unacknowledged_only
                       ? "SELECT e.id, e.detected_at, e.kind, e.path, e.detail, e.commit_sha, a.acknowledged_by, a.note, a.acknowledged_at "
                         "FROM tamper_events e LEFT JOIN tamper_acknowledgements a ON a.event_id = e.id WHERE a.id IS NULL ORDER BY e.id"
                       : "SELECT e.id, e.detected_at, e.kind, e.path, e.detail, e.commit_sha, a.acknowledged_by, a.note, a.acknowledged_at "
                         "FROM tamper_events e LEFT JOIN tamper_acknowledgements a ON a.event_id = e.id ORDER BY e.id");
  const auto text = [&](int i) { return s.column(i).is_string() ? s.column(i).get<std::string>() : std::string(); };
  while (s.step()) {
    out.push_back({s.column(0).get<std::int64_t>(), text(1), text(2), text(3), text(4), text(5), text(6), text(7), text(8)});
  }
  return out;
}

std::vector<std::string> Ledger::promotion_violations() const {
  std::vector<std::string> out;
  const char* sql =
      "SELECT 'promotion', p.id, p.experiment_id, COALESCE(o.verdict, 'none'), "
      "(SELECT group_concat(s.stage || ' ' || s.verdict, ', ') FROM stage_outcomes s WHERE s.experiment_id = p.experiment_id "
      " AND s.stage IN ('gate', 'bench', 'trace') AND (s.verdict NOT IN ('green', 'skipped') OR s.stage = 'gate' AND s.verdict <> 'green')) "
      "FROM promotions p LEFT JOIN experiment_outcomes o ON o.experiment_id = p.experiment_id "
      "UNION ALL "
      "SELECT 'acceptance run', a.id, a.experiment_id, COALESCE(o.verdict, 'none'), "
      "(SELECT group_concat(s.stage || ' ' || s.verdict, ', ') FROM stage_outcomes s WHERE s.experiment_id = a.experiment_id "
      " AND s.stage IN ('gate', 'bench', 'trace') AND (s.verdict NOT IN ('green', 'skipped') OR s.stage = 'gate' AND s.verdict <> 'green')) "
      "FROM acceptance_runs a LEFT JOIN experiment_outcomes o ON o.experiment_id = a.experiment_id";
  Statement s(db_, sql);
  while (s.step()) {
    const auto verdict = s.column(3).get<std::string>();
    const std::string stages = s.column(4).is_string() ? s.column(4).get<std::string>() : "";
    Statement gate(db_, "SELECT COUNT(*) FROM stage_outcomes WHERE experiment_id = ? AND stage = 'gate' AND verdict = 'green'");
    gate.bind(1, s.column(2).get<std::int64_t>());
    gate.step();
    const bool gate_green = gate.column(0).get<std::int64_t>() > 0;
    if (verdict == "green" && stages.empty() && gate_green) continue;
    out.push_back(fmt::format("{} {} of experiment {}: its overall verdict is {}{}{}", s.column(0).get<std::string>(),
                              s.column(1).get<std::int64_t>(), s.column(2).get<std::int64_t>(), verdict,
                              stages.empty() ? "" : "; stages not green: " + stages, gate_green ? "" : "; no green gate stage"));
  }
  return out;
}

std::vector<std::int64_t> Ledger::same_user_experiments() const {
  Statement s(db_, "SELECT e.experiment_id FROM experiment_events e WHERE e.id = (SELECT MIN(f.id) FROM experiment_events f "
                   "WHERE f.experiment_id = e.experiment_id) AND e.owner NOT LIKE 'submit by %' ORDER BY e.experiment_id");
  std::vector<std::int64_t> ids;
  while (s.step()) ids.push_back(s.column(0).get<std::int64_t>());
  return ids;
}

std::vector<std::string> Ledger::results_without_green_gate() const {
  std::vector<std::string> out;
  const std::pair<const char*, const char*> checks[] = {
      {"bench_cases", "SELECT b.id, b.experiment_id, b.case_label FROM bench_cases b WHERE NOT EXISTS (SELECT 1 FROM gate_runs g "
                      "WHERE g.id = b.gate_run_id AND g.experiment_id = b.experiment_id AND g.verdict = 'green')"},
      {"trace_findings", "SELECT t.id, t.experiment_id, t.kind FROM trace_findings t WHERE NOT EXISTS (SELECT 1 FROM gate_runs g "
                         "WHERE g.id = t.gate_run_id AND g.experiment_id = t.experiment_id AND g.verdict = 'green')"},
      {"acceptance_runs", "SELECT a.id, a.experiment_id, a.verdict FROM acceptance_runs a WHERE NOT EXISTS (SELECT 1 FROM gate_runs g "
                          "WHERE g.experiment_id = a.experiment_id AND g.verdict = 'green')"},
      {"environments", "SELECT v.id, v.experiment_id, v.host FROM environments v WHERE NOT EXISTS (SELECT 1 FROM gate_runs g "
                       "WHERE g.experiment_id = v.experiment_id AND g.verdict = 'green')"},
  };
  for (const auto& [table, sql] : checks) {
    Statement s(db_, sql);
    while (s.step()) {
      out.push_back(fmt::format("{} row {} ({}) of experiment {} has no green gate run", table, s.column(0).get<std::int64_t>(),
                                s.column(2).is_string() ? s.column(2).get<std::string>() : s.column(2).dump(), s.column(1).dump()));
    }
  }
  return out;
}

std::vector<std::string> Ledger::unsandboxed_green_results() const {
  std::vector<std::string> out;
  Statement s(db_,
              "SELECT g.id, g.experiment_id, g.sandbox, (SELECT COUNT(*) FROM bench_cases b WHERE b.gate_run_id = g.id), "
              "(SELECT COUNT(*) FROM trace_findings t WHERE t.gate_run_id = g.id), "
              "(SELECT COUNT(*) FROM acceptance_runs a WHERE a.experiment_id = g.experiment_id) "
              "FROM gate_runs g WHERE g.verdict = 'green' AND (g.sandbox IS NULL OR g.sandbox <> 'on') ORDER BY g.id");
  while (s.step()) {
    const auto text = s.column(2).is_string() ? s.column(2).get<std::string>() : std::string("not recorded");
    out.push_back(fmt::format("gate run {} of experiment {} is green without the sandbox ({}); {} bench case(s), {} trace "
                              "finding(s), {} acceptance run(s) rest on it",
                              s.column(0).get<std::int64_t>(), s.column(1).dump(), text.empty() ? "not recorded" : text,
                              s.column(3).dump(), s.column(4).dump(), s.column(5).dump()));
  }
  return out;
}

std::vector<std::string> Ledger::green_results_not_from(const std::string& trusted_ref) const {
  std::vector<std::string> out;
  Statement s(db_, "SELECT g.id, g.experiment_id, g.provenance FROM gate_runs g WHERE g.verdict = 'green' ORDER BY g.id");
  while (s.step()) {
    const auto text = s.column(2).is_string() ? s.column(2).get<std::string>() : std::string("{}");
    const auto p = nlohmann::ordered_json::parse(text, nullptr, false);
    const std::string where = fmt::format("gate run {} of experiment {}", s.column(0).get<std::int64_t>(), s.column(1).dump());
    if (!p.is_object()) {
      out.push_back(where + " is green with no readable provenance");
      continue;
    }
    // --trust-worktree is a person's choice on the command line, recorded in
    // provenance; a ref other than the configured one is not.
    if (!p.value("trust_worktree", false) && p.value("trusted_ref", trusted_ref) != trusted_ref) {
      out.push_back(fmt::format("{} is green with gates from the ref '{}', not the trusted ref '{}'", where,
                                p.value("trusted_ref", std::string()), trusted_ref));
    }
  }
  return out;
}

}  // namespace densefeed
