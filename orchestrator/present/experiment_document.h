// The verdict document of a recorded experiment: one pure function of its
// typed record (experiment_record.h), printed by `status --json` and the MCP
// server's get_status as it is, by `run --json` with the run's own view added
// (report.h: processes, sandbox, caches: what only the run that just ended
// holds), and by `ledger show --json` beside the raw rows. Its state, each
// stage's status, for a red gate the attributable details (case, output,
// metric, value, bound, worst index, first failing slice, trend tables), for
// the benchmark each case's verdict with its interval and guards, for traces
// the failed checks with the intervals involved, and `next` (next_steps.h),
// computed here once. Schema: schemas/status.schema.json.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

#include "experiment_record.h"

namespace densefeed {

struct GateResult;
struct GateSpec;

// `gate` (may be null: the gate file is gone or unreadable) supplies the
// trend-table axes and the candidate command for `next`; `ledger_path`
// locates the run folders (LEDGER-runs/ID). Never throws on a record the
// ledger returned.
nlohmann::ordered_json experiment_document(const ExperimentRecord& record, const GateSpec* gate, const std::filesystem::path& ledger_path);

// The gate run of a record as a GateResult (cases, their values and metric
// checks; no process details), enough to tabulate error trends.
GateResult gate_result_from_record(const ExperimentRecord& record);

}  // namespace densefeed
