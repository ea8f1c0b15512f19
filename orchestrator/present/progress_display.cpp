#include "progress_display.h"

#include <ostream>

namespace densefeed {

ProgressDisplay::ProgressDisplay(std::ostream& out, bool tty) : out_(out), tty_(tty) {}

ProgressDisplay::~ProgressDisplay() { finish(); }

void ProgressDisplay::finish() {
  const std::lock_guard lock(mutex_);
  if (open_) out_ << "\n" << std::flush;
  open_ = false;
}

void ProgressDisplay::put(const std::string& stage, const std::string& text, bool last) {
  const std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  const bool first = stage != stage_;
  stage_ = stage;
  if (tty_) {
    // Erase the line and write the new one over it; a stage's first line
    // follows the previous stage's on a line of its own.
    if (first && open_) out_ << "\n";
    out_ << "\r\x1b[K" << "densefeed: " << text;
    open_ = true;
    if (last) {
      out_ << "\n";
      open_ = false;
    }
    out_ << std::flush;
    return;
  }
  if (!first && !last && now - shown_ < std::chrono::seconds(1)) return;
  shown_ = now;
  out_ << "densefeed: " << text << "\n" << std::flush;
}

void ProgressDisplay::show(const RunProgress& p) { put(p.stage, run_progress_line(p), p.phase == "start" || p.phase == "end"); }

void ProgressDisplay::show(const BenchProgress& p) { put("bench", bench_progress_line(p), false); }

}  // namespace densefeed
