// People's decisions and what follows them: reviews, promotions with what
// the person promoting accepts, and acceptance runs with their heartbeat.
#include "ledger.h"

#include <sqlite3.h>

#include <fmt/format.h>

#include "error.h"
#include "ledger_sql.h"

namespace densefeed {
using namespace ledger_sql;

std::int64_t Ledger::record_acceptance_start(std::int64_t experiment_id) {
  Transaction t(db_);
  if (const auto running = running_acceptances(experiment_id); !running.empty()) {
    const auto& r = running.front();
    if (r.alive) {
      throw InputError(path_.string(), {}, fmt::format("experiment {}", experiment_id),
                       fmt::format("its acceptance run started at {} is still running ({}); it is not started twice", r.started_at,
                                   r.owner));
    }
    // A promote that was killed during its acceptance run.
    StageOutcome i;
    i.stage = "acceptance";
    i.verdict = StageVerdict::interrupted;
    i.failure.kind = FailureKind::infrastructure;
    i.failure.who = FailureWho::densefeed;
    i.reason = fmt::format("the promote that started this acceptance run ended before recording it ({})", r.owner);
    insert_stage(experiment_id, i);
  }
  StageOutcome s;
  s.stage = "acceptance";
  s.verdict = StageVerdict::started;
  s.reason = "running";
  std::int64_t stage_id = 0;
  try {
    stage_id = insert_stage(experiment_id, s);
  } catch (const InfraError& e) {
    refused(path_, experiment_id, e);
  }
  const auto heartbeat = insert_heartbeat(experiment_id, "promote", 0, stage_id);
  t.commit();
  return heartbeat;
}

std::vector<RunningAcceptance> Ledger::running_acceptances(std::int64_t experiment_id) const {
  std::vector<RunningAcceptance> out;
  Statement q(db_,
              "SELECT a.experiment_id, a.recorded_at, h.host, h.pid, h.pid_start, h.interval_s, h.last_beat_at, "
              "(julianday('now') - julianday(h.last_beat_at)) * 86400.0 "
              "FROM stage_outcomes a LEFT JOIN heartbeats h ON h.acceptance_stage_id = a.id "
              "WHERE a.stage = 'acceptance' AND a.verdict = 'started' AND (?1 = 0 OR a.experiment_id = ?1) "
              "AND a.id = (SELECT MAX(x.id) FROM stage_outcomes x WHERE x.experiment_id = a.experiment_id AND x.stage = 'acceptance') "
              "ORDER BY a.id");
  q.bind(1, experiment_id);
  const std::string here = current_process().host;
  while (q.step()) {
    RunningAcceptance r;
    r.experiment_id = q.column(0).get<std::int64_t>();
    r.started_at = q.column(1).get<std::string>();
    if (!q.column(2).is_string()) {
      r.owner = "no heartbeat: it was started before ledger version 4";
      out.push_back(r);
      continue;
    }
    const ProcessIdentity p{q.column(2).get<std::string>(), static_cast<long>(q.column(3).get<std::int64_t>()),
                            q.column(4).get<std::string>()};
    const double interval = q.column(5).get<double>();
    const double age = q.column(7).is_number() ? q.column(7).get<double>() : 0;
    // This host: by the pid. Another: by the beat's age on this host's clock
    // (a one-time look cannot watch the count; the hosts' clocks must agree
    // within kStaleHeartbeats intervals).
    r.alive = p.host == here ? process_alive(p) : age <= kStaleHeartbeats * interval;
    r.owner = fmt::format("its promote on {} (pid {}), last beat at {}{}", p.host, p.pid, q.column(6).get<std::string>(),
                          p.host == here ? (r.alive ? ", still running" : ", no longer running")
                                         : fmt::format(", {:.0f} s ago", age));
    out.push_back(r);
  }
  return out;
}

std::string Ledger::acceptance_stage(std::int64_t experiment_id) const {
  Statement q(db_, "SELECT verdict FROM stage_outcomes WHERE experiment_id = ? AND stage = 'acceptance' ORDER BY id DESC LIMIT 1");
  q.bind(1, experiment_id);
  return q.step() ? q.column(0).get<std::string>() : std::string();
}

void Ledger::record_review(std::int64_t experiment_id, const std::string& category, const std::string& decision,
                           const std::string& reviewer, const std::string& note) {
  Transaction t(db_);
  try {
    Statement s(db_, "INSERT INTO reviews(experiment_id, category, decision, reviewer, note, reviewed_at) VALUES (?,?,?,?,?,?)");
    s.bind(1, experiment_id).bind(2, category).bind(3, decision).bind(4, reviewer).bind(5, note).bind(6, utc_now());
    s.run();
  } catch (const InfraError& e) {
    refused(path_, experiment_id, e);
  }
  link("reviews", sqlite3_last_insert_rowid(db_));
  t.commit();
}

std::int64_t Ledger::record_narrowing(std::int64_t experiment_id, const std::string& layer, const std::string& conclusion,
                                      const nlohmann::ordered_json& result) {
  Transaction t(db_);
  try {
    Statement s(db_, "INSERT INTO narrowings(experiment_id, layer, conclusion, result, recorded_at) VALUES (?,?,?,?,?)");
    s.bind(1, experiment_id).bind(2, layer).bind(3, conclusion).bind(4, result.dump()).bind(5, utc_now());
    s.run();
  } catch (const InfraError& e) {
    refused(path_, experiment_id, e);
  }
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  link("narrowings", id);
  t.commit();
  return id;
}

std::int64_t Ledger::record_promotion(std::int64_t experiment_id, const std::string& by,
                                      const std::vector<std::string>& accepted) {
  Transaction t(db_);
  try {
    for (const auto& concern : accepted) {
      Statement a(db_, "INSERT INTO bench_acceptances(experiment_id, concern, accepted_by, accepted_at) VALUES (?,?,?,?)");
      a.bind(1, experiment_id).bind(2, concern).bind(3, by).bind(4, utc_now());
      a.run();
      link("bench_acceptances", sqlite3_last_insert_rowid(db_));
    }
    Statement s(db_, "INSERT INTO promotions(experiment_id, promoted_by, promoted_at) VALUES (?,?,?)");
    s.bind(1, experiment_id).bind(2, by).bind(3, utc_now());
    s.run();
  } catch (const InfraError& e) {
    refused(path_, experiment_id, e);
  }
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  link("promotions", id);
  t.commit();
  return id;
}

std::vector<std::string> Ledger::promoted_candidate_shas() const {
  // An acceptance that ran to its end: a promotion whose acceptance was
  // killed does not vouch for its candidate.
  Statement s(db_,
              "SELECT DISTINCT e.candidate_sha FROM experiments e JOIN promotions p ON p.experiment_id = e.id "
              "WHERE e.candidate_revision != 'WORKTREE' AND length(e.candidate_sha) = 40 "
              "AND EXISTS (SELECT 1 FROM acceptance_runs a WHERE a.experiment_id = e.id AND a.verdict = 'pass') ORDER BY e.candidate_sha");
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.column(0).get<std::string>());
  return out;
}

