// One slot of a worker: claims the next queued experiment, runs it in a
// child `densefeed worker-run` process under a heartbeat, records what ended
// it when the child could not, and claims again.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "worker_options.h"

namespace densefeed {

class WorkerLog;

// What a worker's slots and reaper share.
struct WorkerShared {
  const WorkerOptions& options;
  WorkerLog& log;
  std::function<bool()> stopping;  // a signal or options.stop
  WorkerReport& report;            // runs and recoveries are appended under `report_mutex`
  std::mutex report_mutex;
};

// Runs slot `slot` (its `gpus`: a share of the worker's) until the worker
// stops, or, with `once`, until it finds the queue empty. Throws what the
// ledger throws on open; a busy ledger is waited for.
void run_worker_slot(int slot, const std::vector<std::string>& gpus, WorkerShared& shared);

}  // namespace densefeed
