#include "sim_stream.h"

#include <utility>

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace densefeed::kv_overlap {

SimStream::SimStream(std::chrono::nanoseconds item_time, TraceLane* lane, const char* name, const char* cat)
    : item_time_(item_time), lane_(lane), name_(name), cat_(cat), last_end_(Clock::now()) {
  thread_ = std::thread([this] { run(); });
  // A stream exists before its first launch (as a CUDA stream does): the
  // first item must not wait for the thread's start-up.
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return started_; });
}

SimStream::~SimStream() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void SimStream::submit(StreamItem item) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(item));
    ++submitted_;
  }
  changed_.notify_all();
}

void SimStream::wait_in_flight_below(std::uint64_t limit) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return submitted_ - completed_.load(std::memory_order_relaxed) < limit; });
}

Clock::time_point SimStream::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return completed_.load(std::memory_order_relaxed) == submitted_; });
  return last_end_;
}

void SimStream::run() {
#ifdef __linux__
  // Default slack is 50 us; a stream's items should end on time.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
#endif
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    started_ = true;
  }
  changed_.notify_all();
  while (true) {
    StreamItem item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    const Clock::time_point start = Clock::now();
    if (item.work) item.work();
    std::this_thread::sleep_until(start + item_time_);
    const Clock::time_point end = Clock::now();
    if (lane_ != nullptr) {
      TraceEvent e;
      e.name = name_;
      e.cat = cat_;
      e.start = start;
      e.end = end;
      e.step = item.step;
      e.chunk = item.chunk;
      e.correlation = item.correlation;
      e.bytes = item.bytes;
      lane_->add(e);
    }
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      last_end_ = end;
      completed_.fetch_add(1, std::memory_order_release);
    }
    changed_.notify_all();
  }
}

}  // namespace densefeed::kv_overlap
