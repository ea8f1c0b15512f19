// SQL on a ledger file through a connection of its own, beside the Ledger
// class (the ledger tests reach under it as an attacker with sqlite3 would).
#pragma once

#include <sqlite3.h>

#include <filesystem>
#include <string>

namespace densefeed::testing {

// Runs SQL on its own connection; returns SQLite's error message or "".
inline std::string plain_sql(const std::filesystem::path& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(db_path.c_str(), &db);
  char* message = nullptr;
  std::string error;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) error = message ? message : "?";
  sqlite3_free(message);
  sqlite3_close(db);
  return error;
}

// The first column of the first row of `sql` ("" when none).
inline std::string sql_one_value(const std::filesystem::path& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(db_path.c_str(), &db);
  std::string out;
  sqlite3_exec(
      db, sql.c_str(),
      [](void* o, int, char** values, char**) {
        if (static_cast<std::string*>(o)->empty() && values[0]) *static_cast<std::string*>(o) = values[0];
        return 0;
      },
      &out, nullptr);
  sqlite3_close(db);
  return out;
}

}  // namespace densefeed::testing
