// Opening a ledger: the file checks, the schema and its migrations, the
// inventory of schema objects compared with the SQL compiled in, and the
// lock wait every write waits with.
#include "ledger.h"

#include <sqlite3.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "error.h"
#include "ledger_schema_sql.h"
#include "ledger_sql.h"
#include "sha256.h"

namespace densefeed {
using namespace ledger_sql;
namespace {

constexpr int kSchemaVersion = 12;

// How long a reader waits for an empty SQLite file to become a ledger: a
// writer creating one (a run, a submit, the service's worker) leaves the file
// empty for the milliseconds between creating it and committing its schema.
constexpr double kCreationWaitS = 5;

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
  Statement s(db, "SELECT type, name, sql FROM sqlite_schema WHERE lower(substr(name, 1, 7)) <> 'sqlite_' AND sql IS NOT NULL");
  while (s.step()) out[{s.column(0).get<std::string>(), s.column(1).get<std::string>()}] = normalized_sql(s.column(2).get<std::string>());
  return out;
}

// Every migration's SQL, version 2 first: kMigrations[v - 2] takes a ledger
// from version v - 1 to v. Ledger's open applies them in this order, one
// version at a time.
constexpr const char* kMigrations[] = {kLedgerMigration2Sql, kLedgerMigration3Sql, kLedgerMigration4Sql, kLedgerMigration5Sql,
                                       kLedgerMigration6Sql, kLedgerMigration7Sql, kLedgerMigration8Sql,
                                       kLedgerMigration9Sql, kLedgerMigration10Sql, kLedgerMigration11Sql,
                                       kLedgerMigration12Sql};
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

std::int64_t schema_version(sqlite3* db) {
  Statement has(db, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_info'");
  has.step();
  if (has.column(0).get<std::int64_t>() == 0) return 0;
  Statement v(db, "SELECT MAX(version) FROM schema_info");
  v.step();
  return v.column(0).is_number_integer() ? v.column(0).get<std::int64_t>() : -1;
}

// The file at `path` opened as SQLite (read_only: it must exist; else its
// folder is made), with the lock wait as its busy timeout. Nothing is read
// yet. Throws InputError for what is not a regular file, InfraError when
// SQLite cannot open it.
sqlite3* open_file(const std::filesystem::path& path, bool read_only) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    throw InputError(path.string(), {}, "", "not a regular file, so not a densefeed ledger");
  }
  if (read_only && !std::filesystem::is_regular_file(path, ec)) {
    throw InputError(path.string(), {}, "", "no ledger here (it is created by the first 'densefeed run' or 'submit')");
  }
  if (!read_only && path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  sqlite3* db = nullptr;
  const int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw InfraError(fmt::format("{}: cannot open the ledger: {}", path.string(), message));
  }
  sqlite3_busy_timeout(db, static_cast<int>(1000 * default_lock_wait_s()));
  return db;
}

