#include "ledger_sql.h"

#include "sha256.h"

namespace densefeed::ledger_sql {

ExperimentState state_of(const nlohmann::ordered_json& column) {
  const std::string text = column.is_string() ? column.get<std::string>() : column.dump();
  if (const auto s = experiment_state_from(text)) return *s;
  throw InfraError(fmt::format("the ledger holds an experiment state densefeed does not know: '{}'", text));
}

void exec(sqlite3* db, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    throw InfraError(fmt::format("{}: {} (in: {:.60})", sqlite3_db_filename(db, "main"), text, sql));
  }
}

nlohmann::ordered_json parse_json_column(const nlohmann::ordered_json& v) {
  if (!v.is_string()) return v;
  try {
    return nlohmann::ordered_json::parse(v.get<std::string>());
  } catch (...) {
    return v;
  }
}

std::vector<std::string> columns_of(sqlite3* db, const std::string& table) {
  std::vector<std::string> out;
  Statement s(db, fmt::format("SELECT name FROM pragma_table_info('{}') ORDER BY cid", table).c_str());
  while (s.step()) out.push_back(s.column(0).get<std::string>());
  return out;
}

std::optional<std::string> row_sha256(sqlite3* db, const std::string& table, const std::vector<std::string>& columns,
                                      std::int64_t row_id) {
  std::string select;
  // Identifiers quoted as SQL quotes them ("" inside "..."): a name is read as a name, never as SQL.
  const auto quoted = [](const std::string& name) {
    std::string q = "\"";
    for (char ch : name) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  for (const auto& c : columns) select += (select.empty() ? "" : ", ") + quoted(c);
  Statement s(db, fmt::format("SELECT {} FROM \"{}\" WHERE id = ?", select, table).c_str());
  s.bind(1, row_id);
  if (!s.step()) return std::nullopt;
  std::string bytes;
  for (int i = 0; i < s.columns(); ++i) bytes += s.typed_bytes(i);
  return sha256_hex(bytes);
}

[[noreturn]] void refused(const std::filesystem::path& path, std::int64_t id, const InfraError& e) {
  std::string why = e.what();
  const auto colon = why.rfind(": ");
  if (colon != std::string::npos && why.find(path.string()) == 0) why = why.substr(path.string().size() + 2);
  throw InputError(path.string(), {}, fmt::format("experiment {}", id), why);
}

}  // namespace densefeed::ledger_sql
