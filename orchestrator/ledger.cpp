#include "ledger.h"

#include <sqlite3.h>

#include <chrono>
#include <cmath>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "error.h"
#include "ledger_schema_sql.h"
#include "sha256.h"
#include "statistics.h"

namespace densefeed {
namespace {

constexpr int kSchemaVersion = 2;

// The tables whose rows are linked into record_chain, in the order in which
// rows recorded before the chain existed (version 1) are sealed.
constexpr const char* kChainedTables[] = {
    "experiments", "experiment_events", "gate_runs", "gate_cases", "gate_metrics", "bench_cases", "environments",
    "calibrations", "trace_findings", "reviews", "promotions", "acceptance_runs", "acceptance_criteria"};

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
      throw InfraError(fmt::format("{}: cannot prepare SQL: {}", sqlite3_db_filename(db, "main"), sqlite3_errmsg(db)));
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int i, const char* v) { return bind(i, std::string(v)); }
  Statement& bind(int i, std::int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  Statement& bind(int i, std::size_t v) { return bind(i, static_cast<std::int64_t>(v)); }
  Statement& bind_null(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  Statement& bind(int i, std::optional<double> v) { return v ? bind(i, *v) : bind_null(i); }
  Statement& bind(int i, double v) {
    if (std::isnan(v)) sqlite3_bind_null(stmt_, i);
    else sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  // Returns true while a row is available.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw InfraError(fmt::format("{}: {}", sqlite3_db_filename(db_, "main"), sqlite3_errmsg(db_)));
  }
  void run() {
    while (step()) {
    }
  }
  nlohmann::ordered_json column(int i) const {
    switch (sqlite3_column_type(stmt_, i)) {
      case SQLITE_INTEGER: return sqlite3_column_int64(stmt_, i);
      case SQLITE_FLOAT: return sqlite3_column_double(stmt_, i);
      case SQLITE_NULL: return nullptr;
      default: {
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, i));
        return std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, i)));
      }
    }
  }
  // The column's value as typed bytes for hashing: the type, then the value
  // (integers in decimal, reals in the shortest text that reads back to the
  // same double, text and blobs with their length), so no two values share
  // an encoding.
  std::string typed_bytes(int i) const {
    switch (sqlite3_column_type(stmt_, i)) {
      case SQLITE_INTEGER: return fmt::format("i{};", sqlite3_column_int64(stmt_, i));
      case SQLITE_FLOAT: return fmt::format("r{};", sqlite3_column_double(stmt_, i));
      case SQLITE_NULL: return "n;";
      default: {
        const bool blob = sqlite3_column_type(stmt_, i) == SQLITE_BLOB;
        const auto* p = static_cast<const char*>(blob ? sqlite3_column_blob(stmt_, i) : sqlite3_column_text(stmt_, i));
        const auto n = static_cast<std::size_t>(sqlite3_column_bytes(stmt_, i));
        return fmt::format("{}{}:", blob ? 'b' : 't', n) + std::string(p ? p : "", n) + ";";
      }
    }
  }
  int columns() const { return sqlite3_column_count(stmt_); }
  nlohmann::ordered_json row() const {
    nlohmann::ordered_json r = nlohmann::ordered_json::object();
    for (int i = 0; i < sqlite3_column_count(stmt_); ++i) r[sqlite3_column_name(stmt_, i)] = column(i);
    return r;
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

void exec(sqlite3* db, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    throw InfraError(fmt::format("{}: {}", sqlite3_db_filename(db, "main"), text));
  }
}

// Rolls back unless committed, so a failure leaves the ledger as it was.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec(db_, "COMMIT");
    done_ = true;
  }

 private:
  sqlite3* db_;
  bool done_ = false;
};

nlohmann::ordered_json parse_json_column(const nlohmann::ordered_json& v) {
  if (!v.is_string()) return v;
  try {
    return nlohmann::ordered_json::parse(v.get<std::string>());
  } catch (...) {
    return v;
  }
}

}  // namespace

std::string utc_now() {
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
}

