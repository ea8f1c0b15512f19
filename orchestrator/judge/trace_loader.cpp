#include "trace_loader.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "chrome_trace_reader.h"
#include "error.h"
#include "nsys_sqlite_reader.h"

namespace densefeed {

Timeline load_trace(const std::vector<std::filesystem::path>& paths) {
  std::vector<std::filesystem::path> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::filesystem::path> found;
      for (const auto& e : std::filesystem::directory_iterator(p)) {
        const std::string name = e.path().filename().string();
        if (e.is_regular_file() && (name.ends_with(".json") || name.ends_with(".json.gz") || name.ends_with(".sqlite"))) {
          found.push_back(e.path());
        }
      }
      std::sort(found.begin(), found.end());
      if (found.empty()) throw InputError(p.string(), {}, "", "the folder holds no *.json, *.json.gz or *.sqlite trace");
      files.insert(files.end(), found.begin(), found.end());
    } else if (!std::filesystem::is_regular_file(p, ec)) {
      throw InputError(p.string(), {}, "", "no such trace file");
    } else {
      files.push_back(p);
    }
  }
  if (files.empty()) throw InputError("command line", {}, "", "no trace file given");

  TimelineBuilder builder;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::optional<std::int64_t> rank = files.size() > 1 ? std::optional<std::int64_t>(static_cast<std::int64_t>(i)) : std::nullopt;
    if (is_sqlite_file(files[i])) read_nsys_sqlite(files[i], builder, rank);
    else read_chrome_trace(files[i], builder, rank);
  }
  std::map<std::int64_t, int> seen;
  for (int f = 0; f < builder.file_count(); ++f) {
    const auto [it, fresh] = seen.emplace(builder.file(f).rank, f);
    if (!fresh) {
      builder.repair_note(f, Repair::duplicate_rank,
                          fmt::format("rank {} also in {}", builder.file(f).rank, builder.file(it->second).path));
    }
  }
  Timeline t = builder.finish();
  if (t.slices.empty()) {
    throw InputError(files.front().string(), {}, "",
                     fmt::format("no slice to analyse: {} event(s) read, none with a duration (X, B/E, b/e, or nsys rows)",
                                 t.counts.events));
  }
  return t;
}

}  // namespace densefeed