std::int64_t Ledger::record_acceptance(std::int64_t experiment_id, std::int64_t promotion_id, const AcceptanceRecord& r) {
  Transaction t(db_);
  Statement s(db_,
              "INSERT INTO acceptance_runs(experiment_id, promotion_id, verdict, reason, metrics, wall_s, started_at, "
              "finished_at) VALUES (?,?,?,?,?,?,?,?)");
  s.bind(1, experiment_id).bind(2, promotion_id).bind(3, r.verdict).bind(4, r.reason).bind(5, r.metrics.dump());
  s.bind(6, r.wall_s).bind(7, r.started_at).bind(8, utc_now());
  s.run();
  const std::int64_t run_id = sqlite3_last_insert_rowid(db_);
  link("acceptance_runs", run_id);
  for (std::size_t i = 0; i < r.criteria.size(); ++i) {
    const auto& c = r.criteria[i];
    Statement cs(db_,
                 "INSERT INTO acceptance_criteria(acceptance_run_id, criterion_index, criterion, statistic, lhs, rhs, passed) "
                 "VALUES (?,?,?,?,?,?,?)");
    cs.bind(1, run_id).bind(2, i).bind(3, c.criterion).bind(4, c.statistic).bind(5, c.lhs).bind(6, c.rhs);
    cs.bind(7, c.passed ? 1 : 0);
    cs.run();
    link("acceptance_criteria", sqlite3_last_insert_rowid(db_));
  }
  StageOutcome stage;
  stage.stage = "acceptance";
  stage.verdict = r.verdict == "pass" ? StageVerdict::green : r.verdict == "fail" ? StageVerdict::red : StageVerdict::error;
  if (stage.verdict == StageVerdict::red) stage.failure = {FailureKind::tolerance, FailureWho::candidate, {}, {}, "metrics.json", "criteria", ""};
  if (stage.verdict == StageVerdict::error) stage.failure = {FailureKind::infrastructure, FailureWho::candidate, {}, {}, "", "", ""};
  stage.reason = r.reason;
  stage.wall_s = r.wall_s;
  insert_stage(experiment_id, stage, run_id);
  t.commit();
  return run_id;
}

nlohmann::ordered_json Ledger::review_state(std::int64_t experiment_id) const {
  nlohmann::ordered_json out = {{"reviews", nlohmann::ordered_json::array()}, {"categories", nlohmann::ordered_json::object()},
                                {"promotion", nullptr}, {"acceptance_runs", nlohmann::ordered_json::array()}};
  Statement risk(db_, "SELECT r.value FROM experiments e, json_each(e.risk) r WHERE e.id = ?");
  risk.bind(1, experiment_id);
  while (risk.step()) out["categories"][risk.column(0).get<std::string>()] = "none";
  Statement r(db_, "SELECT id, category, decision, reviewer, note, reviewed_at FROM reviews WHERE experiment_id = ? ORDER BY id");
  r.bind(1, experiment_id);
  while (r.step()) {
    auto row = r.row();
    out["categories"][row["category"].get<std::string>()] = row["decision"];
    out["reviews"].push_back(row);
  }
  Statement p(db_, "SELECT id, promoted_by, promoted_at FROM promotions WHERE experiment_id = ?");
  p.bind(1, experiment_id);
  if (p.step()) out["promotion"] = p.row();
  Statement a(db_, "SELECT * FROM acceptance_runs WHERE experiment_id = ? ORDER BY id");
  a.bind(1, experiment_id);
  while (a.step()) {
    auto row = a.row();
    row["metrics"] = parse_json_column(row["metrics"]);
    row["criteria"] = nlohmann::ordered_json::array();
    Statement k(db_, "SELECT criterion, statistic, lhs, rhs, passed FROM acceptance_criteria WHERE acceptance_run_id = ? ORDER BY criterion_index");
    k.bind(1, row["id"].get<std::int64_t>());
    while (k.step()) {
      auto c = k.row();
      c["passed"] = c["passed"].get<std::int64_t>() != 0;
      row["criteria"].push_back(c);
    }
    out["acceptance_runs"].push_back(row);
  }
  return out;
}

}  // namespace densefeed