namespace {

std::vector<std::string> columns_of(sqlite3* db, const std::string& table) {
  std::vector<std::string> out;
  Statement s(db, fmt::format("SELECT name FROM pragma_table_info('{}') ORDER BY cid", table).c_str());
  while (s.step()) out.push_back(s.column(0).get<std::string>());
  return out;
}

// sha256 of the row's listed columns (Statement::typed_bytes), or nullopt
// when the row does not exist.
std::optional<std::string> row_sha256(sqlite3* db, const std::string& table, const std::vector<std::string>& columns,
                                      std::int64_t row_id) {
  std::string select;
  for (const auto& c : columns) select += (select.empty() ? "\"" : ", \"") + c + "\"";
  Statement s(db, fmt::format("SELECT {} FROM \"{}\" WHERE id = ?", select, table).c_str());
  s.bind(1, row_id);
  if (!s.step()) return std::nullopt;
  std::string bytes;
  for (int i = 0; i < s.columns(); ++i) bytes += s.typed_bytes(i);
  return sha256_hex(bytes);
}

std::string link_hash(const std::string& prev, const std::string& table, std::int64_t row_id, const std::string& content) {
  return sha256_hex(fmt::format("{}\n{}\n{}\n{}", prev, table, row_id, content));
}

std::int64_t schema_version(sqlite3* db) {
  Statement has(db, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_info'");
  has.step();
  if (has.column(0).get<std::int64_t>() == 0) return 0;
  Statement v(db, "SELECT MAX(version) FROM schema_info");
  v.step();
  return v.column(0).is_number_integer() ? v.column(0).get<std::int64_t>() : -1;
}

}  // namespace

Ledger::Ledger(const std::filesystem::path& path, Mode mode) : path_(path) {
  const bool read_only = mode == Mode::read_only;
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    throw InputError(path.string(), {}, "", "not a regular file, so not a densefeed ledger");
  }
  if (read_only && !std::filesystem::is_regular_file(path, ec)) {
    throw InputError(path.string(), {}, "", "no ledger here (it is created by the first 'densefeed run' or 'submit')");
  }
  if (!read_only && path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  const int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    std::string message = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw InfraError(fmt::format("{}: cannot open the ledger: {}", path.string(), message));
  }
  sqlite3_busy_timeout(db_, 60'000);
  try {
    // Nothing is written before the file is known to be a ledger (or empty):
    // a file that is not SQLite fails its first read, a damaged one its check.
    char* message = nullptr;
    int rc = sqlite3_exec(db_, "SELECT COUNT(*) FROM sqlite_schema", nullptr, nullptr, &message);
    std::string text = message ? message : "";
    sqlite3_free(message);
    if (rc == SQLITE_NOTADB) throw InputError(path.string(), {}, "", "not an SQLite database, so not a densefeed ledger");
    if (rc == SQLITE_CORRUPT) throw InputError(path.string(), {}, "", "the ledger file is damaged (SQLite: " + text + ")");
    if (rc != SQLITE_OK) throw InfraError(fmt::format("{}: cannot read the ledger: {}", path.string(), text));
    {
      Statement check(db_, "PRAGMA quick_check");
      try {
        check.step();
      } catch (const InfraError& e) {
        throw InputError(path.string(), {}, "", std::string("the ledger file is damaged: ") + e.what());
      }
      const auto verdict = check.column(0);
      if (!verdict.is_string() || verdict.get<std::string>() != "ok") {
        throw InputError(path.string(), {}, "", "the ledger file is damaged (SQLite quick_check: " + verdict.dump() + ")");
      }
    }
    const std::int64_t version = schema_version(db_);
    std::int64_t tables = 0;
    {
      Statement any_table(db_, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table'");
      any_table.step();
      tables = any_table.column(0).get<std::int64_t>();
    }
    if (version == 0 && (read_only || tables > 0)) {
      throw InputError(path.string(), {}, "", "an SQLite database but not a densefeed ledger (no schema_info table); "
                                              "densefeed will not add its tables to it");
    }
    if (version < 0) throw InputError(path.string(), {}, "", "the ledger's schema_info has no version: the file is damaged");
    if (version > kSchemaVersion) {
      throw InfraError(fmt::format("{}: ledger schema version {} is newer than this densefeed ({})", path.string(), version,
                                   kSchemaVersion));
    }
    if (read_only) {
      if (version < kSchemaVersion) {
        // Opening an old ledger migrates it, also for a reader.
        sqlite3_close(db_);
        db_ = nullptr;
        { Ledger migrate(path, Mode::read_write); }
        if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
          throw InfraError(fmt::format("{}: cannot reopen the ledger: {}", path.string(), sqlite3_errmsg(db_)));
        }
        sqlite3_busy_timeout(db_, 60'000);
      }
      return;
    }
    exec(db_, "PRAGMA journal_mode = WAL");
    exec(db_, "PRAGMA foreign_keys = ON");
    Transaction t(db_);
    // Read again under the write lock: another process may have created or
    // migrated the file since.
    std::int64_t v = schema_version(db_);
    if (v == 0) {
      exec(db_, kLedgerSchemaSql);
      Statement(db_, "INSERT INTO schema_info(version) VALUES (1)").run();
      v = 1;
    }
    if (v < 2) {
      exec(db_, kLedgerMigration2Sql);
      // Seal the rows recorded before the chain existed, table by table.
      for (const char* table : kChainedTables) {
        std::vector<std::int64_t> ids;
        Statement rows(db_, fmt::format("SELECT id FROM {} ORDER BY id", table).c_str());
        while (rows.step()) ids.push_back(rows.column(0).get<std::int64_t>());
        for (const auto id : ids) link(table, id);
      }
      Statement(db_, "INSERT INTO schema_info(version) VALUES (2)").run();
      v = 2;
    }
    t.commit();
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

Ledger::~Ledger() { sqlite3_close(db_); }

const char* to_string(ExperimentEvent e) {
  switch (e) {
    case ExperimentEvent::queued: return "queued";
    case ExperimentEvent::started: return "started";
    case ExperimentEvent::requeued: return "requeued";
    case ExperimentEvent::interrupted: return "interrupted";
    case ExperimentEvent::finished: return "finished";
    case ExperimentEvent::cancel_requested: return "cancel_requested";
    case ExperimentEvent::cancelled: return "cancelled";
    case ExperimentEvent::rejected: return "rejected";
  }
  return "?";
}

namespace {

// The experiment a row belongs to (NULL for calibrations).
const char* experiment_of_sql(const std::string& table) {
  if (table == "experiments") return "SELECT id FROM experiments WHERE id = ?";
  if (table == "gate_cases") return "SELECT g.experiment_id FROM gate_cases c JOIN gate_runs g ON g.id = c.gate_run_id WHERE c.id = ?";
  if (table == "gate_metrics") {
    return "SELECT g.experiment_id FROM gate_metrics m JOIN gate_cases c ON c.id = m.gate_case_id "
           "JOIN gate_runs g ON g.id = c.gate_run_id WHERE m.id = ?";
  }
  if (table == "acceptance_criteria") {
    return "SELECT a.experiment_id FROM acceptance_criteria k JOIN acceptance_runs a ON a.id = k.acceptance_run_id WHERE k.id = ?";
  }
  if (table == "calibrations") return nullptr;
  return nullptr;
}

}  // namespace

void Ledger::link(const std::string& table, std::int64_t row_id) {
  const auto columns = columns_of(db_, table);
  const auto content = row_sha256(db_, table, columns, row_id);
  if (!content) throw InfraError(fmt::format("{}: cannot link {} row {}: no such row", path_.string(), table, row_id));
  std::optional<std::int64_t> experiment;
  if (const char* sql = experiment_of_sql(table)) {
    Statement e(db_, sql);
    e.bind(1, row_id);
    if (e.step() && e.column(0).is_number_integer()) experiment = e.column(0).get<std::int64_t>();
  } else if (table != "calibrations") {
    Statement e(db_, fmt::format("SELECT experiment_id FROM {} WHERE id = ?", table).c_str());
    e.bind(1, row_id);
    if (e.step() && e.column(0).is_number_integer()) experiment = e.column(0).get<std::int64_t>();
  }
  std::string prev;
  Statement last(db_, "SELECT hash FROM record_chain ORDER BY seq DESC LIMIT 1");
  if (last.step()) prev = last.column(0).get<std::string>();
  Statement s(db_,
              "INSERT INTO record_chain(experiment_id, table_name, row_id, columns, content_sha256, prev_hash, hash) "
              "VALUES (?,?,?,?,?,?,?)");
  if (experiment) s.bind(1, *experiment);
  else s.bind_null(1);
  s.bind(2, table).bind(3, row_id).bind(4, nlohmann::json(columns).dump()).bind(5, *content).bind(6, prev);
  s.bind(7, link_hash(prev, table, row_id, *content));
  s.run();
}

std::int64_t Ledger::record_experiment(const ExperimentRecord& record, ExperimentEvent first, const std::string& owner) {
  const Manifest& m = *record.manifest;
  Transaction t(db_);
  Statement s(db_,
              "INSERT INTO experiments(name, manifest_path, manifest_text, manifest_sha256, author, hypothesis, "
              "predicted_effect, gate, risk, candidate_revision, candidate_params, base_revision, base_params, "
              "submitted_at, candidate_sha, base_sha, worktree_dirty, acceptance, trace) "
              "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, m.name).bind(2, m.doc.path).bind(3, m.doc.text).bind(4, m.sha256).bind(5, m.author);
  s.bind(6, m.hypothesis).bind(7, m.predicted_effect).bind(8, m.gate).bind(9, nlohmann::json(m.risk).dump());
  s.bind(10, m.candidate.revision).bind(11, record.candidate_params.dump());
  s.bind(12, m.base.revision).bind(13, record.base_params.dump()).bind(14, utc_now());
  s.bind(15, record.candidate_sha).bind(16, record.base_sha).bind(17, record.worktree_dirty ? 1 : 0);
  s.bind(18, m.acceptance.is_null() ? std::string("{}") : m.acceptance.dump());
  s.bind(19, m.trace.is_null() ? std::string("{}") : m.trace.dump());
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
  link("experiment_events", sqlite3_last_insert_rowid(db_));
  t.commit();
  return id;
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

std::string Ledger::state(std::int64_t experiment_id) const {
  Statement s(db_, "SELECT state FROM experiment_states WHERE experiment_id = ?");
  s.bind(1, experiment_id);
  if (!s.step()) throw InputError(path_.string(), {}, "", fmt::format("no experiment with id {} in the ledger", experiment_id));
  return s.column(0).get<std::string>();
}

std::string Ledger::cancel(std::int64_t experiment_id) {
  Transaction t(db_);
  const std::string now = state(experiment_id);
  std::string next;
  if (now == "queued" || now == "requeued") next = "cancelled";
  else if (now == "started") next = "cancel_requested";
  else if (now == "cancel_requested") return now;
  else throw InputError(path_.string(), {}, fmt::format("experiment {}", experiment_id), fmt::format("it has already ended ({})", now));
  const auto me = current_process();
  Statement ev(db_, "INSERT INTO experiment_events(experiment_id, event, owner, owner_host, owner_pid, owner_start, at) VALUES (?,?,?,?,?,?,?)");
  ev.bind(1, experiment_id).bind(2, next).bind(3, std::string("cancel")).bind(4, me.host).bind(5, static_cast<std::int64_t>(me.pid));
  ev.bind(6, me.start_ticks).bind(7, utc_now());
  ev.run();
  link("experiment_events", sqlite3_last_insert_rowid(db_));
  t.commit();
  return next;
}

std::optional<ClaimedExperiment> Ledger::claim_next(const std::string& owner) {
  Transaction t(db_);
  Statement q(db_,
              "SELECT e.id, e.manifest_path, e.manifest_text, e.manifest_sha256 FROM experiments e "
              "JOIN experiment_states s ON s.experiment_id = e.id WHERE s.state IN ('queued', 'requeued') "
              "ORDER BY e.id LIMIT 1");
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
  link("experiment_events", sqlite3_last_insert_rowid(db_));
  t.commit();
  return c;
}

std::vector<std::pair<std::int64_t, ExperimentEvent>> Ledger::recover_dead_owners() {
  std::vector<std::pair<std::int64_t, ExperimentEvent>> out;
  Transaction t(db_);
  // The latest event of every experiment that is started or being cancelled.
  // The owner is the process that took it (the latest `started`), also
  // while a cancel is requested (the canceller is not its owner).
  Statement q(db_,
              "SELECT x.experiment_id, x.event, o.owner, o.owner_host, o.owner_pid, o.owner_start, "
              "(SELECT COUNT(*) FROM experiment_events r WHERE r.experiment_id = x.experiment_id AND r.event = 'requeued') "
              "FROM experiment_events x JOIN experiment_events o ON o.id = (SELECT MAX(z.id) FROM experiment_events z "
              "WHERE z.experiment_id = x.experiment_id AND z.event = 'started') "
              "WHERE x.id = (SELECT MAX(y.id) FROM experiment_events y WHERE y.experiment_id = x.experiment_id) "
              "AND x.event IN ('started', 'cancel_requested')");
  struct Dead {
    std::int64_t id;
    ExperimentEvent next;
    std::string owner;
  };
  std::vector<Dead> dead;
  while (q.step()) {
    const ProcessIdentity p{q.column(3).get<std::string>(), static_cast<long>(q.column(4).get<std::int64_t>()),
                            q.column(5).get<std::string>()};
    if (process_alive(p)) continue;
    const auto event = q.column(1).get<std::string>();
    const auto owner = q.column(2).get<std::string>();
    ExperimentEvent next = ExperimentEvent::interrupted;
    if (event == "cancel_requested") next = ExperimentEvent::cancelled;
    else if (owner == "worker" && q.column(6).get<std::int64_t>() == 0) next = ExperimentEvent::requeued;
    dead.push_back({q.column(0).get<std::int64_t>(), next, owner});
  }
  for (const auto& d : dead) {
    Statement ev(db_, "INSERT INTO experiment_events(experiment_id, event, owner, detail, at) VALUES (?,?,?,?,?)");
    ev.bind(1, d.id).bind(2, to_string(d.next)).bind(3, d.owner);
    ev.bind(4, std::string("its ") + (d.owner.empty() ? "owner" : d.owner) + " process died before it finished").bind(5, utc_now());
    ev.run();
    link("experiment_events", sqlite3_last_insert_rowid(db_));
    out.emplace_back(d.id, d.next);
  }
  t.commit();
  return out;
}

std::int64_t Ledger::record_gate_run(std::int64_t experiment_id, const GateRunRecord& record) {
  const GateResult& r = *record.result;
  Transaction t(db_);
  Statement s(db_,
              "INSERT INTO gate_runs(experiment_id, gate, gate_sha256, lock_problems, profile, seed, verdict, reason, "
              "wall_s, harness_wall_s, started_at, finished_at, provenance, sandbox) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, experiment_id).bind(2, record.gate).bind(3, record.gate_sha256);
  s.bind(4, nlohmann::json(record.lock_problems).dump()).bind(5, record.profile).bind(6, std::to_string(record.seed));
  s.bind(7, to_string(r.verdict)).bind(8, r.reason).bind(9, r.wall_s).bind(10, r.harness_wall_s);
  s.bind(11, record.started_at).bind(12, utc_now()).bind(13, record.provenance_json).bind(14, record.sandbox);
  s.run();
  const std::int64_t gate_run_id = sqlite3_last_insert_rowid(db_);
  link("gate_runs", gate_run_id);
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const CaseResult& c = r.cases[i];
    Statement cs(db_,
                 "INSERT INTO gate_cases(gate_run_id, case_index, case_label, case_json, verdict, reason, "
                 "reference_wall_s, candidate_wall_s, output_capture) VALUES (?,?,?,?,?,?,?,?,?)");
    cs.bind(1, gate_run_id).bind(2, i).bind(3, c.gate_case.label).bind(4, c.gate_case.values.dump());
    cs.bind(5, to_string(c.verdict)).bind(6, c.reason).bind(7, c.reference_wall_s).bind(8, c.candidate_wall_s);
    cs.bind(9, i < record.output_capture.size() ? record.output_capture[i].dump() : std::string("{}"));
    cs.run();
    const std::int64_t case_id = sqlite3_last_insert_rowid(db_);
    link("gate_cases", case_id);
    for (const auto& o : c.outputs) {
      for (const auto& m : o.comparison.checks) {
        Statement ms(db_,
                     "INSERT INTO gate_metrics(gate_case_id, output, metric, value, bound, passed, violations, "
                     "judged_relative, worst_index, first_failing_slice) VALUES (?,?,?,?,?,?,?,?,?,?)");
        ms.bind(1, case_id).bind(2, o.output).bind(3, m.metric).bind(4, m.value).bind(5, m.bound);
        ms.bind(6, m.passed ? 1 : 0).bind(7, m.violations).bind(8, o.comparison.judged_relative ? 1 : 0);
        ms.bind(9, nlohmann::json(o.comparison.worst_index).dump());
        if (o.comparison.first_failing_slice) ms.bind(10, *o.comparison.first_failing_slice);
        ms.run();
        link("gate_metrics", sqlite3_last_insert_rowid(db_));
      }
    }
  }
  t.commit();
  return gate_run_id;
}

void Ledger::record_bench(std::int64_t experiment_id, std::int64_t gate_run_id, const BenchResult& bench,
                          const Environment& env, const std::string& candidate_sha, const std::string& base_sha,
                          bool worktree_dirty) {
  Transaction t(db_);
  nlohmann::json clocks = nlohmann::json::object();
  for (const auto& c : bench.cases) {
    const Decision& d = c.decision;
    nlohmann::json rounds = nlohmann::json::array();
    for (std::size_t r = 0; r < c.base.size() && r < c.candidate.size(); ++r) {
      nlohmann::json round = {{"base_ms", c.base[r].samples_ms}, {"candidate_ms", c.candidate[r].samples_ms}};
      if (c.base[r].sm_clock_mhz) round["base_sm_clock_mhz"] = *c.base[r].sm_clock_mhz;
      if (c.candidate[r].sm_clock_mhz) round["candidate_sm_clock_mhz"] = *c.candidate[r].sm_clock_mhz;
      rounds.push_back(round);
    }
    // Median SM clock per arm over the rounds that reported one.
    for (const auto* arm : {&c.base, &c.candidate}) {
      std::vector<double> mhz;
      for (const auto& r : *arm) {
        if (r.sm_clock_mhz) mhz.push_back(*r.sm_clock_mhz);
      }
      if (!mhz.empty()) clocks[c.bench_case.label][arm == &c.base ? "base_sm_clock_mhz" : "candidate_sm_clock_mhz"] = median(mhz);
    }
    Statement s(db_,
                "INSERT INTO bench_cases(experiment_id, gate_run_id, case_label, case_json, unit, verdict, reason, "
                "base_median, base_relative_spread, candidate_median, candidate_relative_spread, speedup, speedup_lo, "
                "speedup_hi, ci_confidence, p_value, rounds, threshold, capped, predicted_speedup, prediction_error, "
                "rounds_json) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    s.bind(1, experiment_id).bind(2, gate_run_id).bind(3, c.bench_case.label).bind(4, c.bench_case.values.dump());
    s.bind(5, c.unit).bind(6, to_string(d.verdict)).bind(7, d.reason).bind(8, d.base_median_ms);
    s.bind(9, d.base_relative_spread).bind(10, d.candidate_median_ms).bind(11, d.candidate_relative_spread);
    s.bind(12, d.speedup).bind(13, d.speedup_ci.lo).bind(14, d.speedup_ci.hi).bind(15, 1 - d.alpha_at_look);
    s.bind(16, d.p_value).bind(17, c.base.size()).bind(18, c.threshold).bind(19, c.capped ? 1 : 0);
    if (c.predicted_speedup) s.bind(20, *c.predicted_speedup);
    if (c.prediction_error) s.bind(21, *c.prediction_error);
    s.bind(22, rounds.dump());
    s.run();
    link("bench_cases", sqlite3_last_insert_rowid(db_));
  }
  Statement e(db_,
              "INSERT INTO environments(experiment_id, host, cpu_model, gpus, cuda_version, compiler, flags, candidate_sha, "
              "base_sha, worktree_dirty, clocks) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
  e.bind(1, experiment_id).bind(2, env.host).bind(3, env.cpu_model).bind(4, env.gpus.dump()).bind(5, env.cuda_version);
  e.bind(6, env.compiler).bind(7, env.flags).bind(8, candidate_sha).bind(9, base_sha).bind(10, worktree_dirty ? 1 : 0);
  e.bind(11, clocks.dump());
  e.run();
  link("environments", sqlite3_last_insert_rowid(db_));
  t.commit();
}

void Ledger::record_calibration(const Calibration& c) {
  Transaction t(db_);
  Statement s(db_,
              "INSERT INTO calibrations(gate, gate_sha256, case_label, host, params, comparisons, noise_floor, "
              "false_verdict_rate, verdicts, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, c.gate).bind(2, c.gate_sha256).bind(3, c.case_label).bind(4, c.host).bind(5, c.params.dump());
  s.bind(6, c.comparisons).bind(7, c.noise_floor).bind(8, c.false_verdict_rate).bind(9, c.verdicts.dump()).bind(10, utc_now());
  s.run();
  link("calibrations", sqlite3_last_insert_rowid(db_));
  t.commit();
}

std::map<std::string, double> Ledger::noise_floors(const std::string& gate, const std::string& host) const {
  std::map<std::string, double> out;
  Statement s(db_, "SELECT case_label, noise_floor FROM calibrations WHERE gate = ? AND host = ? ORDER BY id");
  s.bind(1, gate).bind(2, host);
  while (s.step()) out[s.column(0).get<std::string>()] = s.column(1).get<double>();  // the latest wins
  return out;
}

void Ledger::record_trace_findings(std::int64_t experiment_id, std::int64_t gate_run_id,
                                   const std::vector<TraceFindingRecord>& findings) {
  Transaction t(db_);
  for (const auto& f : findings) {
    Statement s(db_,
                "INSERT INTO trace_findings(experiment_id, gate_run_id, arm, check_index, kind, check_json, passed, value, "
                "bound, details, trace_file) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
    s.bind(1, experiment_id).bind(2, gate_run_id).bind(3, f.arm).bind(4, f.check_index).bind(5, f.kind);
    s.bind(6, f.check.dump()).bind(7, f.passed ? 1 : 0).bind(8, f.value).bind(9, f.bound).bind(10, f.details.dump());
    s.bind(11, f.trace_file);
    s.run();
    link("trace_findings", sqlite3_last_insert_rowid(db_));
  }
  t.commit();
}

namespace {

// The database's own refusal (a trigger's RAISE) as bad input for the id.
[[noreturn]] void refused(const std::filesystem::path& path, std::int64_t id, const InfraError& e) {
  std::string why = e.what();
  const auto colon = why.rfind(": ");
  if (colon != std::string::npos && why.find(path.string()) == 0) why = why.substr(path.string().size() + 2);
  throw InputError(path.string(), {}, fmt::format("experiment {}", id), why);
}

}  // namespace

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

std::int64_t Ledger::record_promotion(std::int64_t experiment_id, const std::string& by) {
  Transaction t(db_);
  try {
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
  t.commit();
  return run_id;
}

nlohmann::ordered_json Ledger::list(const ListFilter& filter) const {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  Statement s(db_,
              "SELECT v.experiment_id AS id, v.name, v.gate, v.state, v.gate_verdict AS verdict, v.reason, v.profile, "
              "v.submitted_at, v.trace_checks, v.trace_failed, v.acceptance_verdict, v.promoted, "
              "(SELECT json_group_array(json_object('case', b.case_label, 'verdict', b.verdict, 'speedup', "
              "b.speedup, 'speedup_lo', b.speedup_lo, 'speedup_hi', b.speedup_hi)) FROM bench_cases b "
              "WHERE b.experiment_id = v.experiment_id) AS speedups "
              "FROM experiment_verdicts v WHERE (?1 = '' OR v.gate = ?1) AND (?2 = '' OR v.gate_verdict = ?2 OR v.state = ?2) "
              "AND (?3 = '' OR v.submitted_at >= ?3) ORDER BY v.experiment_id");
  s.bind(1, filter.gate).bind(2, filter.verdict).bind(3, filter.since);
  while (s.step()) {
    auto row = s.row();
    row["speedups"] = parse_json_column(row["speedups"]);
    row["promoted"] = row["promoted"].get<std::int64_t>() != 0;
    out.push_back(row);
  }
  return out;
}

ChainCheck Ledger::verify() const {
  ChainCheck c;
  std::string prev;
  Statement s(db_, "SELECT seq, experiment_id, table_name, row_id, columns, content_sha256, prev_hash, hash FROM record_chain ORDER BY seq");
  std::map<std::string, std::vector<std::string>> known;
  const auto broken = [&](std::int64_t seq, const std::string& table, std::int64_t row, const nlohmann::ordered_json& experiment,
                          std::string problem) {
    c.ok = false;
    c.first_broken_seq = seq;
    c.table = table;
    c.row_id = row;
    c.experiment_id = experiment.is_number_integer() ? experiment.get<std::int64_t>() : 0;
    c.problem = std::move(problem);
  };
  while (s.step()) {
    ++c.links;
    const auto seq = s.column(0).get<std::int64_t>();
    const auto table = s.column(2).get<std::string>();
    const auto row = s.column(3).get<std::int64_t>();
    const auto content = s.column(5).get<std::string>();
    const auto hash = s.column(7).get<std::string>();
    if (s.column(6).get<std::string>() != prev) {
      broken(seq, table, row, s.column(1), "its prev_hash is not the previous link's hash: a link before it was removed or altered");
      return c;
    }
    std::vector<std::string> columns;
    try {
      columns = nlohmann::json::parse(s.column(4).get<std::string>()).get<std::vector<std::string>>();
    } catch (const std::exception&) {
      broken(seq, table, row, s.column(1), "its column list is not a JSON array of names");
      return c;
    }
    bool known_table = false;
    for (const char* t : kChainedTables) known_table = known_table || table == t;
    if (!known_table) {
      broken(seq, table, row, s.column(1), "it names a table that densefeed does not chain");
      return c;
    }
    std::optional<std::string> now;
    try {
      now = row_sha256(db_, table, columns, row);
    } catch (const InfraError&) {
      broken(seq, table, row, s.column(1), "a column it hashed no longer exists");
      return c;
    }
    if (!now) {
      broken(seq, table, row, s.column(1), "the row was deleted");
      return c;
    }
    if (*now != content) {
      broken(seq, table, row, s.column(1), "the row was changed after it was recorded");
      return c;
    }
    if (link_hash(prev, table, row, content) != hash) {
      broken(seq, table, row, s.column(1), "the link's hash does not match its content");
      return c;
    }
    prev = hash;
    c.head = hash;
  }
  for (const char* table : kChainedTables) {
    Statement u(db_, fmt::format("SELECT id FROM {} WHERE id NOT IN (SELECT row_id FROM record_chain WHERE table_name = '{}') "
                                 "ORDER BY id LIMIT 1", table, table).c_str());
    if (u.step()) {
      broken(0, table, u.column(0).get<std::int64_t>(), nullptr,
             "the row is not in the chain: it was inserted outside densefeed, or the chain's end was cut off");
      return c;
    }
  }
  return c;
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

nlohmann::ordered_json Ledger::export_tables() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  Statement tables(db_, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
  std::vector<std::string> names;
  while (tables.step()) names.push_back(tables.column(0).get<std::string>());
  for (const auto& name : names) {
    out[name] = nlohmann::ordered_json::array();
    Statement rows(db_, fmt::format("SELECT * FROM \"{}\" ORDER BY rowid", name).c_str());
    while (rows.step()) out[name].push_back(rows.row());
  }
  return out;
}

namespace {

void require_relation(sqlite3* db, const std::filesystem::path& path, const std::string& name) {
  Statement s(db, "SELECT COUNT(*) FROM sqlite_schema WHERE type IN ('table', 'view') AND name = ? AND name NOT LIKE 'sqlite_%'");
  s.bind(1, name);
  s.step();
  if (s.column(0).get<std::int64_t>() == 0) {
    throw InputError(path.string(), {}, "--table", fmt::format("no table or view named '{}' in the ledger (schemas/ledger.md lists them)", name));
  }
}

}  // namespace

std::vector<std::string> Ledger::columns(const std::string& name) const {
  require_relation(db_, path_, name);
  return columns_of(db_, name);
}

nlohmann::ordered_json Ledger::rows(const std::string& name) const {
  require_relation(db_, path_, name);
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  Statement s(db_, fmt::format("SELECT * FROM \"{}\"", name).c_str());
  while (s.step()) out.push_back(s.row());
  return out;
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

nlohmann::ordered_json Ledger::show(std::int64_t experiment_id) const {
  Statement e(db_, "SELECT * FROM experiments WHERE id = ?");
  e.bind(1, experiment_id);
  if (!e.step()) {
    throw InputError(path_.string(), {}, "", fmt::format("no experiment with id {} in the ledger", experiment_id));
  }
  nlohmann::ordered_json out = e.row();
  for (const char* k : {"risk", "candidate_params", "base_params", "acceptance", "trace"}) out[k] = parse_json_column(out[k]);
  out["state"] = state(experiment_id);
  out["events"] = nlohmann::ordered_json::array();
  Statement ev(db_, "SELECT event, owner, owner_host, owner_pid, detail, at FROM experiment_events WHERE experiment_id = ? ORDER BY id");
  ev.bind(1, experiment_id);
  while (ev.step()) out["events"].push_back(ev.row());

  Statement g(db_, "SELECT * FROM gate_runs WHERE experiment_id = ?");
  g.bind(1, experiment_id);
  out["gate_run"] = nullptr;
  if (g.step()) {
    auto run = g.row();
    run["lock_problems"] = parse_json_column(run["lock_problems"]);
    run["provenance"] = parse_json_column(run["provenance"]);
    run["cases"] = nlohmann::ordered_json::array();
    Statement cs(db_, "SELECT * FROM gate_cases WHERE gate_run_id = ? ORDER BY case_index");
    cs.bind(1, run["id"].get<std::int64_t>());
    while (cs.step()) {
      auto c = cs.row();
      c["case_json"] = parse_json_column(c["case_json"]);
      c["output_capture"] = parse_json_column(c["output_capture"]);
      c["metrics"] = nlohmann::ordered_json::array();
      Statement ms(db_, "SELECT output, metric, value, bound, passed, violations, judged_relative, worst_index, first_failing_slice FROM gate_metrics WHERE gate_case_id = ? ORDER BY id");
      ms.bind(1, c["id"].get<std::int64_t>());
      while (ms.step()) {
        auto m = ms.row();
        m["worst_index"] = parse_json_column(m["worst_index"]);
        c["metrics"].push_back(m);
      }
      run["cases"].push_back(c);
    }
    out["gate_run"] = run;
  }
  out["environment"] = nullptr;
  Statement env(db_, "SELECT * FROM environments WHERE experiment_id = ? ORDER BY id DESC LIMIT 1");
  env.bind(1, experiment_id);
  if (env.step()) {
    out["environment"] = env.row();
    out["environment"]["gpus"] = parse_json_column(out["environment"]["gpus"]);
  }
  out["bench_cases"] = nlohmann::ordered_json::array();
  Statement b(db_, "SELECT * FROM bench_cases WHERE experiment_id = ? ORDER BY id");
  b.bind(1, experiment_id);
  while (b.step()) {
    auto row = b.row();
    row["case_json"] = parse_json_column(row["case_json"]);
    row["rounds_json"] = parse_json_column(row["rounds_json"]);
    out["bench_cases"].push_back(row);
  }
  out["trace_findings"] = nlohmann::ordered_json::array();
  Statement tf(db_, "SELECT * FROM trace_findings WHERE experiment_id = ? ORDER BY id");
  tf.bind(1, experiment_id);
  while (tf.step()) {
    auto row = tf.row();
    row["check_json"] = parse_json_column(row["check_json"]);
    row["details"] = parse_json_column(row["details"]);
    row["passed"] = row["passed"].get<std::int64_t>() != 0;
    out["trace_findings"].push_back(row);
  }
  const auto review = review_state(experiment_id);
  for (const auto& [k, v] : review.items()) out[k] = v;
  return out;
}

}  // namespace densefeed
