#include "process_identity.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace densefeed {
namespace {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

// Field 22 (starttime) of /proc/PID/stat; '' for no such process or a zombie
// (dead, not yet reaped). Field 2 (comm) may hold spaces and parentheses, so
// fields are counted from the last ')'.
std::string start_ticks_of(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  const auto close = line.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  if (!(fields >> field) || field == "Z" || field == "X") return "";
  for (int i = 4; i <= 22; ++i) {
    if (!(fields >> field)) return "";
  }
  return field;
}

}  // namespace

ProcessIdentity current_process() {
  const long pid = static_cast<long>(getpid());
  return {host_name(), pid, start_ticks_of(pid)};
}

bool process_alive(const ProcessIdentity& p) {
  if (p.host != host_name()) return true;
  if (p.pid <= 0) return false;
  const std::string now = start_ticks_of(p.pid);
  if (now.empty()) return false;  // no such process
  return p.start_ticks.empty() || now == p.start_ticks;
}

}  // namespace densefeed
