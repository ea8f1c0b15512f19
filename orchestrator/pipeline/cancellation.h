// cancel: a queued experiment is cancelled at once; a running one is asked
// to stop (its worker ends its child and records it cancelled).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "experiment_state.h"

namespace densefeed {

struct Cancellation {
  std::int64_t id = 0;
  ExperimentState state = ExperimentState::cancelled;  // after the request (Ledger::cancel)
  std::vector<std::string> slurm_jobs_cancelled;       // scancelled job ids
};

// Records the cancel of experiment `id` in the ledger at `ledger_path`; when
// it was running and there is a Slurm, also scancels its Slurm jobs (the
// worker running it ends them too, as it stops the run). Throws InputError
// for an unknown id, InfraError when scancel fails.
Cancellation cancel_experiment(const std::filesystem::path& ledger_path, std::int64_t id);

}  // namespace densefeed