// The schema version of an opened file that is a densefeed ledger (0: an
// empty file, which read_only refuses). Throws InputError for a file that is
// not SQLite, is damaged or is another program's database, InfraError for a
// version newer than this densefeed's.
std::int64_t check_is_ledger(sqlite3* db, const std::filesystem::path& path, bool read_only) {
  // Nothing is written before the file is known to be a ledger (or empty):
  // a file that is not SQLite fails its first read, a damaged one its check.
  char* message = nullptr;
  int rc = sqlite3_exec(db, "SELECT COUNT(*) FROM sqlite_schema", nullptr, nullptr, &message);
  std::string text = message ? message : "";
  sqlite3_free(message);
  if (rc == SQLITE_NOTADB) throw InputError(path.string(), {}, "", "not an SQLite database, so not a densefeed ledger");
  if (rc == SQLITE_CORRUPT) throw InputError(path.string(), {}, "", "the ledger file is damaged (SQLite: " + text + ")");
  if (rc != SQLITE_OK) throw InfraError(fmt::format("{}: cannot read the ledger: {}", path.string(), text));
  {
    Statement check(db, "PRAGMA quick_check");
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
  const std::int64_t version = schema_version(db);
  std::int64_t tables = 0;
  {
    Statement any_table(db, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table'");
    any_table.step();
    tables = any_table.column(0).get<std::int64_t>();
  }
  if (version == 0 && tables == 0 && read_only) {
    throw InputError(path.string(), {}, "", fmt::format("an empty SQLite file, not yet a densefeed ledger (waited {:g} s for a run or "
                                                        "submit creating it to finish)", kCreationWaitS));
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
  return version;
}

// Throws InputError when the ledger's schema objects are not the SQL
// compiled in; `doing` says what densefeed will not do ("read", "write to").
void require_compiled_schema(sqlite3* db, const std::filesystem::path& path, const char* doing) {
  if (const auto differ = inventory_differences(db); !differ.empty()) {
    throw InputError(path.string(), {}, "",
                     fmt::format("the ledger's schema objects are not the SQL compiled into densefeed ({}{}); it was edited "
                                 "outside densefeed, so densefeed will not {} it (densefeed audit lists them)",
                                 differ.front(), differ.size() > 1 ? fmt::format(", and {} more", differ.size() - 1) : "", doing));
  }
}

// Whether the file holds a chain key's fingerprint (chain_keys, version 3).
bool keyed(sqlite3* db) {
  Statement has_keys(db, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = 'chain_keys'");
  has_keys.step();
  bool keyed = has_keys.column(0).get<std::int64_t>() > 0;
  if (keyed) {
    Statement rows(db, "SELECT COUNT(*) FROM chain_keys");
    rows.step();
    keyed = rows.column(0).get<std::int64_t>() > 0;
  }
  return keyed;
}

// The version-2 chain (plain sha256) checked before it is re-sealed: a
// migration must never launder an edit made while the chain was unkeyed.
// Throws InputError at the first broken link.
void check_v2_chain(sqlite3* db, const std::filesystem::path& path) {
  std::string prev2;
  Statement old_links(db, "SELECT seq, table_name, row_id, columns, content_sha256, prev_hash, hash FROM record_chain ORDER BY seq");
  while (old_links.step()) {
    const auto seq = old_links.column(0).get<std::int64_t>();
    const auto table = old_links.column(1).get<std::string>();
    const auto row = old_links.column(2).get<std::int64_t>();
    const auto content = old_links.column(4).get<std::string>();
    std::optional<std::string> now;
    try {
      now = row_sha256(db, table, nlohmann::json::parse(old_links.column(3).get<std::string>()).get<std::vector<std::string>>(), row);
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

// Waits (at most kCreationWaitS, polling every 20 ms) while the opened file is
// an SQLite database without a single table, so that a reader opening a
// ledger another process is creating reads the finished ledger instead of
// refusing the empty file. Returns at once for anything else (a ledger, a
// foreign database, a file that is not SQLite: check_is_ledger names those).
void wait_while_being_created(sqlite3* db) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kCreationWaitS);
  for (;;) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM sqlite_schema", -1, &st, nullptr) != SQLITE_OK) {
      sqlite3_finalize(st);
      return;
    }
    const bool empty = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) == 0;
    sqlite3_finalize(st);
    if (!empty || std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

Ledger::Ledger(const std::filesystem::path& path, Mode mode) : path_(path), heartbeat_s_(default_heartbeat_s()) {
  const bool read_only = mode == Mode::read_only;
  db_ = open_file(path_, read_only);
  try {
    if (read_only) wait_while_being_created(db_);
    const std::int64_t version = check_is_ledger(db_, path_, read_only);
    if (read_only || mode == Mode::audit) open_for_reading(mode, version);
    else open_for_writing();
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

void Ledger::open_for_reading(Mode mode, std::int64_t version) {
  if (version < kSchemaVersion) {
    // Opening an old ledger migrates it, also for a reader.
    sqlite3_close(db_);
    db_ = nullptr;
    { Ledger migrate(path_, Mode::read_write); }
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      throw InfraError(fmt::format("{}: cannot reopen the ledger: {}", path_.string(), sqlite3_errmsg(db_)));
    }
    sqlite3_busy_timeout(db_, static_cast<int>(1000 * default_lock_wait_s()));
  }
  load_key(false);
  if (mode != Mode::audit) require_compiled_schema(db_, path_, "read");
}

void Ledger::open_for_writing() {
  use_wal(db_, default_lock_wait_s());
  exec(db_, "PRAGMA foreign_keys = ON");
  Transaction t(db_);
  // Read again under the write lock: another process may have created or
  // migrated the file since.
  const std::int64_t v = schema_version(db_);
  // The key is made with the ledger (or its migration to keyed links);
  // a keyed ledger whose key is gone is refused, never re-keyed.
  load_key(!keyed(db_));
  migrate_from(v);
  {
    Statement k(db_, "SELECT fingerprint FROM chain_keys ORDER BY id LIMIT 1");
    if (!k.step()) {
      Statement ins(db_, "INSERT INTO chain_keys(fingerprint, created_at) VALUES (?, ?)");
      ins.bind(1, key_.fingerprint).bind(2, utc_now());
      ins.run();
      link("chain_keys", sqlite3_last_insert_rowid(db_));
    }
  }
  require_compiled_schema(db_, path_, "write to");
  {
    Statement k(db_, "SELECT fingerprint FROM chain_keys ORDER BY id LIMIT 1");
    k.step();
    if (k.column(0).get<std::string>() != key_.fingerprint) {
      throw InputError(key_.file.string(), {}, "",
                       fmt::format("this key (fingerprint {}) is not the ledger's (fingerprint {} in {}); pass the ledger's key "
                                   "with --ledger-key FILE or DENSEFEED_LEDGER_KEY", key_.fingerprint.substr(0, 16),
                                   k.column(0).get<std::string>().substr(0, 16), path_.string()));
    }
  }
  t.commit();
}

void Ledger::migrate_from(std::int64_t v) {
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
    migrate_to_3(v2_links_made_here);
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
  if (v < 10) {
    // bench_cases made again with its rows and ids (which its links name;
    // the values are unchanged), its numbers nullable: a case interrupted
    // before two rounds has no interval.
    exec(db_, kLedgerMigration10Sql);
    Statement(db_, "INSERT INTO schema_info(version) VALUES (10)").run();
    v = 10;
  }
  if (v < 11) {
    // Three experiments columns (covered by the links already made: a
    // link's columns are recorded with it): parent_id, step, case_filter.
    exec(db_, kLedgerMigration11Sql);
    Statement(db_, "INSERT INTO schema_info(version) VALUES (11)").run();
    v = 11;
  }
  if (v < 12) {
    // gate_cases.parts (issue 30), NULL for rows before.
    exec(db_, kLedgerMigration12Sql);
    Statement(db_, "INSERT INTO schema_info(version) VALUES (12)").run();
    v = 12;
  }
}

void Ledger::migrate_to_3(bool v2_links_made_here) {
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
    // A chain step 2 made in this transaction was never unkeyed.
    if (!v2_links_made_here) check_v2_chain(db_, path_);
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
}

Ledger::~Ledger() { sqlite3_close(db_); }

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

std::vector<std::string> Ledger::schema_differences() const { return inventory_differences(db_); }

}  // namespace densefeed
