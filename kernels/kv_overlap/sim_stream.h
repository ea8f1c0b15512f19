// A device stream simulated by a thread, for a harness that needs no GPU:
// work items run one after another in submission order, each taking a fixed
// wall time, as a CUDA stream runs its kernels or copies. The thread sleeps
// through an item (a device does not take a CPU core), with the timer slack
// cut to 1 us so that the sleep ends close to the item's time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "trace_recorder.h"

namespace densefeed::kv_overlap {

struct StreamItem {
  std::int64_t step = -1;         // for the trace's args
  std::int64_t chunk = -1;
  std::int64_t correlation = -1;
  std::int64_t bytes = -1;
  std::function<void()> work;     // runs when the item starts (e.g. a copy's bytes); may be empty
};

class SimStream {
 public:
  // `item_time`: wall time of every item. Each item becomes one event named
  // `name` with category `cat` on `lane` (nullptr: nothing is recorded).
  // Returns once the stream's thread runs.
  SimStream(std::chrono::nanoseconds item_time, TraceLane* lane, const char* name, const char* cat);
  // Runs what was submitted to the end, then stops the thread.
  ~SimStream();
  SimStream(const SimStream&) = delete;
  SimStream& operator=(const SimStream&) = delete;

  // Enqueues an item; returns at once, as an asynchronous launch does.
  void submit(StreamItem item);
  // Items finished so far. Acquire ordering: what an item wrote is visible to
  // a thread that reads this count past it (a host spinning on a counter).
  std::uint64_t completed() const { return completed_.load(std::memory_order_acquire); }
  // Blocks until fewer than `limit` submitted items are unfinished.
  void wait_in_flight_below(std::uint64_t limit);
  // Blocks until every submitted item has finished; returns when the last one
  // ended (the stream's creation time if nothing was submitted).
  Clock::time_point drain();

 private:
  void run();

  const std::chrono::nanoseconds item_time_;
  TraceLane* const lane_;
  const char* const name_;
  const char* const cat_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<StreamItem> queue_;
  std::uint64_t submitted_ = 0;
  std::atomic<std::uint64_t> completed_{0};
  Clock::time_point last_end_;
  bool started_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace densefeed::kv_overlap
