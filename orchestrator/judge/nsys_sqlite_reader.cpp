#include "nsys_sqlite_reader.h"

#include <array>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <sqlite3.h>

#include "error.h"

namespace densefeed {
namespace {

// CUPTI_ACTIVITY_MEMCPY_KIND (cupti_activity.h), as nsys and Kineto name them.
std::string memcpy_name(std::int64_t kind) {
  static const std::array<const char*, 11> names = {"Memcpy Unknown", "Memcpy HtoD", "Memcpy DtoH", "Memcpy HtoA",
                                                    "Memcpy AtoH",    "Memcpy AtoA", "Memcpy AtoD", "Memcpy DtoA",
                                                    "Memcpy DtoD",    "Memcpy HtoH", "Memcpy PtoP"};
  if (kind >= 0 && kind < static_cast<std::int64_t>(names.size())) return names[static_cast<std::size_t>(kind)];
  return "Memcpy Unknown";
}

// NVTX event types in NVTX_EVENTS.eventType (nsys ENUM_NSYS_EVENT_TYPE).
constexpr int nvtx_mark = 34, nvtx_push_pop = 59, nvtx_start_end = 60, nvtxt_push_pop = 70, nvtxt_start_end = 71;

class Db {
 public:
  Db(const std::string& path) : path_(path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      throw InputError(path, {}, "", "cannot open as SQLite: " + msg);
    }
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3_stmt* prepare(const std::string& sql) const {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      throw InputError(path_, {}, "", fmt::format("SQLite: {} (in: {})", sqlite3_errmsg(db_), sql));
    }
    return st;
  }
  // Steps one row; false when done. Throws on errors (a corrupt file).
  bool step(sqlite3_stmt* st) const {
    const int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw InputError(path_, {}, "", fmt::format("SQLite: {}", sqlite3_errmsg(db_)));
  }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

struct Stmt {
  sqlite3_stmt* st;
  explicit Stmt(sqlite3_stmt* s) : st(s) {}
  ~Stmt() { sqlite3_finalize(st); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
};

std::set<std::string> table_names(const Db& db) {
  std::set<std::string> names;
  Stmt s(db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'"));
  while (db.step(s.st)) names.insert(reinterpret_cast<const char*>(sqlite3_column_text(s.st, 0)));
  return names;
}

std::set<std::string> columns_of(const Db& db, const std::string& table) {
  std::set<std::string> cols;
  Stmt s(db.prepare(fmt::format("PRAGMA table_info(\"{}\")", table)));
  while (db.step(s.st)) cols.insert(reinterpret_cast<const char*>(sqlite3_column_text(s.st, 1)));
  return cols;
}

class NsysReader {
 public:
  NsysReader(const std::filesystem::path& path, TimelineBuilder& builder, std::optional<std::int64_t> rank)
      : path_(path.string()), db_(path_), b_(builder), rank_(rank) {}

  void run();

 private:
  // The expression for `column` if the table has it, else `fallback` (and
  // the absence is counted).
  std::string column(const std::string& table, const std::set<std::string>& cols, const std::string& name,
                     const std::string& fallback, bool note = true);
  void require(const std::string& table, const std::set<std::string>& cols);
  std::uint32_t name_of(sqlite3_stmt* st, int col);
  std::int64_t rel(std::int64_t ns);
  // False (and counted) for rows a slice cannot come from.
  bool usable(const std::string& table, std::int64_t rowid, std::int64_t start, std::int64_t end);
  void read_gpu_table(const std::string& table);
  void read_api_table(const std::string& table, const char* category);
  void read_nvtx();

  std::string path_;
  Db db_;
  TimelineBuilder& b_;
  std::optional<std::int64_t> rank_;
  int file_ = 0;
  std::set<std::string> tables_;
  std::unordered_map<std::int64_t, std::uint32_t> string_ids_;
  std::optional<std::int64_t> base_;
};

std::string NsysReader::column(const std::string& table, const std::set<std::string>& cols, const std::string& name,
                               const std::string& fallback, bool note) {
  if (cols.contains(name)) return "\"" + name + "\"";
  if (note) b_.repair_note(file_, Repair::missing_column, table + "." + name);
  return fallback;
}

void NsysReader::require(const std::string& table, const std::set<std::string>& cols) {
  for (const char* c : {"start", "end"}) {
    if (!cols.contains(c)) throw InputError(path_, {}, table + "." + c, "the table lacks this column, which every nsys version writes");
  }
}

std::uint32_t NsysReader::name_of(sqlite3_stmt* st, int col) {
  switch (sqlite3_column_type(st, col)) {
    case SQLITE_INTEGER: {
      const auto it = string_ids_.find(sqlite3_column_int64(st, col));
      return it == string_ids_.end() ? b_.intern(fmt::format("<StringIds {}>", sqlite3_column_int64(st, col))) : it->second;
    }
    case SQLITE_TEXT: return b_.intern(reinterpret_cast<const char*>(sqlite3_column_text(st, col)));
    default: return 0;
  }
}

std::int64_t NsysReader::rel(std::int64_t ns) {
  if (!base_) {
    // Whole microseconds, floor.
    const std::int64_t us = ns >= 0 ? ns / 1000 : -((-ns + 999) / 1000);
    base_ = b_.base_micros(us);
  }
  return ns - *base_ * 1000;
}

bool NsysReader::usable(const std::string& table, std::int64_t rowid, std::int64_t start, std::int64_t end) {
  ++b_.counts().events;
  ++b_.file(file_).events;
  if (start == 0 && end == 0) {
    b_.repair_note(file_, Repair::zero_timestamp, fmt::format("{} rowid {}", table, rowid));
    return false;
  }
  if (end < start) {
    b_.repair_note(file_, Repair::negative_duration, fmt::format("{} rowid {}", table, rowid));
    return false;
  }
  return true;
}

void NsysReader::read_gpu_table(const std::string& table) {
  const auto cols = columns_of(db_, table);
  require(table, cols);
  std::string name_expr = "NULL";
  if (table == "CUPTI_ACTIVITY_KIND_KERNEL") {
    bool found = false;
    for (const char* c : {"demangledName", "shortName", "mangledName", "name"}) {
      if (cols.contains(c)) {
        name_expr = fmt::format("\"{}\"", c);
        found = true;
        break;
      }
    }
    if (!found) b_.repair_note(file_, Repair::missing_column, table + ".demangledName");
  } else if (table == "CUPTI_ACTIVITY_KIND_MEMCPY") {
    name_expr = column(table, cols, "copyKind", "0");
  }
  const std::string sql =
      fmt::format("SELECT rowid, start, \"end\", {}, {}, {}, {}, {} FROM \"{}\"", column(table, cols, "deviceId", "0"),
                  column(table, cols, "streamId", "0"), column(table, cols, "correlationId", "NULL"),
                  column(table, cols, "globalPid", "0"), name_expr, table);
  const bool kernel = table == "CUPTI_ACTIVITY_KIND_KERNEL", memcpy = table == "CUPTI_ACTIVITY_KIND_MEMCPY";
  const std::uint32_t cat = b_.intern(kernel ? "kernel" : memcpy ? "gpu_memcpy" : "gpu_memset");
  const std::uint32_t memset_name = b_.intern("Memset");
  Stmt s(db_.prepare(sql));
  while (db_.step(s.st)) {
    const std::int64_t rowid = sqlite3_column_int64(s.st, 0), start = sqlite3_column_int64(s.st, 1),
                       end = sqlite3_column_int64(s.st, 2);
    if (!usable(table, rowid, start, end)) continue;
    const std::int64_t device = sqlite3_column_int64(s.st, 3), stream = sqlite3_column_int64(s.st, 4);
    const std::int64_t correlation = sqlite3_column_type(s.st, 5) == SQLITE_NULL ? -1 : sqlite3_column_int64(s.st, 5);
    const std::int64_t pid = (sqlite3_column_int64(s.st, 6) >> 24) & 0xFFFFFF;
    std::uint32_t name = memset_name;
    if (kernel) name = name_of(s.st, 7);
    else if (memcpy) name = b_.intern(memcpy_name(sqlite3_column_int64(s.st, 7)));
    const std::uint32_t lane = b_.lane(file_, LaneKind::gpu, std::to_string(pid), fmt::format("{}:{}", device, stream));
    Lane& l = b_.lane_info(lane);
    l.device = device;
    l.stream = stream;
    b_.add_slice({rel(start), rel(end), correlation, name, cat, lane, static_cast<std::uint32_t>(rowid)});
  }
}

void NsysReader::read_api_table(const std::string& table, const char* category) {
  const auto cols = columns_of(db_, table);
  require(table, cols);
  const std::string sql = fmt::format("SELECT rowid, start, \"end\", {}, {}, {} FROM \"{}\"", column(table, cols, "globalTid", "0"),
                                      column(table, cols, "correlationId", "NULL"), column(table, cols, "nameId", "NULL"), table);
  const std::uint32_t cat = b_.intern(category);
  Stmt s(db_.prepare(sql));
  while (db_.step(s.st)) {
    const std::int64_t rowid = sqlite3_column_int64(s.st, 0), start = sqlite3_column_int64(s.st, 1),
                       end = sqlite3_column_int64(s.st, 2);
    if (!usable(table, rowid, start, end)) continue;
    const std::int64_t gtid = sqlite3_column_int64(s.st, 3);
    const std::int64_t correlation = sqlite3_column_type(s.st, 4) == SQLITE_NULL ? -1 : sqlite3_column_int64(s.st, 4);
    const std::uint32_t lane =
        b_.lane(file_, LaneKind::cpu, std::to_string((gtid >> 24) & 0xFFFFFF), std::to_string(gtid & 0xFFFFFF));
    b_.add_slice({rel(start), rel(end), correlation, name_of(s.st, 5), cat, lane, static_cast<std::uint32_t>(rowid)});
  }
}

void NsysReader::read_nvtx() {
  const std::string table = "NVTX_EVENTS";
  const auto cols = columns_of(db_, table);
  if (!cols.contains("start")) throw InputError(path_, {}, table + ".start", "the table lacks this column, which every nsys version writes");
  const std::string text = cols.contains("text") ? "\"text\"" : "NULL";
  const std::string text_id = cols.contains("textId") ? "\"textId\"" : "NULL";
  if (!cols.contains("text") && !cols.contains("textId")) b_.repair_note(file_, Repair::missing_column, table + ".text");
  const std::string sql = fmt::format("SELECT rowid, start, {}, {}, {}, coalesce({}, {}) FROM \"{}\"",
                                      column(table, cols, "end", "NULL"), column(table, cols, "eventType", "NULL", false),
                                      column(table, cols, "globalTid", "0"), text, text_id, table);
  const std::uint32_t cat = b_.intern("nvtx");
  Stmt s(db_.prepare(sql));
  while (db_.step(s.st)) {
    const std::int64_t rowid = sqlite3_column_int64(s.st, 0), start = sqlite3_column_int64(s.st, 1);
    const bool has_end = sqlite3_column_type(s.st, 2) != SQLITE_NULL;
    const std::int64_t end = sqlite3_column_int64(s.st, 2);
    const bool has_type = sqlite3_column_type(s.st, 3) != SQLITE_NULL;
    const int type = static_cast<int>(sqlite3_column_int64(s.st, 3));
    const bool range = has_type ? (type == nvtx_push_pop || type == nvtx_start_end || type == nvtxt_push_pop || type == nvtxt_start_end)
                                : has_end && end > start;
    if (!range) {
      ++b_.counts().events;
      ++b_.file(file_).events;
      if (!has_type || type == nvtx_mark) ++b_.counts().instants;
      else ++b_.counts().ignored;  // domain creation, registered strings, ...
      continue;
    }
    if (!has_end) {
      ++b_.counts().events;
      b_.repair_note(file_, Repair::begin_without_end, fmt::format("{} rowid {}", table, rowid));
      continue;
    }
    if (!usable(table, rowid, start, end)) continue;
    const std::int64_t gtid = sqlite3_column_int64(s.st, 4);
    const std::string pid = std::to_string((gtid >> 24) & 0xFFFFFF);
    const bool async = has_type && (type == nvtx_start_end || type == nvtxt_start_end);
    const std::uint32_t lane = async ? b_.lane(file_, LaneKind::async, pid, "async nvtx")
                                     : b_.lane(file_, LaneKind::annotation, pid, std::to_string(gtid & 0xFFFFFF));
    b_.add_slice({rel(start), rel(end), -1, name_of(s.st, 5), cat, lane, static_cast<std::uint32_t>(rowid)});
  }
}

void NsysReader::run() {
  TraceFileInfo info;
  info.path = path_;
  info.format = "nsys-sqlite";
  std::error_code ec;
  info.bytes = std::filesystem::file_size(path_, ec);
  info.rank = rank_.value_or(0);
  info.rank_source = rank_ ? "file order" : "default (single file)";
  file_ = b_.add_file(std::move(info));
  tables_ = table_names(db_);
  static const std::vector<std::string> known = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                                 "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME",
                                                 "CUPTI_ACTIVITY_KIND_DRIVER", "NVTX_EVENTS"};
  bool any = false;
  for (const auto& t : known) any = any || tables_.contains(t);
  if (!any) {
    throw InputError(path_, {}, "",
                     "not an nsys export: none of CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET, _RUNTIME, _DRIVER or "
                     "NVTX_EVENTS is in it");
  }
  if (tables_.contains("StringIds")) {
    Stmt s(db_.prepare("SELECT id, value FROM StringIds"));
    while (db_.step(s.st)) {
      const auto* v = reinterpret_cast<const char*>(sqlite3_column_text(s.st, 1));
      string_ids_[sqlite3_column_int64(s.st, 0)] = b_.intern(v ? v : "");
    }
  }
  for (const char* t : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"}) {
    if (tables_.contains(t)) read_gpu_table(t);
  }
  if (tables_.contains("CUPTI_ACTIVITY_KIND_RUNTIME")) read_api_table("CUPTI_ACTIVITY_KIND_RUNTIME", "cuda_runtime");
  if (tables_.contains("CUPTI_ACTIVITY_KIND_DRIVER")) read_api_table("CUPTI_ACTIVITY_KIND_DRIVER", "cuda_driver");
  if (tables_.contains("NVTX_EVENTS")) read_nvtx();
}

}  // namespace

bool is_sqlite_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char head[16] = {};
  in.read(head, 16);
  return in.gcount() == 16 && std::memcmp(head, "SQLite format 3", 16) == 0;
}

void read_nsys_sqlite(const std::filesystem::path& path, TimelineBuilder& builder, std::optional<std::int64_t> rank) {
  NsysReader(path, builder, rank).run();
}

}  // namespace densefeed
