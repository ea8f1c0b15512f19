// The queue and liveness: an experiment's events and state, submit, claim
// and cancel, the heartbeats of what runs, the recovery of experiments
// whose owner died, and the nonce each start is issued.
#include "ledger.h"

#include <openssl/rand.h>
#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "error.h"
#include "ledger_sql.h"

namespace densefeed {
using namespace ledger_sql;

std::int64_t Ledger::record_experiment(const ExperimentSubmission& record, ExperimentEvent first, const std::string& owner) {
  const Manifest& m = *record.manifest;
  Transaction t(db_);
  Statement s(db_,
              "INSERT INTO experiments(name, manifest_path, manifest_text, manifest_sha256, author, hypothesis, "
              "predicted_effect, gate, risk, candidate_revision, candidate_params, base_revision, base_params, "
              "submitted_at, candidate_sha, base_sha, worktree_dirty, acceptance, trace, base_origin, base_origin_detail, "
              "parent_id, step, case_filter) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, m.name).bind(2, m.doc.path).bind(3, m.doc.text).bind(4, m.sha256).bind(5, m.author);
  s.bind(6, m.hypothesis).bind(7, m.predicted_effect).bind(8, m.gate).bind(9, nlohmann::json(m.risk).dump());
  s.bind(10, m.candidate.revision).bind(11, record.candidate_params.dump());
  s.bind(12, m.base.revision).bind(13, record.base_params.dump()).bind(14, utc_now());
  s.bind(15, record.candidate_sha).bind(16, record.base_sha).bind(17, record.worktree_dirty ? 1 : 0);
  s.bind(18, m.acceptance.is_null() ? std::string("{}") : m.acceptance.dump());
  s.bind(19, m.trace.is_null() ? std::string("{}") : m.trace.dump());
  s.bind(20, to_string(record.base_origin.kind)).bind(21, to_json(record.base_origin).dump());
  if (record.parent_id) s.bind(22, *record.parent_id);
  s.bind(23, record.step).bind(24, nlohmann::json(record.case_filter).dump());
  s.run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  link("experiments", id);
  const auto me = current_process();
  Statement ev(db_,
               "INSERT INTO experiment_events(experiment_id, event, owner, owner_host, owner_pid, owner_start, at) "
               "VALUES (?,?,?,?,?,?,?)");
  ev.bind(1, id).bind(2, to_string(first)).bind(3, owner).bind(4, me.host).bind(5, static_cast<std::int64_t>(me.pid));
  ev.bind(6, me.start_ticks).bind(7, utc_now());
  ev.run();
  const std::int64_t event_id = sqlite3_last_insert_rowid(db_);
  link("experiment_events", event_id);
  if (first == ExperimentEvent::started) {
    insert_heartbeat(id, owner, event_id, 0);
    insert_run_nonce(id);
  }
  t.commit();
  return id;
}

void Ledger::insert_run_nonce(std::int64_t experiment_id) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw InfraError("OpenSSL: cannot draw a run nonce (RAND_bytes failed)");
  std::string nonce;
  for (unsigned char b : bytes) nonce += fmt::format("{:02x}", b);
  Statement s(db_, "INSERT INTO run_nonces(experiment_id, nonce, created_at) VALUES (?,?,?)");
  s.bind(1, experiment_id).bind(2, nonce).bind(3, utc_now());
  s.run();
  link("run_nonces", sqlite3_last_insert_rowid(db_));
}

bool Ledger::nonce_issued(std::int64_t experiment_id, const std::string& nonce) const {
  Statement s(db_, "SELECT COUNT(*) FROM run_nonces WHERE experiment_id = ? AND nonce = ?");
  s.bind(1, experiment_id).bind(2, nonce);
  s.step();
  return s.column(0).get<std::int64_t>() > 0;
}

std::string Ledger::run_nonce(std::int64_t experiment_id) const {
  Statement s(db_, "SELECT nonce FROM run_nonces WHERE experiment_id = ? ORDER BY id DESC LIMIT 1");
  s.bind(1, experiment_id);
  return s.step() ? s.column(0).get<std::string>() : std::string();
}

std::int64_t Ledger::insert_heartbeat(std::int64_t experiment_id, const std::string& owner, std::int64_t started_event_id,
                                      std::int64_t acceptance_stage_id) {
  const auto me = current_process();
  const std::string now = utc_now_ms();
  Statement s(db_,
              "INSERT INTO heartbeats(experiment_id, owner, started_event_id, acceptance_stage_id, host, pid, pid_start, interval_s, "
              "beats, first_beat_at, last_beat_at) VALUES (?,?,?,?,?,?,?,?,1,?,?)");
  s.bind(1, experiment_id).bind(2, owner == "worker" || owner == "promote" ? owner : std::string("run"));
  if (started_event_id) s.bind(3, started_event_id);
  else s.bind_null(3);
  if (acceptance_stage_id) s.bind(4, acceptance_stage_id);
  else s.bind_null(4);
  s.bind(5, me.host).bind(6, static_cast<std::int64_t>(me.pid)).bind(7, me.start_ticks).bind(8, heartbeat_s_);
  s.bind(9, now).bind(10, now);
  s.run();
  return sqlite3_last_insert_rowid(db_);
}

std::int64_t Ledger::heartbeat_of(std::int64_t experiment_id) const {
  Statement s(db_,
              "SELECT h.id FROM heartbeats h WHERE h.started_event_id = (SELECT MAX(x.id) FROM experiment_events x "
              "WHERE x.experiment_id = ? AND x.event = 'started')");
  s.bind(1, experiment_id);
  return s.step() ? s.column(0).get<std::int64_t>() : 0;
}

bool Ledger::beat(std::int64_t heartbeat_id) {
  Transaction t(db_);
  Statement h(db_, "SELECT experiment_id, started_event_id, acceptance_stage_id FROM heartbeats WHERE id = ?");
  h.bind(1, heartbeat_id);
  if (!h.step()) throw InfraError(fmt::format("{}: no heartbeat row {}", path_.string(), heartbeat_id));
  const auto experiment = h.column(0).get<std::int64_t>();
  bool ours = false, running = false;
  if (h.column(1).is_number_integer()) {
    // Ours until someone else started it, requeued it or took it for dead.
    const auto started = h.column(1).get<std::int64_t>();
    Statement q(db_,
                "SELECT NOT EXISTS (SELECT 1 FROM experiment_events x WHERE x.experiment_id = ?1 AND x.id > ?2 "
                "AND x.event IN ('started', 'requeued', 'interrupted')), "
                "(SELECT x.event FROM experiment_events x WHERE x.experiment_id = ?1 ORDER BY x.id DESC LIMIT 1)");
    q.bind(1, experiment).bind(2, started);
    q.step();
    ours = q.column(0).get<std::int64_t>() != 0;
    const auto latest = q.column(1).get<std::string>();
    running = ours && (latest == "started" || latest == "cancel_requested");
  } else {
    const auto stage = h.column(2).get<std::int64_t>();
    Statement q(db_,
                "SELECT NOT EXISTS (SELECT 1 FROM stage_outcomes s WHERE s.experiment_id = ?1 AND s.stage = 'acceptance' AND s.id > ?2 "
                "AND s.verdict IN ('started', 'interrupted')), "
                "(SELECT MAX(s.id) FROM stage_outcomes s WHERE s.experiment_id = ?1 AND s.stage = 'acceptance')");
    q.bind(1, experiment).bind(2, stage);
    q.step();
    ours = q.column(0).get<std::int64_t>() != 0;
    running = ours && q.column(1).get<std::int64_t>() == stage;
  }
  if (running) {
    Statement u(db_, "UPDATE heartbeats SET beats = beats + 1, last_beat_at = ? WHERE id = ?");
    u.bind(1, utc_now_ms()).bind(2, heartbeat_id);
    u.run();
  }
  t.commit();
  return ours;
}

void Ledger::record_event(std::int64_t experiment_id, ExperimentEvent event, const std::string& owner,
                          const std::string& detail) {
  Transaction t(db_);
  const auto me = current_process();
  Statement ev(db_,
               "INSERT INTO experiment_events(experiment_id, event, owner, owner_host, owner_pid, owner_start, detail, at) "
               "VALUES (?,?,?,?,?,?,?,?)");
  ev.bind(1, experiment_id).bind(2, to_string(event)).bind(3, owner).bind(4, me.host);
  ev.bind(5, static_cast<std::int64_t>(me.pid)).bind(6, me.start_ticks).bind(7, detail).bind(8, utc_now());
  ev.run();
  link("experiment_events", sqlite3_last_insert_rowid(db_));
  t.commit();
}

ExperimentState Ledger::state(std::int64_t experiment_id) const {
  Statement s(db_, fmt::format("SELECT {} FROM experiments e WHERE e.id = ?", kStateSql).c_str());
  s.bind(1, experiment_id);
  if (!s.step()) throw InputError(path_.string(), {}, "", fmt::format("no experiment with id {} in the ledger", experiment_id));
  return state_of(s.column(0));
}

ExperimentState Ledger::cancel(std::int64_t experiment_id) {
  Transaction t(db_);
  const ExperimentState now = state(experiment_id);
  ExperimentEvent next;
  if (now == ExperimentState::queued || now == ExperimentState::requeued) next = ExperimentEvent::cancelled;
  else if (now == ExperimentState::started) next = ExperimentEvent::cancel_requested;
  else if (now == ExperimentState::cancel_requested) return now;
  else throw InputError(path_.string(), {}, fmt::format("experiment {}", experiment_id), fmt::format("it has already ended ({})", to_string(now)));
  const auto me = current_process();
  Statement ev(db_, "INSERT INTO experiment_events(experiment_id, event, owner, owner_host, owner_pid, owner_start, at) VALUES (?,?,?,?,?,?,?)");
  ev.bind(1, experiment_id).bind(2, std::string(to_string(next))).bind(3, std::string("cancel")).bind(4, me.host).bind(5, static_cast<std::int64_t>(me.pid));
  ev.bind(6, me.start_ticks).bind(7, utc_now());
  ev.run();
  link("experiment_events", sqlite3_last_insert_rowid(db_));
  t.commit();
  return state_after(next);
}

std::optional<ClaimedExperiment> Ledger::claim_next(const std::string& owner) {
  Transaction t(db_);
  Statement q(db_,
              fmt::format("SELECT e.id, e.manifest_path, e.manifest_text, e.manifest_sha256 FROM experiments e "
                          "WHERE {} IN ('queued', 'requeued') ORDER BY e.id LIMIT 1", kStateSql).c_str());
  if (!q.step()) return std::nullopt;
  ClaimedExperiment c{q.column(0).get<std::int64_t>(), q.column(1).get<std::string>(), q.column(2).get<std::string>(),
                      q.column(3).get<std::string>()};
  const auto me = current_process();
  Statement ev(db_,
               "INSERT INTO experiment_events(experiment_id, event, owner, owner_host, owner_pid, owner_start, at) "
               "VALUES (?,'started',?,?,?,?,?)");
  ev.bind(1, c.id).bind(2, owner).bind(3, me.host).bind(4, static_cast<std::int64_t>(me.pid)).bind(5, me.start_ticks);
  ev.bind(6, utc_now());
  ev.run();
  const std::int64_t event_id = sqlite3_last_insert_rowid(db_);
  link("experiment_events", event_id);
  c.heartbeat_id = insert_heartbeat(c.id, owner, event_id, 0);
  insert_run_nonce(c.id);
  t.commit();
  return c;
}

std::vector<RecoveredExperiment> Ledger::recover_dead_owners(HeartbeatWatch* watch) {
  std::vector<RecoveredExperiment> out;
  // A long wait for the lock kept the owners from beating as well: what
  // this watch saw before it proves nothing, so its clocks start again.
  const auto restart_clocks = [watch](std::chrono::steady_clock::time_point now) {
    if (watch) {
      for (auto& [id, seen] : watch->seen) seen.since = now;
    }
  };
  const auto asked = std::chrono::steady_clock::now();
  std::unique_ptr<Transaction> t;
  try {
    t = std::make_unique<Transaction>(db_);
  } catch (const LedgerBusy&) {
    restart_clocks(std::chrono::steady_clock::now());
    throw;
  }
  const auto now = std::chrono::steady_clock::now();
  const bool judge_beats = watch && now - asked <= std::chrono::seconds(1);
  if (!judge_beats) restart_clocks(now);
  // The latest event of every experiment that is started or being cancelled.
  // The owner is the process that took it (the latest `started`), also
  // while a cancel is requested (the canceller is not its owner); its
  // heartbeat is the one made with that `started`.
  Statement q(db_,
              "SELECT x.experiment_id, x.event, o.owner, o.owner_host, o.owner_pid, o.owner_start, "
              "(SELECT COUNT(*) FROM experiment_events r WHERE r.experiment_id = x.experiment_id AND r.event = 'requeued'), "
              "h.id, h.beats, h.interval_s, h.last_beat_at "
              "FROM experiment_events x JOIN experiment_events o ON o.id = (SELECT MAX(z.id) FROM experiment_events z "
              "WHERE z.experiment_id = x.experiment_id AND z.event = 'started') "
              "LEFT JOIN heartbeats h ON h.started_event_id = o.id "
              "WHERE x.id = (SELECT MAX(y.id) FROM experiment_events y WHERE y.experiment_id = x.experiment_id) "
              "AND x.event IN ('started', 'cancel_requested')");
  const std::string here = current_process().host;
  std::map<std::int64_t, HeartbeatWatch::Seen> still_running;
  while (q.step()) {
    const ProcessIdentity p{q.column(3).get<std::string>(), static_cast<long>(q.column(4).get<std::int64_t>()),
                            q.column(5).get<std::string>()};
    const auto event = q.column(1).get<std::string>();
    const auto owner = q.column(2).get<std::string>();
    const std::string who = owner.empty() ? "owner" : owner;
    std::string detail;
    if (p.host == here) {
      // This host: the pid says it at once.
      if (process_alive(p)) continue;
      detail = fmt::format("its {} process died before it finished", who);
    } else {
      if (!watch || !q.column(7).is_number_integer()) continue;  // no heartbeat to judge by
      const auto id = q.column(7).get<std::int64_t>();
      const auto beats = q.column(8).get<std::int64_t>();
      const double interval = q.column(9).get<double>();
      const auto it = watch->seen.find(id);
      HeartbeatWatch::Seen seen = it == watch->seen.end() || it->second.beats != beats ? HeartbeatWatch::Seen{beats, now} : it->second;
      still_running[id] = seen;
      const double still_s = std::chrono::duration<double>(now - seen.since).count();
      if (!judge_beats || still_s < kStaleHeartbeats * interval) continue;
      still_running.erase(id);
      detail = fmt::format("its {} on {} (pid {}) has not beaten for {:.1f} s, {} of its {} s heartbeat intervals (last beat at {})",
                           who, p.host, p.pid, still_s, kStaleHeartbeats, interval, q.column(10).get<std::string>());
    }
    ExperimentEvent next = ExperimentEvent::interrupted;
    if (event == "cancel_requested") next = ExperimentEvent::cancelled;
    else if (owner == "worker" && q.column(6).get<std::int64_t>() == 0) next = ExperimentEvent::requeued;
    out.push_back({q.column(0).get<std::int64_t>(), next, detail});
  }
  if (watch) watch->seen = std::move(still_running);  // what ended is forgotten
  for (const auto& d : out) {
    Statement ev(db_, "INSERT INTO experiment_events(experiment_id, event, owner, detail, at) VALUES (?,?,?,?,?)");
    // The event's owner stays the dead process's role (worker, run).
    Statement o(db_, "SELECT owner FROM experiment_events WHERE experiment_id = ? AND event = 'started' ORDER BY id DESC LIMIT 1");
    o.bind(1, d.id);
    o.step();
    ev.bind(1, d.id).bind(2, to_string(d.event)).bind(3, o.column(0).get<std::string>()).bind(4, d.detail).bind(5, utc_now());
    ev.run();
    link("experiment_events", sqlite3_last_insert_rowid(db_));
  }
  t->commit();
  return out;
}

double default_heartbeat_s() {
  if (const char* v = std::getenv("DENSEFEED_HEARTBEAT_S"); v && *v) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (end && *end == '\0' && s > 0 && std::isfinite(s)) return s;
    throw InputError("environment", {}, "DENSEFEED_HEARTBEAT_S", fmt::format("'{}' is not a number of seconds above 0", v));
  }
  return 10;
}

}  // namespace densefeed
