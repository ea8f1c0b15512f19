// What the ledger's files (store/ledger_*.cpp) share to speak SQL: the
// prepared statement, the write transaction, the chained tables, and the few
// helpers more than one concern reads rows with. Private to store/: no other
// layer includes it (only the ledger writes SQL).
#pragma once

#include <sqlite3.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "error.h"
#include "experiment_state.h"
#include "ledger.h"

namespace densefeed::ledger_sql {

// An experiment's state as the ledger's SQL gives it (kStateSql); the
// events' CHECK allows no other text, so any other is the database's fault.
ExperimentState state_of(const nlohmann::ordered_json& column);

// The tables whose rows are linked into record_chain, in the order in which
// rows recorded before the chain existed (version 1) are sealed; the first
// kChainedTablesV2 existed at version 2, up to kChainedTablesV3 came with
// version 3, up to kChainedTablesV5 with version 5, the rest with version 6
// (tamper events, their acknowledgements, run nonces). heartbeats (version 4) is not chained:
// a beat updates its row in place (liveness, not a result); the requeued or
// interrupted event it leads to is.
inline constexpr const char* kChainedTables[] = {
    "experiments", "experiment_events", "gate_runs", "gate_cases", "gate_metrics", "bench_cases", "environments",
    "calibrations", "trace_findings", "reviews", "promotions", "acceptance_runs", "acceptance_criteria",
    "stage_outcomes", "experiment_outcomes", "chain_keys", "machine_ceilings", "bench_acceptances", "tamper_events",
    "tamper_acknowledgements", "run_nonces", "narrowings"};
inline constexpr std::size_t kChainedTablesV2 = 13;
inline constexpr std::size_t kChainedTablesV3 = 16;  // machine_ceilings and bench_acceptances came with version 5

// The latest event's name of an experiment, from the events themselves (not
// a view), so that no redefined view can change what a worker takes.
inline constexpr const char* kStateSql =
    "COALESCE((SELECT x.event FROM experiment_events x WHERE x.experiment_id = e.id ORDER BY x.id DESC LIMIT 1), 'recorded')";

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

// Runs `sql` (one or more statements, no rows read); throws InfraError
// naming the file and the start of the statement.
void exec(sqlite3* db, const char* sql);

// Rolls back unless committed, so a failure leaves the ledger as it was.
class Transaction {
 public:
  // BEGIN IMMEDIATE waits for another writer through SQLite's busy handler
  // (sqlite3_busy_timeout: retries with growing sleeps, 1 ms up to 100 ms,
  // for the ledger's lock wait); past it, LedgerBusy.
  explicit Transaction(sqlite3* db) : db_(db) {
    char* message = nullptr;
    const int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, &message);
    if (rc == SQLITE_OK) return;
    std::string text = message ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
      throw LedgerBusy(fmt::format("{}: the write lock stayed held by another process for longer than the lock wait ({})",
                                   sqlite3_db_filename(db_, "main"), text));
    }
    throw InfraError(fmt::format("{}: {}", sqlite3_db_filename(db_, "main"), text));
  }
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

// A JSON column parsed; the text itself when it is not JSON.
nlohmann::ordered_json parse_json_column(const nlohmann::ordered_json& v);

// The table's column names in their order (pragma table_info).
std::vector<std::string> columns_of(sqlite3* db, const std::string& table);

// sha256 of the row's listed columns (Statement::typed_bytes), or nullopt
// when the row does not exist.
std::optional<std::string> row_sha256(sqlite3* db, const std::string& table, const std::vector<std::string>& columns,
                                      std::int64_t row_id);

// The database's own refusal (a trigger's RAISE) as bad input for the id.
[[noreturn]] void refused(const std::filesystem::path& path, std::int64_t id, const InfraError& e);

}  // namespace densefeed::ledger_sql
