#include "ledger.h"

#include <sqlite3.h>

#include <chrono>
#include <cmath>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "error.h"
#include "ledger_schema_sql.h"
#include "statistics.h"

namespace densefeed {
namespace {

constexpr int kSchemaVersion = 1;

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

Ledger::Ledger(const std::filesystem::path& path, Mode mode) : path_(path) {
  const bool read_only = mode == Mode::read_only;
  std::error_code ec;
  if (read_only && !std::filesystem::is_regular_file(path, ec)) {
    throw InputError(path.string(), {}, "", "no ledger here (it is created by the first 'densefeed run')");
  }
  if (!read_only && path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  const int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    std::string message = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw InfraError(fmt::format("{}: cannot open the ledger: {}", path.string(), message));
  }
  sqlite3_busy_timeout(db_, 10'000);
  try {
    // A file that is not SQLite fails its first read.
    char* message = nullptr;
    const int rc = sqlite3_exec(db_, "SELECT COUNT(*) FROM sqlite_schema", nullptr, nullptr, &message);
    sqlite3_free(message);
    if (rc == SQLITE_NOTADB) throw InputError(path.string(), {}, "", "not an SQLite database, so not a densefeed ledger");
    Statement has_schema(db_, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_info'");
    has_schema.step();
    const bool is_ledger = has_schema.column(0).get<std::int64_t>() == 1;
    Statement any_table(db_, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table'");
    any_table.step();
    if (!is_ledger && (read_only || any_table.column(0).get<std::int64_t>() > 0)) {
      throw InputError(path.string(), {}, "", "an SQLite database but not a densefeed ledger (no schema_info table); "
                                              "densefeed will not add its tables to it");
    }
    if (is_ledger) {
      Statement version(db_, "SELECT MAX(version) FROM schema_info");
      version.step();
      if (!version.column(0).is_number_integer()) {
        throw InputError(path.string(), {}, "", "the ledger's schema_info has no version: the file is damaged");
      }
    }
    if (read_only) {
      Statement version(db_, "SELECT MAX(version) FROM schema_info");
      version.step();
      if (version.column(0).get<std::int64_t>() > kSchemaVersion) {
        throw InfraError(fmt::format("{}: ledger schema version {} is newer than this densefeed ({})", path.string(),
                                     version.column(0).get<std::int64_t>(), kSchemaVersion));
      }
      return;
    }
    exec(db_, "PRAGMA foreign_keys = ON");
    Transaction t(db_);
    exec(db_, kLedgerSchemaSql);
    Statement count(db_, "SELECT COUNT(*) FROM schema_info");
    count.step();
    if (count.column(0).get<std::int64_t>() == 0) {
      Statement(db_, "INSERT INTO schema_info(version) VALUES (?)").bind(1, kSchemaVersion).run();
    } else {
      Statement version(db_, "SELECT MAX(version) FROM schema_info");
      version.step();
      const auto v = version.column(0).get<std::int64_t>();
      if (v > kSchemaVersion) {
        throw InfraError(fmt::format("{}: ledger schema version {} is newer than this densefeed ({})", path.string(), v,
                                     kSchemaVersion));
      }
    }
    t.commit();
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

Ledger::~Ledger() { sqlite3_close(db_); }

std::int64_t Ledger::record_experiment(const ExperimentRecord& record) {
  const Manifest& m = *record.manifest;
  Statement s(db_,
              "INSERT INTO experiments(name, manifest_path, manifest_text, manifest_sha256, author, hypothesis, "
              "predicted_effect, gate, risk, candidate_revision, candidate_params, base_revision, base_params, "
              "submitted_at, candidate_sha, base_sha, worktree_dirty) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, m.name).bind(2, m.doc.path).bind(3, m.doc.text).bind(4, m.sha256).bind(5, m.author);
  s.bind(6, m.hypothesis).bind(7, m.predicted_effect).bind(8, m.gate).bind(9, nlohmann::json(m.risk).dump());
  s.bind(10, m.candidate.revision).bind(11, record.candidate_params.dump());
  s.bind(12, m.base.revision).bind(13, record.base_params.dump()).bind(14, utc_now());
  s.bind(15, record.candidate_sha).bind(16, record.base_sha).bind(17, record.worktree_dirty ? 1 : 0);
  s.run();
  return sqlite3_last_insert_rowid(db_);
}

std::int64_t Ledger::record_gate_run(std::int64_t experiment_id, const GateRunRecord& record) {
  const GateResult& r = *record.result;
  Transaction t(db_);
  Statement s(db_,
              "INSERT INTO gate_runs(experiment_id, gate, gate_sha256, lock_problems, profile, seed, verdict, reason, "
              "wall_s, harness_wall_s, started_at, finished_at, provenance) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, experiment_id).bind(2, record.gate).bind(3, record.gate_sha256);
  s.bind(4, nlohmann::json(record.lock_problems).dump()).bind(5, record.profile).bind(6, std::to_string(record.seed));
  s.bind(7, to_string(r.verdict)).bind(8, r.reason).bind(9, r.wall_s).bind(10, r.harness_wall_s);
  s.bind(11, record.started_at).bind(12, utc_now()).bind(13, record.provenance_json);
  s.run();
  const std::int64_t gate_run_id = sqlite3_last_insert_rowid(db_);
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const CaseResult& c = r.cases[i];
    Statement cs(db_,
                 "INSERT INTO gate_cases(gate_run_id, case_index, case_label, case_json, verdict, reason, "
                 "reference_wall_s, candidate_wall_s) VALUES (?,?,?,?,?,?,?,?)");
    cs.bind(1, gate_run_id).bind(2, i).bind(3, c.gate_case.label).bind(4, c.gate_case.values.dump());
    cs.bind(5, to_string(c.verdict)).bind(6, c.reason).bind(7, c.reference_wall_s).bind(8, c.candidate_wall_s);
    cs.run();
    const std::int64_t case_id = sqlite3_last_insert_rowid(db_);
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
  }
  Statement e(db_,
              "INSERT INTO environments(experiment_id, host, cpu_model, gpus, cuda_version, compiler, flags, candidate_sha, "
              "base_sha, worktree_dirty, clocks) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
  e.bind(1, experiment_id).bind(2, env.host).bind(3, env.cpu_model).bind(4, env.gpus.dump()).bind(5, env.cuda_version);
  e.bind(6, env.compiler).bind(7, env.flags).bind(8, candidate_sha).bind(9, base_sha).bind(10, worktree_dirty ? 1 : 0);
  e.bind(11, clocks.dump());
  e.run();
  t.commit();
}

void Ledger::record_calibration(const Calibration& c) {
  Statement s(db_,
              "INSERT INTO calibrations(gate, gate_sha256, case_label, host, params, comparisons, noise_floor, "
              "false_verdict_rate, verdicts, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, c.gate).bind(2, c.gate_sha256).bind(3, c.case_label).bind(4, c.host).bind(5, c.params.dump());
  s.bind(6, c.comparisons).bind(7, c.noise_floor).bind(8, c.false_verdict_rate).bind(9, c.verdicts.dump()).bind(10, utc_now());
  s.run();
}

std::map<std::string, double> Ledger::noise_floors(const std::string& gate, const std::string& host) const {
  std::map<std::string, double> out;
  Statement s(db_, "SELECT case_label, noise_floor FROM calibrations WHERE gate = ? AND host = ? ORDER BY id");
  s.bind(1, gate).bind(2, host);
  while (s.step()) out[s.column(0).get<std::string>()] = s.column(1).get<double>();  // the latest wins
  return out;
}

nlohmann::ordered_json Ledger::list() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  Statement s(db_,
              "SELECT v.experiment_id AS id, v.name, v.gate, v.gate_verdict AS verdict, v.reason, v.profile, "
              "v.submitted_at, (SELECT json_group_array(json_object('case', b.case_label, 'verdict', b.verdict, 'speedup', "
              "b.speedup, 'speedup_lo', b.speedup_lo, 'speedup_hi', b.speedup_hi)) FROM bench_cases b "
              "WHERE b.experiment_id = v.experiment_id) AS speedups "
              "FROM experiment_verdicts v ORDER BY v.experiment_id");
  while (s.step()) {
    auto row = s.row();
    row["speedups"] = parse_json_column(row["speedups"]);
    out.push_back(row);
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
  for (const char* k : {"risk", "candidate_params", "base_params"}) out[k] = parse_json_column(out[k]);

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
  return out;
}

}  // namespace densefeed
