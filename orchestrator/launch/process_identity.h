// Which process owns a running experiment, in a form that survives pid reuse:
// host name, pid and the process's start time in clock ticks since boot
// (/proc/PID/stat field 22, proc(5)). Linux only.
#pragma once

#include <string>

namespace densefeed {

struct ProcessIdentity {
  std::string host;
  long pid = 0;
  std::string start_ticks;  // '' when /proc could not be read
};

// This process.
ProcessIdentity current_process();

// False only when `p` ran on this host and no process with its pid and start
// time exists any more; a process of another host is assumed alive (its
// liveness cannot be seen from here).
bool process_alive(const ProcessIdentity& p);

}  // namespace densefeed
