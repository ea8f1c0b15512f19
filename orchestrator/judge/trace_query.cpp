#include "trace_query.h"

#include <algorithm>

#include "error.h"
#include "trace_loader.h"
#include "yaml_document.h"

namespace densefeed {

bool TraceQueryResult::red() const {
  return std::any_of(checks.begin(), checks.end(), [](const TraceCheckResult& r) { return !r.passed; });
}

TraceQueryResult analyze_trace_files(const TraceQuery& query) {
  AnalysisOptions options;
  options.window = query.window;
  options.top = query.top;
  if (query.overlaps.size() % 2 != 0) {
    throw InputError("command line", {}, "--overlap", "expected two selectors, A and B, after each --overlap");
  }
  for (std::size_t i = 0; i + 1 < query.overlaps.size(); i += 2) {
    options.overlaps.emplace_back(SliceSelector::parse(query.overlaps[i], "--overlap"), SliceSelector::parse(query.overlaps[i + 1], "--overlap"));
  }
  std::vector<TraceCheck> checks;
  if (query.checks_file) {
    const auto doc = load_yaml_file(*query.checks_file);
    std::string pointer;
    if (doc.value.is_object() && doc.value.contains("trace")) pointer = "/trace/checks";
    else if (doc.value.is_object() && doc.value.contains("checks")) pointer = "/checks";
    checks = parse_trace_checks(doc, pointer);
  }
  const Timeline timeline = load_trace(query.files);
  TraceQueryResult result;
  result.analysis = analyze_trace(timeline, options);
  // An overlap of nothing is no figure: refuse the query rather than print 0 %.
  for (const auto& o : result.analysis.overlaps) {
    if (o.a_slices == 0) throw InputError("command line", {}, "--overlap", o.notes.front());
  }
  result.checks = run_trace_checks(timeline, checks, options.list_limit);
  result.checked = query.checks_file.has_value();
  return result;
}

}  // namespace densefeed
