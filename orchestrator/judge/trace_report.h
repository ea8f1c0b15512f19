// What `densefeed trace analyze` prints: the analyses and check results for
// people (text) and as one JSON document for agents (--json; schema:
// schemas/trace-report.schema.json). Times in JSON are integer ns from the
// trace's base (base_us, in the files' own clock); text shows ms.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace_analysis.h"
#include "trace_checks.h"

namespace densefeed {

nlohmann::ordered_json attributed_slice_json(const AttributedSlice& s);
nlohmann::ordered_json overlap_json(const OverlapResult& o);
nlohmann::ordered_json trace_warning_json(const TraceWarning& w);
nlohmann::ordered_json trace_file_json(const TraceFileInfo& f);
// One check's result: check, field, a, b, bound, unit, verdict, value, rank,
// ranks, reason, window, intervals, intervals_total.
nlohmann::ordered_json trace_check_json(const TraceCheckResult& r);
// files, warnings, checks, verdict: for the pipeline's trace stage.
nlohmann::ordered_json trace_check_report_json(const TraceCheckReport& report);

// The whole analysis; with `checks`, also "checks" and "verdict".
nlohmann::ordered_json trace_analysis_json(const TraceAnalysis& a, const std::vector<TraceCheckResult>* checks = nullptr);
std::string render_trace_analysis_text(const TraceAnalysis& a, const std::vector<TraceCheckResult>* checks = nullptr);
std::string render_trace_checks_text(const std::vector<TraceCheckResult>& results);

}  // namespace densefeed
