// The pipeline of one experiment: validate -> lock check -> gate -> (green
// only) bench -> ledger. Data flows one way; the ledger is written by the
// Ledger alone.
#pragma once

#include <cstdint>
#include <filesystem>

#include "experiment_outcome.h"

namespace densefeed {

class Ledger;
enum class ExperimentEvent;

// Runs a manifest end to end: prepare, record (state `started` by this
// run), execute, record `finished`. Throws InputError before writing anything
// to the ledger when the manifest (or the gate it names) is bad; InfraError
// when densefeed itself fails. A red or error verdict is returned, not thrown.
ExperimentOutcome run_experiment(const std::filesystem::path& manifest_path, const RunOptions& options);

// Everything that can be refused as bad input, without touching the ledger:
// the gate's lock, parameters, revisions (resolved to commits), the profile.
// Returns the outcome's inputs (experiment_id 0). Throws InputError.
ExperimentOutcome prepare_experiment(Manifest manifest, const RunOptions& options);

// Records a prepared experiment with its first event (queued by submit,
// started by a run or worker). Returns its id.
// Records the prepared experiment with `first` as its first event; judges
// its base with the ledger's promoted candidates first (prepared.base_origin:
// a base at a promoted candidate is BaseOriginKind::promoted).
std::int64_t record_prepared(Ledger& ledger, ExperimentOutcome& prepared, ExperimentEvent first, const std::string& owner);

// Runs the stages of a prepared, recorded experiment (out.experiment_id set)
// and records their results; fills `out`.
void execute_experiment(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options);

}  // namespace densefeed
