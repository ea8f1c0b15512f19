// The queue's worker: takes queued experiments from the ledger in submission
// order and runs each in a child `densefeed worker-run` process (a crash in
// one experiment never takes the worker down, and a cancel can end it),
// `slots` at once, while a reaper requeues the experiments of workers that
// died. What it does is printed as it happens, one line per event, and
// returned as a WorkerReport when it ends.
#pragma once

#include <string>
#include <vector>

#include "worker_options.h"

namespace densefeed {

struct GateStore;

// Runs the worker until the queue is empty (`once`) or it is stopped.
// Throws InputError / InfraError when the ledger cannot be opened, InfraError
// when squeue fails at start under Slurm; an experiment's failure is its
// run's outcome, never an exception.
WorkerReport run_worker(const WorkerOptions& options);

// GPUs for --gpus: "auto" asks nvidia-smi (none without it), "none" is none,
// else a comma-separated list of indices or UUIDs. Throws InputError
// (--gpus) for anything else.
std::vector<std::string> find_gpus(const std::string& spec);

// An operator's typo must not reject every queued experiment: throws
// InputError (--profile) unless some gate of `store` has a profile named
// `profile`.
void require_gate_profile(const GateStore& store, const std::string& profile);

}  // namespace densefeed
