// A gate page's trends over its experiments: how close each case came to its
// tolerance and how the benchmark's medians moved, experiment by experiment.
// Internal to present/'s HTML printers (report_html.cpp's gate page).
#pragma once

#include <vector>

#include "experiment_record.h"
#include "report_page.h"

namespace densefeed::report_page {

// Error headroom of a case in one experiment: the largest value / bound over
// its outputs' metrics (1 = at the tolerance, over 1 = red); metrics with a
// bound of 0 or an undefined value (NaN) are left out, a case none is left
// for has no headroom. The chart draws headrooms above 0 on a log axis (0:
// exact, only in the table); the table gives every figure.
// Bench medians: per bench case and arm, the median time in its unit.
// `records` in the order to draw them (id order).
void gate_trend_sections(Page& page, const std::vector<ExperimentRecord>& records, const ReportLinks& links);

}  // namespace densefeed::report_page
