// The verdict document of a recorded experiment (`densefeed status --json`,
// the MCP server's get_status): its state, each stage's status, for a red
// gate the attributable details (case, output, metric, value, bound, worst
// index, first failing slice, trend tables), for the benchmark each case's
// verdict with its interval, for traces the failed checks with the
// intervals involved, and `next` (next_steps.h). Read back from the ledger,
// so it is the same whether a `run` or a worker produced the result.
// Schema: schemas/status.schema.json.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

namespace densefeed {

struct GateResult;
struct GateSpec;

// `record` is Ledger::show(id); `gate` (may be null: the gate file is gone or
// unreadable) supplies the trend-table axes and the candidate command for
// `next`; `ledger_path` locates the run folders (LEDGER-runs/ID).
nlohmann::ordered_json status_document(const nlohmann::ordered_json& record, const GateSpec* gate,
                                       const std::filesystem::path& ledger_path);

// The gate run of a record as a GateResult (cases, their values and metric
// checks; no process details), enough to tabulate error trends.
GateResult gate_result_from_record(const nlohmann::ordered_json& record);

}  // namespace densefeed
