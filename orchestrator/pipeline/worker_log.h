// Where a worker's threads print: one line at a time, flushed, so that a
// reader of the worker's output (a person, a test, a log file) sees every
// event when it happens and never half of two.
#pragma once

#include <mutex>
#include <ostream>
#include <string>

namespace densefeed {

class WorkerLog {
 public:
  explicit WorkerLog(std::ostream& out) : out_(out) {}
  // `text` ends with its own newline.
  void print(const std::string& text) {
    const std::lock_guard lock(mutex_);
    out_ << text << std::flush;
  }

 private:
  std::ostream& out_;
  std::mutex mutex_;
};

}  // namespace densefeed
