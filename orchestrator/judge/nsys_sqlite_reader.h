// Nsight Systems SQLite exports (`nsys export --type sqlite`; schema:
// "SQLite Export Schema Reference" in the nsys documentation). Tables read,
// when present: CUPTI_ACTIVITY_KIND_KERNEL, _MEMCPY, _MEMSET (GPU lanes per
// device and stream), _RUNTIME and _DRIVER (CPU lanes per thread), NVTX_EVENTS
// (push/pop ranges on annotation lanes of their thread, start/end ranges on
// async lanes, marks counted). Names come through StringIds; times are ns.
//
// Columns differ between nsys versions, so each is looked up with PRAGMA
// table_info: the kernel name is the first of demangledName, shortName,
// mangledName, name; deviceId, streamId, correlationId, globalPid/globalTid
// default to 0 / none, each absence counted in a missing_column warning.
// start and end are required. globalTid encodes the process and thread:
// pid = (globalTid >> 24) & 0xFFFFFF, tid = globalTid & 0xFFFFFF.
// Rows with start = end = 0 (CUPTI: "timestamp information could not be
// collected") and rows with end < start are skipped and counted.
#pragma once

#include <filesystem>
#include <optional>

#include "trace_timeline.h"

namespace densefeed {

// True when the file starts with SQLite's header ("SQLite format 3\0").
bool is_sqlite_file(const std::filesystem::path& path);

// Reads one export into `builder` as a new file entry with rank `rank` (none: 0).
// Throws InputError naming the file (and table/column) when it cannot be
// opened as SQLite, has none of the tables above, or a table lacks start/end.
void read_nsys_sqlite(const std::filesystem::path& path, TimelineBuilder& builder, std::optional<std::int64_t> rank);

}  // namespace densefeed
