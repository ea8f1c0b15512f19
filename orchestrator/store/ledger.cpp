#include "ledger.h"

#include <cmath>
#include <cstdlib>

#include <openssl/rand.h>
#include <sqlite3.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <memory>
#include <tuple>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "error.h"
#include "ledger_schema_sql.h"
#include "sha256.h"
#include "statistics.h"

namespace densefeed {
namespace {

// An experiment's state as the ledger's SQL gives it (kStateSql); the
// events' CHECK allows no other text, so any other is the database's fault.
ExperimentState state_of(const nlohmann::ordered_json& column) {
  const std::string text = column.is_string() ? column.get<std::string>() : column.dump();
  if (const auto s = experiment_state_from(text)) return *s;
  throw InfraError(fmt::format("the ledger holds an experiment state densefeed does not know: '{}'", text));
}

constexpr int kSchemaVersion = 9;

// The tables whose rows are linked into record_chain, in the order in which
// rows recorded before the chain existed (version 1) are sealed; the first
// kChainedTablesV2 existed at version 2, up to kChainedTablesV3 came with
// version 3, up to kChainedTablesV5 with version 5, the rest with version 6
// (tamper events, their acknowledgements, run nonces). heartbeats (version 4) is not chained:
// a beat updates its row in place (liveness, not a result); the requeued or
// interrupted event it leads to is.
constexpr const char* kChainedTables[] = {
    "experiments", "experiment_events", "gate_runs", "gate_cases", "gate_metrics", "bench_cases", "environments",
    "calibrations", "trace_findings", "reviews", "promotions", "acceptance_runs", "acceptance_criteria",
    "stage_outcomes", "experiment_outcomes", "chain_keys", "machine_ceilings", "bench_acceptances", "tamper_events",
    "tamper_acknowledgements", "run_nonces"};
constexpr std::size_t kChainedTablesV2 = 13;
constexpr std::size_t kChainedTablesV3 = 16;  // machine_ceilings and bench_acceptances came with version 5

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
    throw InfraError(fmt::format("{}: {} (in: {:.60})", sqlite3_db_filename(db, "main"), text, sql));
  }
}

// Puts the file in WAL mode (persistent: done once per file). Switching a
// rollback-journal file needs its exclusive lock, and SQLite answers
// SQLITE_BUSY to the switch without calling the busy handler when other
// connections read it (seen with six processes opening a version-1 ledger),
// so the switch is retried here with 10 ms sleeps for up to lock_wait_s
// seconds; past it, LedgerBusy.
void use_wal(sqlite3* db, double lock_wait_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(lock_wait_s);
  for (;;) {
    char* message = nullptr;
    const int rc = sqlite3_exec(db, "PRAGMA journal_mode = WAL", nullptr, nullptr, &message);
    std::string text = message ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    if (rc == SQLITE_OK) return;
    if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) {
      throw InfraError(fmt::format("{}: cannot switch the ledger to WAL mode: {}", sqlite3_db_filename(db, "main"), text));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw LedgerBusy(fmt::format("{}: other processes kept the file locked for longer than the lock wait while it was switched "
                                   "to WAL mode ({})",
                                   sqlite3_db_filename(db, "main"), text));
    }
    sqlite3_sleep(10);
  }
}

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

nlohmann::ordered_json parse_json_column(const nlohmann::ordered_json& v) {
  if (!v.is_string()) return v;
  try {
    return nlohmann::ordered_json::parse(v.get<std::string>());
  } catch (...) {
    return v;
  }
}

}  // namespace

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

// The SQL of a schema object with its comments removed and its whitespace
// collapsed, so that a comment edited between densefeed versions is not a
// difference while any change of the statement itself is.
std::string normalized_sql(const std::string& sql) {
  std::string out;
  bool space = false;
  for (std::size_t i = 0; i < sql.size(); ++i) {
    const char ch = sql[i];
    if (ch == '\'' || ch == '"') {
      const std::size_t end = sql.find(ch, i + 1);
      const std::size_t stop = end == std::string::npos ? sql.size() : end + 1;
      if (space && !out.empty()) out += ' ';
      space = false;
      out += sql.substr(i, stop - i);
      i = stop - 1;
      continue;
    }
    if (ch == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      while (i < sql.size() && sql[i] != '\n') ++i;
      space = true;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(ch))) {
      space = true;
      continue;
    }
    if (space && !out.empty() && ch != ')' && ch != ',' && out.back() != '(') out += ' ';
    space = false;
    out += ch;
  }
  return out;
}

using Inventory = std::map<std::pair<std::string, std::string>, std::string>;  // (type, name) -> normalized SQL

Inventory inventory_of(sqlite3* db) {
  Inventory out;
  Statement s(db, "SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' AND sql IS NOT NULL");
  while (s.step()) out[{s.column(0).get<std::string>(), s.column(1).get<std::string>()}] = normalized_sql(s.column(2).get<std::string>());
  return out;
}

// Every migration's SQL, version 2 first: kMigrations[v - 2] takes a ledger
// from version v - 1 to v. Ledger's open applies them in this order, one
// version at a time.
constexpr const char* kMigrations[] = {kLedgerMigration2Sql, kLedgerMigration3Sql, kLedgerMigration4Sql, kLedgerMigration5Sql,
                                       kLedgerMigration6Sql, kLedgerMigration7Sql, kLedgerMigration8Sql,
                                       kLedgerMigration9Sql};
