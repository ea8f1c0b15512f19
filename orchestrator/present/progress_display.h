// What a person sees while `run` or `narrow` works: the stage, case k of N,
// the time so far and an estimate (run_progress.h, bench_progress.h). On a
// terminal one line that updates in place (carriage return, ECMA-48 "erase
// in line" CSI K), a stage's last line kept; elsewhere (CI logs, a pipe)
// plain lines, at most one per second per stage besides its first and last.
// Every line starts "densefeed: " and goes to the stream given (stderr).
#pragma once

#include <chrono>
#include <iosfwd>
#include <mutex>
#include <string>

#include "bench_progress.h"
#include "run_progress.h"

namespace densefeed {

class ProgressDisplay {
 public:
  // `tty`: the stream is a terminal (isatty), so the line updates in place.
  ProgressDisplay(std::ostream& out, bool tty);
  ~ProgressDisplay();
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;

  void show(const RunProgress& p);
  void show(const BenchProgress& p);
  // Ends an updating line, so that what follows starts on a line of its own.
  void finish();

 private:
  // `last`: the stage's first or final line, always shown and kept.
  void put(const std::string& stage, const std::string& text, bool last);

  std::mutex mutex_;
  std::ostream& out_;
  bool tty_;
  bool open_ = false;  // a tty line is being updated
  std::string stage_;
  std::chrono::steady_clock::time_point shown_{};
};

}  // namespace densefeed
