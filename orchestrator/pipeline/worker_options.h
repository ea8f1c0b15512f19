// What a worker is told (WorkerOptions) and what it returns (WorkerReport):
// plain values, apart from the worker (worker.h) and its slots
// (worker_slot.h), which both read them.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "ledger.h"

namespace densefeed {

struct WorkerOptions {
  std::filesystem::path ledger;               // the SQLite ledger whose queue it serves
  std::filesystem::path densefeed;            // the binary the child runs (self_dir() / "densefeed")
  std::vector<std::string> child_args;        // before the verb: --project DIR [--trust-worktree]
  std::vector<std::string> gpus;              // this host's GPU indices or UUIDs, shared round robin by the slots
  int slots = 1;                              // experiments at once, >= 1
  bool once = false;                          // end when the queue is empty instead of waiting for more
  bool no_sandbox = false;                    // the children run untrusted commands without bwrap
  std::string profile = "quick";              // gate profile
  int jobs = 1;                               // harness processes per experiment when a slot has no GPU
  // "local" or "slurm": under Slurm the children run with --executor slurm
  // and the jobs of experiments no live process owns are scancelled.
  std::string executor = "local";
  std::ostream* log = &std::cout;             // where each event's line goes, as it happens
  // SIGTERM and SIGINT stop it (installed once it runs): experiments it is
  // running go back to the queue. A test passes false and uses `stop`.
  bool stop_on_signals = true;
  const std::atomic<bool>* stop = nullptr;    // when set and true, it stops as on SIGTERM
};

// One experiment a slot took and what became of it.
struct WorkerRun {
  int slot = 0;
  std::int64_t experiment_id = 0;
  std::string manifest_path;  // as submitted
  // "finished (green)", "cancelled", "requeued (worker stopping)",
  // "interrupted: exited with code 3", "taken over: ..." (as printed).
  std::string outcome;
};

enum class WorkerEnd { queue_empty, stopped };

struct WorkerReport {
  std::vector<RecoveredExperiment> recovered;  // dead owners' experiments it requeued or ended, at start and by its reaper
  std::vector<WorkerRun> runs;                 // in the order they ended
  WorkerEnd end = WorkerEnd::queue_empty;      // queue_empty only with `once`
};

}  // namespace densefeed
