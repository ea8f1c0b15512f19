// A worker's clean-up of Slurm jobs: the jobs of an experiment that no live
// densefeed process owns any more are scancelled, found by name
// (slurm_executor.h: the ledger's prefix, then "e" + ID + "-").
#pragma once

#include <cstdint>
#include <filesystem>

namespace densefeed {

class Ledger;
class WorkerLog;

// Cancels experiment `id`'s Slurm jobs and prints one line per job and why
// (`why`: "its run ended"); a failing squeue or scancel is printed, never thrown.
void cancel_experiment_slurm_jobs(const std::filesystem::path& ledger_path, std::int64_t id, const char* why, WorkerLog& log);

// At a worker's start: jobs of this ledger whose experiment is not running
// under a live owner (a worker killed before it could cancel them) end now.
// Throws InfraError when squeue cannot list them.
void cancel_orphaned_slurm_jobs(const Ledger& ledger, const std::filesystem::path& ledger_path, WorkerLog& log);

}  // namespace densefeed
