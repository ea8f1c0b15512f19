#include "progress_display.h"

#include <unistd.h>

#include <iostream>

#include <fmt/format.h>

#include "printable.h"

namespace densefeed {

std::string progress_event_text(const nlohmann::ordered_json& e) {
  if (!e.is_object()) return "";
  const std::string stage = e.value("stage", std::string("?")), phase = e.value("phase", std::string());
  if (stage == "bench") {
    return fmt::format("bench {}/{} {}: {}{}", e.value("case_index", 0) + 1, e.value("cases", 0), e.value("case", std::string()), phase,
                       e.contains("rounds") ? fmt::format(" {}, {} so far", e.value("rounds", 0), e.value("verdict", std::string("?"))) : "");
  }
  if (phase == "start") return fmt::format("{}: {} case(s): starting", stage, e.value("total", 0));
  if (phase == "end") return fmt::format("{}: {}", stage, e.value("verdict", std::string("ended")));
  return fmt::format("{}: case {} of {}{}", stage, e.value("done", 0), e.value("total", 0),
                     e.contains("case") ? fmt::format(" ({} {})", e.value("arm", std::string()), e.value("case", std::string())) : "");
}

ProgressDisplay::ProgressDisplay(int fd, bool tty) : fd_(fd), tty_(tty) {}

ProgressDisplay::~ProgressDisplay() { finish(); }

void ProgressDisplay::write(const std::string& bytes) {
  // What others wrote to the same stream comes first.
  std::cerr.flush();
  std::cout.flush();
  for (std::size_t at = 0; at < bytes.size();) {
    const ssize_t n = ::write(fd_, bytes.data() + at, bytes.size() - at);
    if (n <= 0) return;  // progress is for watching: a closed stream loses it, nothing else
    at += static_cast<std::size_t>(n);
  }
}

void ProgressDisplay::finish() {
  const std::lock_guard lock(mutex_);
  if (open_) write("\n");
  open_ = false;
}

void ProgressDisplay::put(const std::string& stage, const std::string& text, bool last) {
  const std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  const bool first = stage != stage_;
  stage_ = stage;
  const std::string line = "densefeed: " + printable(text, false);
  if (tty_) {
    // Erase the line and write the new one over it; a stage's first line
    // follows the previous stage's on a line of its own.
    std::string bytes = first && open_ ? "\n" : "";
    bytes += "\r\x1b[K" + line;
    open_ = !last;
    if (last) bytes += "\n";
    write(bytes);
    return;
  }
  if (!first && !last && now - shown_ < std::chrono::seconds(1)) return;
  shown_ = now;
  write(line + "\n");
}

void ProgressDisplay::show(const RunProgress& p) { put(p.stage, run_progress_line(p), p.phase == "start" || p.phase == "end"); }

void ProgressDisplay::show(const BenchProgress& p) { put("bench", bench_progress_line(p), false); }

}  // namespace densefeed
