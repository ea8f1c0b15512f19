// What a worker's child (`densefeed worker-run ID`) does with the experiment
// its worker claimed: runs the manifest text the ledger recorded, and records
// it finished.
#pragma once

#include <cstdint>

#include "experiment_runner.h"

namespace densefeed {

// Runs queued experiment `id` (already `started` by the worker's claim) with
// `options` and records it finished by "worker". A manifest that no longer
// prepares (its gate gone, a parameter it no longer declares) is recorded
// rejected and its InputError rethrown; throws InputError for an unknown id,
// InfraError as execute_experiment does.
ExperimentOutcome run_queued_experiment(std::int64_t id, const RunOptions& options);

}  // namespace densefeed