static_assert(std::size(kMigrations) == kSchemaVersion - 1, "one migration per version after 1");

// The schema objects the SQL compiled into densefeed makes: built once per
// process in an in-memory database by the same statements Ledger runs.
const Inventory& compiled_inventory() {
  static const Inventory inventory = [] {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
      throw InfraError("cannot open an in-memory SQLite database for the schema inventory");
    }
    try {
      exec(db, kLedgerSchemaSql);
      for (const char* sql : kMigrations) exec(db, sql);
      Inventory i = inventory_of(db);
      sqlite3_close(db);
      return i;
    } catch (...) {
      sqlite3_close(db);
      throw;
    }
  }();
  return inventory;
}

std::vector<std::string> inventory_differences(sqlite3* db) {
  const Inventory& want = compiled_inventory();
  const Inventory have = inventory_of(db);
  std::vector<std::string> out;
  for (const auto& [key, sql] : want) {
    const auto it = have.find(key);
    if (it == have.end()) out.push_back(fmt::format("{} {}: missing (dropped)", key.first, key.second));
    else if (it->second != sql) out.push_back(fmt::format("{} {}: redefined (its SQL is not densefeed's)", key.first, key.second));
  }
  for (const auto& [key, sql] : have) {
    if (!want.count(key)) out.push_back(fmt::format("{} {}: not densefeed's (added)", key.first, key.second));
  }
  return out;
}

// The latest event's name of an experiment, from the events themselves (not
// a view), so that no redefined view can change what a worker takes.
constexpr const char* kStateSql =
    "COALESCE((SELECT x.event FROM experiment_events x WHERE x.experiment_id = e.id ORDER BY x.id DESC LIMIT 1), 'recorded')";

std::int64_t schema_version(sqlite3* db) {
  Statement has(db, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_info'");
  has.step();
  if (has.column(0).get<std::int64_t>() == 0) return 0;
  Statement v(db, "SELECT MAX(version) FROM schema_info");
  v.step();
  return v.column(0).is_number_integer() ? v.column(0).get<std::int64_t>() : -1;
}

}  // namespace

