// `densefeed report --compare A B` (and a report folder's compare pages):
// two experiments side by side on one self-contained page. Case by case each
// one's gate verdict and error against its tolerance, the error headroom of
// both drawn (report_trends.h's definition), bench case by bench case the
// medians, speedup, interval and verdict of each, and the fields that differ
// (store/experiment_comparison.h: what `ledger compare` prints).
#pragma once

#include "experiment_comparison.h"
#include "experiment_record.h"
#include "report_frame.h"

namespace densefeed {

// `a` and `b`: Ledger::record of each; `differences`: compare_experiments(a, b).
// Cases and bench cases are matched by label; one only the one experiment
// ran is shown with the other's cells empty.
ReportPage compare_report(const ExperimentRecord& a, const ExperimentRecord& b, const ExperimentComparison& differences, const LedgerFacts& facts,
                          const std::string& vega_scripts, const ReportLinks& links = {});

}  // namespace densefeed
