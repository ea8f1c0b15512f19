// Trace checks, as a manifest's `trace` section states them: pass/fail
// questions on a timeline whose answers say which slices, where and when.
//
// YAML (a list; each item one key naming the check):
//   - overlap: {a: SELECTOR, b: SELECTOR, min_fraction: 0.8}   |U(A) ∩ U(B)| / |U(A)| >= min
//   - exposed: {a: SELECTOR, b: SELECTOR, max_ms: 2.5}         |U(A) \ U(B)| <= max (b defaults to class=compute)
//   - share:   {name: SELECTOR, max_fraction: 0.3}             |U(sel) ∩ W| / |W| <= max
// each with an optional `window: SLICE_NAME` (default: the whole trace).
// SELECTOR: trace_selector.h (a string "name=nccl;lane=gpu" or a mapping).
//
// Values are per rank; a check judges the worst rank (lowest overlap, most
// exposed time, largest share) and names it. A selection that matches
// nothing fails the check with a reason, never passes as 0 % or 0 ms.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trace_analysis.h"
#include "yaml_document.h"

namespace densefeed {

struct TraceCheck {
  enum class Kind { overlap, exposed, share };
  Kind kind = Kind::overlap;
  SliceSelector a;                   // share: the selection
  std::optional<SliceSelector> b;    // overlap: required; exposed: class=compute when absent; share: none
  double bound = 0;                  // overlap: min fraction; exposed: max ms; share: max fraction
  std::optional<std::string> window; // slice name
  std::string field;                 // where it was written ("trace.checks[0]"), for reports
};

std::string_view to_string(TraceCheck::Kind kind);

struct TraceCheckResult {
  TraceCheck check;
  bool passed = false;
  std::optional<double> value;       // the worst rank's; none when undefined (then failed)
  std::string unit;                  // "fraction" | "ms"
  std::optional<std::int64_t> rank;  // the worst rank
  std::vector<std::pair<std::int64_t, double>> ranks;  // every rank's value
  std::string reason;                // why it failed, or notes
  AnalysisWindow window;
  std::vector<AttributedSlice> intervals;  // overlap/exposed: A's slices not hidden on the worst rank,
                                           // most exposed first; share: the selection's longest slices
  std::size_t intervals_total = 0;
  // overlap/exposed: the worst rank's A and B slices in the window, in time
  // order, and where U(A) and U(B) meet (OverlapResult::involved_a, ...).
  std::vector<AttributedSlice> involved_a, involved_b;
  std::vector<std::pair<std::int64_t, std::int64_t>> overlaps;  // (start, end) ns
  std::size_t involved_total = 0, overlaps_total = 0;
};

// Reads checks from the YAML list at `pointer` of `doc` (e.g. "/trace/checks").
// Throws InputError at the offending item's line and column.
std::vector<TraceCheck> parse_trace_checks(const YamlDocument& doc, const std::string& pointer);

// Runs each check on the timeline. A window the trace has no slice for makes
// that check red (the reason says so); nothing here throws for the trace's content.
std::vector<TraceCheckResult> run_trace_checks(const Timeline& timeline, const std::vector<TraceCheck>& checks,
                                               std::size_t list_limit = 10);

// One call for the pipeline: load the trace file(s), run the checks.
struct TraceCheckReport {
  std::vector<TraceFileInfo> files;
  std::vector<TraceWarning> warnings;
  std::vector<TraceCheckResult> results;
  bool passed = false;  // every check passed
};
TraceCheckReport check_trace(const std::vector<std::filesystem::path>& files, const std::vector<TraceCheck>& checks,
                             std::size_t list_limit = 10);

}  // namespace densefeed
