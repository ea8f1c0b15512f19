// What a person sees while `run` or `narrow` works: the stage, case k of N,
// the time so far and an estimate (run_progress.h, bench_progress.h). On a
// terminal one line that updates in place (carriage return, ECMA-48 "erase
// in line" CSI K), a stage's last line kept; elsewhere (CI logs, a pipe)
// plain lines, at most one per second per stage besides its first and last.
// Every line starts "densefeed: " and is written to the file descriptor
// given (stderr) directly, past main's PrintableStream (printable.h), whose
// escaping would show the terminal codes as text; the text itself goes
// through printable(), so a label cannot bring codes of its own.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "bench_progress.h"
#include "run_progress.h"

namespace densefeed {

// One recorded progress event (progress.jsonl: run_progress_json or
// bench_progress_json) in words: "gate: case 3 of 29 (candidate T=1024)",
// "bench 1/2 T=4096: round 6, inconclusive so far"; '' for anything else.
std::string progress_event_text(const nlohmann::ordered_json& event);

class ProgressDisplay {
 public:
  // `tty`: `fd` is a terminal (isatty), so the line updates in place.
  ProgressDisplay(int fd, bool tty);
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
  void write(const std::string& bytes);
  int fd_;
  bool tty_;
  bool open_ = false;  // a tty line is being updated
  std::string stage_;
  std::chrono::steady_clock::time_point shown_{};
};

}  // namespace densefeed
