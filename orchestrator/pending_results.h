// Results computed but not yet in the ledger. A run writes its gate run here
// (RUN_FOLDER/pending-gate-run.json) before it takes the ledger's write lock,
// and removes it once the ledger holds it; a run that could not get the lock
// (LedgerBusy) or that was killed while waiting leaves it, and `densefeed
// ledger recover` records it later. So no computed result is lost to a
// held lock or a crash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gate_runner.h"
#include "ledger.h"

namespace densefeed {

inline constexpr const char* kPendingGateRunFile = "pending-gate-run.json";

// A gate run as the ledger records it: the record's fields and the result's
// fields that record_gate_run reads (verdicts, reasons, typed failures,
// metrics, slices, wrong candidates), not the harness logs.
struct PendingGateRun {
  std::int64_t experiment_id = 0;
  GateRunRecord record;  // record.result points at `result`
  GateResult result;
};

// Writes `dir`/pending-gate-run.json atomically (a temporary file renamed).
// Throws InfraError when it cannot.
std::filesystem::path write_pending_gate_run(const std::filesystem::path& dir, std::int64_t experiment_id,
                                             const GateRunRecord& record);
// Reads one. Throws InputError naming the file when it is not one.
PendingGateRun read_pending_gate_run(const std::filesystem::path& file);

// Every RUNS/ID/pending-gate-run.json, by experiment id.
std::vector<std::filesystem::path> pending_gate_runs(const std::filesystem::path& runs_dir);

// `densefeed ledger recover`: records every pending gate run whose
// experiment has no gate stage yet, with its bench and trace stages skipped
// (the run stopped before them) and the overall verdict, and removes each
// file once the ledger holds it (also when it held it already).
struct RecoveredRun {
  std::int64_t experiment_id = 0;
  std::string file;
  std::string outcome;  // recorded | already recorded
  std::string verdict;  // the overall verdict now
  std::size_t cases = 0;
};
std::vector<RecoveredRun> recover_pending(Ledger& ledger, const std::filesystem::path& runs_dir);

}  // namespace densefeed
