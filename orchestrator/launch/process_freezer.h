// Holding a process tree still while the other arm of a benchmark is timed
// (issue 26, "a freeze nothing escapes"). The cgroup v2 freezer
// (Documentation/admin-guide/cgroup-v2.rst, "cgroup.freeze"): the tree is
// moved into a cgroup of its own and frozen there; a process forked inside
// it is born in it, so born frozen, and a SIGCONT has no effect on a frozen
// task. Where this process cannot make a cgroup v2 folder (no cgroup2 mount,
// no write access: an unprivileged user outside a delegated subtree), the
// fallback is the signal walk (SIGSTOP to the leader and its descendants,
// listed again until a pass finds no new one), which a process that keeps
// forking SIGCONT senders can outrun: `mechanism()` says which one held it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace densefeed {

class ProcessFreezer {
 public:
  // `name` names the cgroup folder (densefeed-PID-NAME-N under this
  // process's own cgroup v2 folder); nothing is made until freeze().
  explicit ProcessFreezer(std::string name);
  // Thaws, kills whatever is still in the cgroup (cgroup.kill: the session
  // it held has ended by then, so anything left is a stray) and removes it.
  ~ProcessFreezer();
  ProcessFreezer(const ProcessFreezer&) = delete;
  ProcessFreezer& operator=(const ProcessFreezer&) = delete;

  // A descriptor of the cgroup's cgroup.procs (opened O_WRONLY | O_CLOEXEC,
  // owned and closed by the freezer) that a child writes "0" into before
  // exec (process_runner.h ProcessSpec::try_join_fds), so that it and
  // everything it ever starts is born in the cgroup: then no process of the
  // tree is outside it however fast it forks, and freeze() has nothing to
  // move. Makes the cgroup; -1 where there is none (the signal walk).
  int join_fd();
  // Freezes `leader` and all its descendants. With the cgroup: every one is
  // moved in (passes until none is left outside), cgroup.freeze set, and
  // cgroup.events awaited for "frozen 1" with none left outside (at most
  // 5 s). Processes already gone are skipped. Never throws: a cgroup step
  // that fails, or a tree that still has a process outside after 5 s (one
  // that forks faster than the move, when it was not born in the cgroup:
  // join_fd), falls back to the signal walk for this and every later call,
  // and mechanism() says why.
  void freeze(pid_t leader);
  // Lets them go on (cgroup.freeze 0, or SIGCONT to the tree). Idempotent.
  void thaw(pid_t leader);
  // "cgroup v2 freezer" or "signals (SIGSTOP walk): REASON".
  std::string mechanism() const;

 private:
  bool make_cgroup();
  std::string name_;
  std::filesystem::path cgroup_;  // empty until made
  std::string fallback_reason_;   // non-empty: the signal walk is in use
  int join_fd_ = -1;              // cgroup.procs, for join_fd()
  bool frozen_ = false;
};

// The folder of this process's cgroup v2 hierarchy (the cgroup2 mount from
// /proc/self/mountinfo joined with the "0::" line of /proc/self/cgroup), or
// empty with *why set when there is none.
std::filesystem::path own_cgroup_v2(std::string* why);

}  // namespace densefeed
