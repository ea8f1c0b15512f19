// A process's heartbeat for what it runs (ledger table heartbeats): a worker
// beats each experiment it runs, a run its experiment, a promote its
// acceptance run, so that a worker on another host can tell a dead owner from
// a live one (Ledger::recover_dead_owners). The interval is the ledger's
// (DENSEFEED_HEARTBEAT_S, default 10 s).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

namespace densefeed {

class Ledger;

// Beats heartbeat row `heartbeat_id` of the ledger at `ledger` every
// `interval_s` seconds, from a thread of its own with a connection of its
// own, until it is destroyed. A beat that finds the write lock held waits for
// it at most one interval (DENSEFEED_LEDGER_BUSY_S when that is set) and is
// tried again at once, so a lock held by another process delays beats but
// never ends them.
class Heartbeat {
 public:
  // heartbeat_id 0 beats nothing. Throws InputError / InfraError when the
  // ledger cannot be opened.
  Heartbeat(const std::filesystem::path& ledger, std::int64_t heartbeat_id, double interval_s);
  // Stops beating; waits for a beat in progress (at most its lock wait).
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // True once a beat found that another process took over what the row
  // keeps alive (it requeued or interrupted the experiment, or interrupted
  // the acceptance run, judging this process dead): the owner should stop.
  bool lost() const { return lost_; }

 private:
  void run();
  std::unique_ptr<Ledger> ledger_;
  std::int64_t id_ = 0;
  double interval_s_ = 10;
  std::atomic<bool> lost_{false};
  bool stop_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace densefeed