Ledger::Ledger(const std::filesystem::path& path, Mode mode) : path_(path), heartbeat_s_(default_heartbeat_s()) {
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
  sqlite3_busy_timeout(db_, static_cast<int>(1000 * default_lock_wait_s()));
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
    if (read_only || mode == Mode::audit) {
      if (version < kSchemaVersion) {
        // Opening an old ledger migrates it, also for a reader.
        sqlite3_close(db_);
        db_ = nullptr;
        { Ledger migrate(path, Mode::read_write); }
        if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
          throw InfraError(fmt::format("{}: cannot reopen the ledger: {}", path.string(), sqlite3_errmsg(db_)));
        }
        sqlite3_busy_timeout(db_, static_cast<int>(1000 * default_lock_wait_s()));
      }
      load_key(false);
      if (mode != Mode::audit) {
        if (const auto differ = inventory_differences(db_); !differ.empty()) {
          throw InputError(path.string(), {}, "",
                           fmt::format("the ledger's schema objects are not the SQL compiled into densefeed ({}{}); it was edited "
                                       "outside densefeed, so densefeed will not read it (densefeed audit lists them)",
                                       differ.front(), differ.size() > 1 ? fmt::format(", and {} more", differ.size() - 1) : ""));
        }
      }
      return;
    }
    use_wal(db_, default_lock_wait_s());
    exec(db_, "PRAGMA foreign_keys = ON");
    Transaction t(db_);
    // Read again under the write lock: another process may have created or
    // migrated the file since.
    std::int64_t v = schema_version(db_);
    {
      Statement has_keys(db_, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = 'chain_keys'");
      has_keys.step();
      bool keyed = has_keys.column(0).get<std::int64_t>() > 0;
      if (keyed) {
        Statement rows(db_, "SELECT COUNT(*) FROM chain_keys");
        rows.step();
        keyed = rows.column(0).get<std::int64_t>() > 0;
      }
      // The key is made with the ledger (or its migration to keyed links);
      // a keyed ledger whose key is gone is refused, never re-keyed.
      load_key(!keyed);
    }
    if (v == 0) {
      exec(db_, kLedgerSchemaSql);
      Statement(db_, "INSERT INTO schema_info(version) VALUES (1)").run();
      v = 1;
    }
    // Links made by step 2 below are already keyed (link() always uses the
    // key), and no one else can have edited them inside this transaction.
    bool v2_links_made_here = false;
    if (v < 2) {
      v2_links_made_here = true;
      exec(db_, kLedgerMigration2Sql);
      // Seal the rows recorded before the chain existed, table by table.
      for (std::size_t i = 0; i < kChainedTablesV2; ++i) {
        const char* table = kChainedTables[i];
        std::vector<std::int64_t> ids;
        Statement rows(db_, fmt::format("SELECT id FROM {} ORDER BY id", table).c_str());
        while (rows.step()) ids.push_back(rows.column(0).get<std::int64_t>());
        for (const auto id : ids) link(table, id);
      }
      Statement(db_, "INSERT INTO schema_info(version) VALUES (2)").run();
      v = 2;
    }
    if (v < 3) {
      exec(db_, kLedgerMigration3Sql);
      // Every existing link is re-sealed with the key (version 2 linked with
      // plain sha256, which anyone who edits the file can recompute). The
      // append-only trigger is set aside for this one rewrite, inside this
      // transaction, and put back with its own SQL.
      std::string no_update;
      {
        Statement q(db_, "SELECT sql FROM sqlite_schema WHERE type = 'trigger' AND name = 'record_chain_no_update'");
        if (q.step()) no_update = q.column(0).get<std::string>();
      }
      if (!no_update.empty()) exec(db_, "DROP TRIGGER record_chain_no_update");
      {
        std::vector<std::tuple<std::int64_t, std::string, std::int64_t, std::string>> links;
        Statement q(db_, "SELECT seq, table_name, row_id, content_sha256 FROM record_chain ORDER BY seq");
        while (q.step()) {
          links.emplace_back(q.column(0).get<std::int64_t>(), q.column(1).get<std::string>(), q.column(2).get<std::int64_t>(),
                             q.column(3).get<std::string>());
        }
        // The version-2 chain is checked before it is re-sealed: a migration
        // must never launder an edit made while the chain was unkeyed. A
        // chain step 2 made in this transaction was never unkeyed.
        if (!v2_links_made_here) {
          std::string prev2;
          Statement old_links(db_, "SELECT seq, table_name, row_id, columns, content_sha256, prev_hash, hash FROM record_chain ORDER BY seq");
          while (old_links.step()) {
            const auto seq = old_links.column(0).get<std::int64_t>();
            const auto table = old_links.column(1).get<std::string>();
            const auto row = old_links.column(2).get<std::int64_t>();
            const auto content = old_links.column(4).get<std::string>();
            std::optional<std::string> now;
            try {
              now = row_sha256(db_, table, nlohmann::json::parse(old_links.column(3).get<std::string>()).get<std::vector<std::string>>(), row);
            } catch (const std::exception&) {
            }
            if (old_links.column(5).get<std::string>() != prev2 || !now || *now != content ||
                sha256_hex(fmt::format("{}\n{}\n{}\n{}", prev2, table, row, content)) != old_links.column(6).get<std::string>()) {
              throw InputError(path.string(), {}, "", fmt::format("its version-2 hash chain is broken at link {} ({} row {}); "
                                                                  "densefeed will not re-seal an edited ledger with its key", seq, table, row));
            }
            prev2 = old_links.column(6).get<std::string>();
          }
        }
        std::string prev;
        for (const auto& [seq, table, row, content] : links) {
          const std::string hash = link_hash(prev, table, row, content);
          Statement u(db_, "UPDATE record_chain SET prev_hash = ?, hash = ? WHERE seq = ?");
          u.bind(1, prev).bind(2, hash).bind(3, seq);
          u.run();
          prev = hash;
        }
      }
      if (!no_update.empty()) exec(db_, no_update.c_str());
      for (std::size_t i = kChainedTablesV2; i < kChainedTablesV3; ++i) {
        if (std::string(kChainedTables[i]) == "chain_keys") continue;
        std::vector<std::int64_t> ids;
        Statement rows(db_, fmt::format("SELECT id FROM {} ORDER BY id", kChainedTables[i]).c_str());
        while (rows.step()) ids.push_back(rows.column(0).get<std::int64_t>());
        for (const auto id : ids) link(kChainedTables[i], id);
      }
      Statement(db_, "INSERT INTO schema_info(version) VALUES (3)").run();
      v = 3;
    }
    if (v < 4) {
      // Heartbeats: nothing to seal (the table is not chained) and nothing
      // to fill (starts recorded before have none; the pid check still
      // covers this host's).
      exec(db_, kLedgerMigration4Sql);
      Statement(db_, "INSERT INTO schema_info(version) VALUES (4)").run();
      v = 4;
    }
    if (v < 5) {
      // New tables only, empty; the bench_cases columns are covered by the
      // links already made (a link's columns are recorded with it).
      exec(db_, kLedgerMigration5Sql);
      Statement(db_, "INSERT INTO schema_info(version) VALUES (5)").run();
      v = 5;
    }
    if (v < 6) {
      // New tables only, empty: nothing to seal.
      exec(db_, kLedgerMigration6Sql);
      Statement(db_, "INSERT INTO schema_info(version) VALUES (6)").run();
      v = 6;
    }
    if (v < 7) {
      // Two experiments columns (covered by the links already made: a
      // link's columns are recorded with it) and bench_acceptances made
      // again with its rows and ids, which its links name.
      exec(db_, kLedgerMigration7Sql);
      Statement(db_, "INSERT INTO schema_info(version) VALUES (7)").run();
      v = 7;
    }
    if (v < 8) {
      // One bench_cases column (covered by the links already made: a
      // link's columns are recorded with it); NULL for the rows before.
      exec(db_, kLedgerMigration8Sql);
      Statement(db_, "INSERT INTO schema_info(version) VALUES (8)").run();
      v = 8;
    }
    if (v < 9) {
      // One stage_outcomes column (covered by the links already made: a
      // link's columns are recorded with it); '' for the rows before.
      exec(db_, kLedgerMigration9Sql);
      Statement(db_, "INSERT INTO schema_info(version) VALUES (9)").run();
      v = 9;
    }
    {
      Statement k(db_, "SELECT fingerprint FROM chain_keys ORDER BY id LIMIT 1");
      if (!k.step()) {
        Statement ins(db_, "INSERT INTO chain_keys(fingerprint, created_at) VALUES (?, ?)");
        ins.bind(1, key_.fingerprint).bind(2, utc_now());
        ins.run();
        link("chain_keys", sqlite3_last_insert_rowid(db_));
      }
    }
    if (const auto differ = inventory_differences(db_); !differ.empty()) {
      throw InputError(path.string(), {}, "",
                       fmt::format("the ledger's schema objects are not the SQL compiled into densefeed ({}{}); it was edited "
                                   "outside densefeed, so densefeed will not write to it (densefeed audit lists them)",
                                   differ.front(), differ.size() > 1 ? fmt::format(", and {} more", differ.size() - 1) : ""));
    }
    {
      Statement k(db_, "SELECT fingerprint FROM chain_keys ORDER BY id LIMIT 1");
      k.step();
      if (k.column(0).get<std::string>() != key_.fingerprint) {
        throw InputError(key_.file.string(), {}, "",
                         fmt::format("this key (fingerprint {}) is not the ledger's (fingerprint {} in {}); set ledger_key in "
                                     "densefeed.yaml to the ledger's key", key_.fingerprint.substr(0, 16),
                                     k.column(0).get<std::string>().substr(0, 16), path.string()));
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

std::string Ledger::link_hash(const std::string& prev, const std::string& table, std::int64_t row_id,
                              const std::string& content) const {
  return hmac_sha256_hex(key_.bytes, fmt::format("{}\n{}\n{}\n{}", prev, table, row_id, content));
}

void Ledger::load_key(bool create) {
  key_ = load_ledger_key(ledger_key_file(std::filesystem::absolute(path_)), create);
  Statement has(db_, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = 'chain_keys'");
  has.step();
  if (has.column(0).get<std::int64_t>() == 0) return;
  Statement k(db_, "SELECT fingerprint FROM chain_keys ORDER BY id LIMIT 1");
  if (k.step() && k.column(0).get<std::string>() != key_.fingerprint) {
    throw InputError(key_.file.string(), {}, "",
                     fmt::format("this key (fingerprint {}) is not the ledger's (fingerprint {} in {}); set ledger_key in "
                                 "densefeed.yaml to the ledger's key", key_.fingerprint.substr(0, 16),
                                 k.column(0).get<std::string>().substr(0, 16), path_.string()));
  }
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
  } else if (table == "tamper_acknowledgements") {
    // A tamper event belongs to no experiment; nor does its acknowledgement.
  } else if (table != "calibrations" && table != "chain_keys" && table != "machine_ceilings" && table != "tamper_events") {
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

std::int64_t Ledger::record_experiment(const ExperimentSubmission& record, ExperimentEvent first, const std::string& owner) {
  const Manifest& m = *record.manifest;
  Transaction t(db_);
  Statement s(db_,
              "INSERT INTO experiments(name, manifest_path, manifest_text, manifest_sha256, author, hypothesis, "
              "predicted_effect, gate, risk, candidate_revision, candidate_params, base_revision, base_params, "
              "submitted_at, candidate_sha, base_sha, worktree_dirty, acceptance, trace, base_origin, base_origin_detail) "
              "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, m.name).bind(2, m.doc.path).bind(3, m.doc.text).bind(4, m.sha256).bind(5, m.author);
  s.bind(6, m.hypothesis).bind(7, m.predicted_effect).bind(8, m.gate).bind(9, nlohmann::json(m.risk).dump());
  s.bind(10, m.candidate.revision).bind(11, record.candidate_params.dump());
  s.bind(12, m.base.revision).bind(13, record.base_params.dump()).bind(14, utc_now());
  s.bind(15, record.candidate_sha).bind(16, record.base_sha).bind(17, record.worktree_dirty ? 1 : 0);
  s.bind(18, m.acceptance.is_null() ? std::string("{}") : m.acceptance.dump());
  s.bind(19, m.trace.is_null() ? std::string("{}") : m.trace.dump());
  s.bind(20, to_string(record.base_origin.kind)).bind(21, to_json(record.base_origin).dump());
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

std::string Ledger::sign(const std::string& message) const { return hmac_sha256_hex(key_.bytes, message); }

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
                 "reference_wall_s, candidate_wall_s, output_capture, failure_kind, failure_who, failure_signal, "
                 "failure_exit_code, failure_output, failure_metric, passing_wrong_candidates) "
                 "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    cs.bind(1, gate_run_id).bind(2, i).bind(3, c.gate_case.label).bind(4, c.gate_case.values.dump());
    cs.bind(5, to_string(c.verdict)).bind(6, c.reason).bind(7, c.reference_wall_s).bind(8, c.candidate_wall_s);
    cs.bind(9, i < record.output_capture.size() ? record.output_capture[i].dump() : std::string("{}"));
    cs.bind(10, to_string(c.failure.kind)).bind(11, to_string(c.failure.who));
    if (c.failure.signal) cs.bind(12, *c.failure.signal);
    if (c.failure.exit_code) cs.bind(13, *c.failure.exit_code);
    cs.bind(14, c.failure.output).bind(15, c.failure.metric);
    {
      nlohmann::json passing = nlohmann::json::array();
      for (const auto& o : c.outputs) {
        for (const auto& w : o.passing_wrong_candidates) passing.push_back({{"output", o.output}, {"candidate", w}});
      }
      cs.bind(16, c.outputs.empty() ? std::string() : passing.dump());
    }
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
  StageOutcome gate_stage;
  gate_stage.stage = "gate";
  gate_stage.verdict = stage_verdict_from(to_string(r.verdict));
  gate_stage.failure = r.failure;
  if (!record.lock_problems.empty() && !gate_stage.failure.failed()) gate_stage.failure.kind = FailureKind::lock;
  if (r.verdict != Verdict::green && !gate_stage.failure.failed()) gate_stage.failure.kind = FailureKind::unknown;
  gate_stage.reason = r.reason;
  gate_stage.wall_s = r.wall_s;
  insert_stage(experiment_id, gate_stage);
  t.commit();
  return gate_run_id;
}

void Ledger::record_bench(std::int64_t experiment_id, std::int64_t gate_run_id, const BenchResult& bench,
                          const Environment& env, const std::string& candidate_sha, const std::string& base_sha,
                          bool worktree_dirty) {
  Transaction t(db_);
  StageOutcome stage;
  stage.stage = "bench";
  stage.verdict = stage_verdict_from(to_string(bench.verdict));
  stage.failure = bench.failure;
  if (bench.verdict != Verdict::green && !stage.failure.failed()) stage.failure.kind = FailureKind::unknown;
  stage.reason = bench.reason;
  stage.wall_s = bench.harness_wall_s;
  insert_stage(experiment_id, stage);
  if (bench.verdict != Verdict::green) {
    t.commit();
    return;
  }
  nlohmann::json clocks = nlohmann::json::object();
  for (const auto& c : bench.cases) {
    const Decision& d = c.decision;
    nlohmann::json rounds = nlohmann::json::array();
    for (std::size_t r = 0; r < c.base.size() && r < c.candidate.size(); ++r) {
      nlohmann::json round = {{"base_ms", c.base[r].samples_ms}, {"candidate_ms", c.candidate[r].samples_ms}};
      if (c.base[r].sm_clock_mhz) round["base_sm_clock_mhz"] = *c.base[r].sm_clock_mhz;
      if (c.candidate[r].sm_clock_mhz) round["candidate_sm_clock_mhz"] = *c.candidate[r].sm_clock_mhz;
      if (r < c.base_walls.size() && r < c.candidate_walls.size()) {
        round["iterations"] = c.base_walls[r].iterations;  // warmup + timed, the same for both arms
        round["base_wall_ms"] = c.base_walls[r].wall_s * 1e3;
        round["candidate_wall_ms"] = c.candidate_walls[r].wall_s * 1e3;
      }
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
                "rounds_json, timing, timing_flags, timing_checks, guards) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    s.bind(1, experiment_id).bind(2, gate_run_id).bind(3, c.bench_case.label).bind(4, c.bench_case.values.dump());
    s.bind(5, c.unit).bind(6, to_string(d.verdict)).bind(7, d.reason).bind(8, d.base_median_ms);
    s.bind(9, d.base_relative_spread).bind(10, d.candidate_median_ms).bind(11, d.candidate_relative_spread);
    s.bind(12, d.speedup).bind(13, d.speedup_ci.lo).bind(14, d.speedup_ci.hi).bind(15, 1 - d.alpha_at_look);
    s.bind(16, d.p_value).bind(17, c.base.size()).bind(18, c.threshold).bind(19, c.capped ? 1 : 0);
    if (c.predicted_speedup) s.bind(20, *c.predicted_speedup);
    if (c.prediction_error) s.bind(21, *c.prediction_error);
    s.bind(22, rounds.dump());
    nlohmann::ordered_json flags = nlohmann::ordered_json::array();
    for (const auto& f : c.flags) flags.push_back({{"kind", to_string(f.kind)}, {"arm", f.arm}, {"reason", f.reason}, {"figures", f.figures}});
    s.bind(23, c.timing).bind(24, flags.dump()).bind(25, c.checks.dump());
    s.bind(26, guards_json(d).dump());
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

std::int64_t Ledger::record_ceilings(const MachineCeilings& m) {
  Transaction t(db_);
  Statement s(db_,
              "INSERT INTO machine_ceilings(host, device, device_name, bytes_per_s, flops_per_s, figures, tool, measured_at) "
              "VALUES (?,?,?,?,?,?,?,?)");
  s.bind(1, m.host).bind(2, m.device).bind(3, m.device_name).bind(4, m.bytes_per_s).bind(5, m.flops_per_s);
  s.bind(6, m.figures.dump()).bind(7, m.tool).bind(8, m.measured_at);
  s.run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  link("machine_ceilings", id);
  t.commit();
  return id;
}

std::optional<MachineCeilings> Ledger::latest_ceilings(const std::string& host, const std::string& device) const {
  Statement s(db_,
              "SELECT host, device, device_name, bytes_per_s, flops_per_s, figures, tool, measured_at FROM machine_ceilings "
              "WHERE host = ? AND device = ? ORDER BY id DESC LIMIT 1");
  s.bind(1, host).bind(2, device);
  if (!s.step()) return std::nullopt;
  MachineCeilings m;
  m.host = s.column(0).get<std::string>();
  m.device = s.column(1).get<std::string>();
  m.device_name = s.column(2).get<std::string>();
  m.bytes_per_s = s.column(3).get<double>();
  m.flops_per_s = s.column(4).get<double>();
  m.figures = parse_json_column(s.column(5));
  m.tool = s.column(6).get<std::string>();
  m.measured_at = s.column(7).get<std::string>();
  return m;
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
                                   const std::vector<TraceFindingRecord>& findings, const StageOutcome& outcome) {
  Transaction t(db_);
  insert_stage(experiment_id, outcome);
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

std::int64_t Ledger::insert_stage(std::int64_t experiment_id, const StageOutcome& o, std::optional<std::int64_t> acceptance_run) {
  Statement s(db_,
              "INSERT INTO stage_outcomes(experiment_id, stage, verdict, failure_kind, failure_who, failure_signal, "
              "failure_exit_code, failure_output, failure_metric, reason, wall_s, acceptance_run_id, recorded_at, failure_detail) "
              "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, experiment_id).bind(2, o.stage).bind(3, to_string(o.verdict)).bind(4, to_string(o.failure.kind));
  s.bind(5, to_string(o.failure.who));
  if (o.failure.signal) s.bind(6, *o.failure.signal);
  if (o.failure.exit_code) s.bind(7, *o.failure.exit_code);
  s.bind(8, o.failure.output).bind(9, o.failure.metric).bind(10, o.reason).bind(11, o.wall_s);
  if (acceptance_run) s.bind(12, *acceptance_run);
  s.bind(13, utc_now()).bind(14, o.failure.detail);
  s.run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  link("stage_outcomes", id);
  return id;
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

void Ledger::record_stage(std::int64_t experiment_id, const StageOutcome& outcome) {
  Transaction t(db_);
  try {
    insert_stage(experiment_id, outcome);
  } catch (const InfraError& e) {
    refused(path_, experiment_id, e);
  }
  t.commit();
}

std::string Ledger::record_finished(std::int64_t experiment_id, const std::string& owner) {
  Transaction t(db_);
  // The latest row of each stage; acceptance comes after promotion and is
  // not part of the experiment's verdict.
  Statement q(db_,
              "SELECT s.stage, s.verdict, s.reason FROM stage_outcomes s WHERE s.experiment_id = ? AND s.stage <> 'acceptance' "
              "AND s.id = (SELECT MAX(x.id) FROM stage_outcomes x WHERE x.experiment_id = s.experiment_id AND x.stage = s.stage) "
              "ORDER BY s.id");
  q.bind(1, experiment_id);
  const auto rank = [](const std::string& v) { return v == "error" ? 3 : v == "red" ? 2 : v == "green" || v == "skipped" ? 0 : 1; };
  std::string verdict = "green", stage, reason;
  bool gate = false;
  while (q.step()) {
    const auto st = q.column(0).get<std::string>();
    const auto v = q.column(1).get<std::string>();
    gate = gate || st == "gate";
    if (rank(v) > rank(verdict)) {
      verdict = rank(v) == 1 ? "unknown" : v;
      stage = st;
      reason = q.column(2).get<std::string>();
    }
  }
  if (!gate) verdict = "error", stage = "gate", reason = "no gate stage was recorded";
  Statement o(db_, "INSERT INTO experiment_outcomes(experiment_id, verdict, stage, reason, recorded_at) VALUES (?,?,?,?,?)");
  o.bind(1, experiment_id).bind(2, verdict).bind(3, stage).bind(4, reason).bind(5, utc_now());
  o.run();
  link("experiment_outcomes", sqlite3_last_insert_rowid(db_));
  const auto me = current_process();
  Statement ev(db_,
               "INSERT INTO experiment_events(experiment_id, event, owner, owner_host, owner_pid, owner_start, detail, at) "
               "VALUES (?,'finished',?,?,?,?,'',?)");
  ev.bind(1, experiment_id).bind(2, owner).bind(3, me.host).bind(4, static_cast<std::int64_t>(me.pid)).bind(5, me.start_ticks);
  ev.bind(6, utc_now());
  ev.run();
  link("experiment_events", sqlite3_last_insert_rowid(db_));
  t.commit();
  return verdict;
}

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

std::vector<ExperimentSummary> Ledger::summaries(const ListFilter& filter) const {
  return summaries_where(filter, 0);
}

ExperimentSummary Ledger::summary(std::int64_t experiment_id) const {
  auto all = summaries_where({}, experiment_id);
  if (all.empty()) throw InputError(path_.string(), {}, "", fmt::format("no experiment with id {} in the ledger", experiment_id));
  return all.front();
}

std::vector<ExperimentSummary> Ledger::summaries_where(const ListFilter& filter, std::int64_t only_id) const {
  std::vector<ExperimentSummary> out;
  std::map<std::int64_t, std::size_t> index;
  // Base tables only: no view stands between the rows and what is printed.
  Statement s(db_, fmt::format(
      "SELECT e.id, e.name, e.gate, e.author, e.submitted_at, g.profile, {} AS state, o.verdict, o.stage, o.reason, "
      "EXISTS (SELECT 1 FROM promotions p WHERE p.experiment_id = e.id), e.base_origin, e.base_origin_detail "
      "FROM experiments e LEFT JOIN gate_runs g ON g.experiment_id = e.id "
      "LEFT JOIN experiment_outcomes o ON o.experiment_id = e.id "
      "WHERE (?1 = 0 OR e.id = ?1) AND (?2 = '' OR e.gate = ?2) AND (?4 = '' OR e.submitted_at >= ?4) "
      "AND (?3 = '' OR COALESCE(o.verdict, 'pending') = ?3 OR {} = ?3) ORDER BY e.id", kStateSql, kStateSql).c_str());
  s.bind(1, only_id).bind(2, filter.gate).bind(3, filter.verdict).bind(4, filter.since);
  while (s.step()) {
    ExperimentSummary e;
    e.id = s.column(0).get<std::int64_t>();
    e.name = s.column(1).get<std::string>();
    e.gate = s.column(2).get<std::string>();
    e.author = s.column(3).get<std::string>();
    e.submitted_at = s.column(4).get<std::string>();
    e.profile = s.column(5).is_string() ? s.column(5).get<std::string>() : "";
    e.state = state_of(s.column(6));
    if (s.column(7).is_string()) {
      e.verdict = s.column(7).get<std::string>();
      e.verdict_stage = e.verdict == "green" ? "" : s.column(8).get<std::string>();
      e.reason = e.verdict == "green" ? "" : s.column(9).get<std::string>();
    }
    e.promoted = s.column(10).get<std::int64_t>() != 0;
    e.base_origin = base_origin_from_json(s.column(11).get<std::string>(),
                                          nlohmann::json::parse(s.column(12).get<std::string>(), nullptr, false));
    for (const char* st : {"gate", "bench", "trace", "acceptance"}) {
      StageOutcome o;
      o.stage = st;
      e.stages.push_back(o);
    }
    index[e.id] = out.size();
    out.push_back(std::move(e));
  }
  if (out.empty()) return out;
  const std::int64_t lo = out.front().id, hi = out.back().id;
  Statement st(db_,
               "SELECT experiment_id, stage, verdict, failure_kind, failure_who, failure_signal, failure_exit_code, failure_output, "
               "failure_metric, reason, wall_s, recorded_at, failure_detail FROM stage_outcomes WHERE experiment_id BETWEEN ? AND ? ORDER BY id");
  st.bind(1, lo).bind(2, hi);
  while (st.step()) {
    const auto it = index.find(st.column(0).get<std::int64_t>());
    if (it == index.end()) continue;
    auto& e = out[it->second];
    const auto name = st.column(1).get<std::string>();
    for (auto& o : e.stages) {
      if (o.stage != name) continue;  // later rows (a re-run acceptance) replace earlier ones
      o.verdict = stage_verdict_from(st.column(2).get<std::string>());
      o.failure = Failure{};
      o.failure.kind = failure_kind_from(st.column(3).get<std::string>());
      o.failure.who = failure_who_from(st.column(4).get<std::string>());
      if (st.column(5).is_number_integer()) o.failure.signal = static_cast<int>(st.column(5).get<std::int64_t>());
      if (st.column(6).is_number_integer()) o.failure.exit_code = static_cast<int>(st.column(6).get<std::int64_t>());
      o.failure.output = st.column(7).get<std::string>();
      o.failure.metric = st.column(8).get<std::string>();
      o.reason = st.column(9).get<std::string>();
      o.wall_s = st.column(10).is_number() ? std::optional<double>(st.column(10).get<double>()) : std::nullopt;
      o.recorded_at = st.column(11).get<std::string>();
      o.failure.detail = st.column(12).get<std::string>();
    }
  }
  // Speedups only of a green bench stage on a green gate stage.
  Statement b(db_, "SELECT experiment_id, case_label, verdict, speedup, speedup_lo, speedup_hi FROM bench_cases "
                   "WHERE experiment_id BETWEEN ? AND ? ORDER BY id");
  b.bind(1, lo).bind(2, hi);
  while (b.step()) {
    const auto it = index.find(b.column(0).get<std::int64_t>());
    if (it == index.end()) continue;
    auto& e = out[it->second];
    if (e.stage("gate").verdict != StageVerdict::green || e.stage("bench").verdict != StageVerdict::green) continue;
    e.speedups.push_back({b.column(1).get<std::string>(), b.column(2).get<std::string>(), b.column(3).get<double>(),
                          b.column(4).get<double>(), b.column(5).get<double>()});
  }
  return out;
}

nlohmann::ordered_json Ledger::list(const ListFilter& filter) const {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& e : summaries(filter)) out.push_back(to_json(e));
  return out;
}

std::string ChainHead::text() const { return fmt::format("{}:{}", seq, hash); }

ChainHead ChainHead::parse(const std::string& text, const std::string& what) {
  const auto colon = text.find(':');
  ChainHead h;
  bool ok = colon != std::string::npos && colon > 0;
  if (ok) {
    const std::string seq = text.substr(0, colon);
    h.hash = text.substr(colon + 1);
    while (!h.hash.empty() && std::isspace(static_cast<unsigned char>(h.hash.back()))) h.hash.pop_back();
    ok = seq.find_first_not_of("0123456789") == std::string::npos && seq.size() < 18 &&
         (h.hash.size() == 64 ? h.hash.find_first_not_of("0123456789abcdef") == std::string::npos : h.hash.empty() && seq == "0");
    if (ok) h.seq = std::stoll(seq);
  }
  if (!ok) throw InputError(what, {}, "", fmt::format("expected a head as 'densefeed ledger head' prints it (SEQ:HASH), got '{}'", text));
  return h;
}

ChainHead Ledger::head() const {
  ChainHead h;
  Statement s(db_, "SELECT seq, hash FROM record_chain ORDER BY seq DESC LIMIT 1");
  if (s.step()) h.seq = s.column(0).get<std::int64_t>(), h.hash = s.column(1).get<std::string>();
  return h;
}

std::string Ledger::extends(const ChainHead& expected) const {
  if (expected.seq == 0) return "";
  Statement s(db_, "SELECT hash FROM record_chain WHERE seq = ?");
  s.bind(1, expected.seq);
  if (!s.step()) {
    return fmt::format("the chain has no link {} any more (its head is {}): rows recorded after the expected head were deleted",
                       expected.seq, head().text());
  }
  if (s.column(0).get<std::string>() != expected.hash) {
    return fmt::format("link {} is not the one recorded earlier (expected {}, found {}): the history was rewritten", expected.seq,
                       expected.hash.substr(0, 16), s.column(0).get<std::string>().substr(0, 16));
  }
  return "";
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

double default_lock_wait_s() {
  if (const char* v = std::getenv("DENSEFEED_LEDGER_BUSY_S"); v && *v) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (end && *end == '\0' && s >= 0 && std::isfinite(s)) return s;
    throw InputError("environment", {}, "DENSEFEED_LEDGER_BUSY_S", fmt::format("'{}' is not a number of seconds", v));
  }
  return 60;
}

void Ledger::set_lock_wait(double seconds) {
  if (!std::getenv("DENSEFEED_LEDGER_BUSY_S")) sqlite3_busy_timeout(db_, static_cast<int>(1000 * std::max(seconds, 0.0)));
}

BlindSpots Ledger::blind_spots(const std::string& gate) const {
  BlindSpots out;
  Statement run(db_,
                "SELECT g.id, g.experiment_id, g.finished_at FROM gate_runs g WHERE g.gate = ? AND EXISTS "
                "(SELECT 1 FROM gate_cases c WHERE c.gate_run_id = g.id AND c.passing_wrong_candidates <> '') "
                "ORDER BY g.id DESC LIMIT 1");
  run.bind(1, gate);
  if (!run.step()) return out;
  out.gate_run_id = run.column(0).get<std::int64_t>();
  out.experiment_id = run.column(1).get<std::int64_t>();
  out.recorded_at = run.column(2).get<std::string>();
  Statement s(db_, "SELECT case_label, output, candidate FROM gate_blind_spots WHERE gate_run_id = ? ORDER BY case_index");
  s.bind(1, out.gate_run_id);
  while (s.step()) {
    out.entries.push_back({s.column(0).get<std::string>(), s.column(1).get<std::string>(), s.column(2).get<std::string>()});
  }
  return out;
}

std::vector<std::string> Ledger::schema_differences() const { return inventory_differences(db_); }

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

void Ledger::backup(const std::filesystem::path& to) const {
  std::error_code ec;
  if (std::filesystem::exists(to, ec)) throw InputError(to.string(), {}, "FILE", "exists; a backup never overwrites a file");
  sqlite3* dest = nullptr;
  if (sqlite3_open_v2(to.c_str(), &dest, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    std::string m = dest ? sqlite3_errmsg(dest) : "out of memory";
    sqlite3_close(dest);
    throw InfraError(fmt::format("{}: cannot create the backup: {}", to.string(), m));
  }
  sqlite3_backup* b = sqlite3_backup_init(dest, "main", db_, "main");
  int rc = SQLITE_OK;
  if (b) {
    // Steps of 256 pages with a pause when a writer holds the lock: writers
    // are not held up for the whole copy (sqlite.org/backup.html, example 2).
    do {
      rc = sqlite3_backup_step(b, 256);
      if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) sqlite3_sleep(50);
    } while (rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED);
    sqlite3_backup_finish(b);
  }
  const std::string m = sqlite3_errmsg(dest);
  const int final_rc = sqlite3_errcode(dest);
  sqlite3_close(dest);
  if (!b || rc != SQLITE_DONE || final_rc != SQLITE_OK) {
    std::filesystem::remove(to, ec);
    throw InfraError(fmt::format("{}: the backup failed: {}", to.string(), m));
  }
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
  for (const char* k : {"risk", "candidate_params", "base_params", "acceptance", "trace", "base_origin_detail"}) out[k] = parse_json_column(out[k]);
  out["state"] = to_string(state(experiment_id));
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
    row["timing_flags"] = parse_json_column(row["timing_flags"]);
    row["timing_checks"] = parse_json_column(row["timing_checks"]);
    row["guards"] = parse_json_column(row["guards"]);
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
  out["record"] = to_json(summary(experiment_id));
  return out;
}

}  // namespace densefeed
