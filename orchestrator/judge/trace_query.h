// `densefeed trace analyze`: trace files on disk analysed (trace_analysis.h)
// with the queries and checks of the command line, as one call that returns
// what its printers (trace_report.h) read.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "trace_analysis.h"
#include "trace_checks.h"

namespace densefeed {

struct TraceQuery {
  std::vector<std::filesystem::path> files;  // one per rank, or a folder of them (trace_loader.h)
  std::optional<std::string> window;         // analyse only the span of the slice(s) with this name
  std::vector<std::string> overlaps;         // selector texts, A B A B ... (trace_selector.h)
  std::size_t top = 10;                      // names per lane kind by exclusive time
  // A YAML file: a list of checks, or a manifest (its trace.checks), or a
  // document with `checks`; none: no checks run.
  std::optional<std::filesystem::path> checks_file;
};

struct TraceQueryResult {
  TraceAnalysis analysis;
  bool checked = false;                 // a checks file was given
  std::vector<TraceCheckResult> checks;  // one per check, in file order
  bool red() const;                     // a check failed
};

// Loads, analyses and checks. Throws InputError: an odd number of overlap
// selectors, a selector or check that does not parse, an overlap whose
// selection A has no slice (a figure of nothing is refused, not 0 %), and what
// load_trace and load_yaml_file throw for unreadable files.
TraceQueryResult analyze_trace_files(const TraceQuery& query);

}  // namespace densefeed
