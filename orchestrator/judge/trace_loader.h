// Trace files to one timeline: the entry point of trace analysis.
#pragma once

#include <filesystem>
#include <vector>

#include "trace_timeline.h"

namespace densefeed {

// Reads every file (a directory stands for its *.json, *.json.gz, *.sqlite
// files, sorted by name, as HTA reads a trace folder) into one timeline:
// nsys SQLite exports are recognised by their header, everything else is read
// as Chrome Trace Event Format JSON (plain or gzip). Each file's rank is its
// distributedInfo.rank, else its position among the files (0 when there is
// one). Throws InputError for a missing or unreadable file, an empty list,
// a file the readers refuse, or a timeline with no slice at all.
Timeline load_trace(const std::vector<std::filesystem::path>& paths);

}  // namespace densefeed
