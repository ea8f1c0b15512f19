#include "ledger_identity.h"

#include <sqlite3.h>

namespace densefeed {

std::string ledger_key_fingerprint(const std::filesystem::path& ledger) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(ledger, ec)) return "";
  sqlite3* db = nullptr;
  std::string fingerprint;
  if (sqlite3_open_v2(ledger.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT fingerprint FROM chain_keys ORDER BY id LIMIT 1", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_TEXT) {
      fingerprint = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return fingerprint;
}

}  // namespace densefeed
