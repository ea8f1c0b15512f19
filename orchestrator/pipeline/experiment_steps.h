// The steps of execute_experiment (experiment_runner.h), in the order it
// takes them: the gate (lock and revision checks, the candidate's and the
// trusted ref's builds, run_gate, the export checked again), the gate run
// recorded, the bench, the trace. Each fills the outcome and writes the
// ledger as the one function did; what they share beyond the outcome is an
// ExperimentRun.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "case_grid.h"
#include "experiment_outcome.h"
#include "gate_runner.h"
#include "revision_build.h"

namespace densefeed {

class Ledger;
class Executor;

struct ExperimentRun {
  Executor& executor;     // RunOptions::executor: every job of the run
  std::vector<Case> cases;  // the profile's, and every bench case (gated in the same run)
  std::string started_at;   // UTC, when the run began
  // Every run's folder, with every reference's outputs: hidden from
  // sandboxed commands, so that no candidate can copy a reference's answer.
  std::filesystem::path runs_dir;
  std::vector<std::filesystem::path> revision_dirs;  // revision builds the sandbox must still show
  // How the gate ran its reference: the bench runs it the same way for a
  // driver's other input sets (BenchOptions::references).
  std::optional<GateRunOptions> reference_options;
  std::int64_t gate_run_id = 0;  // the ledger's row of the gate run, once recorded
  // The base revision's build, made once for the stages that run the base
  // (the bench, the trace): see base_revision_arm.
  std::optional<RevisionBuild> base_build;
};

// The gate stage: out.gate_result, red or error before any case when the
// lock, the candidate's own commits, its build or the trusted build say so.
void gate_experiment(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options, ExperimentRun& run);
// Records the gate run (kept in the run folder first: `densefeed ledger
// recover` records it after a crash or a held lock); sets run.gate_run_id.
// Throws LedgerBusy naming the kept file.
void record_gate_experiment(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options, ExperimentRun& run);
// The bench stage (green gate only), recorded whatever its verdict, or its
// skip recorded with why.
void bench_experiment(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options, ExperimentRun& run);
// The trace stage (green gate and a trace section only), its findings
// recorded, or its skip recorded with why.
void trace_experiment(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options, ExperimentRun& run);
// The base arm at its revision (the manifest's base is not WORKTREE), built
// the first time a stage asks and reused after: out.base_arm becomes the
// revision's context (its hidden paths kept, its compile cache keyed by the
// build), the build's folder joins run.revision_dirs and what its export
// check found altered is recorded once. Returns the build; `ok` false means
// nothing may run in the base's place.
const RevisionBuild& base_revision_arm(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options, ExperimentRun& run);
// Records a stage that did not run (StageVerdict::skipped) and why.
void record_skipped(Ledger& ledger, std::int64_t experiment_id, const char* stage, const std::string& why);

}  // namespace densefeed
