#include "process_tree.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

namespace densefeed {
namespace {

std::atomic<bool> g_adopting{false};

// /proc/PID/stat: "pid (comm) state ppid pgrp ...", where comm may hold
// spaces and parentheses, so fields are counted from the last ')'.
bool read_stat(pid_t pid, ProcessEntry& e) {
  // Plain open/read: this runs for every process after every unsandboxed
  // command, and a stream costs several times as much.
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[512];
  const ssize_t n = ::read(fd, buffer, sizeof buffer - 1);
  ::close(fd);
  if (n <= 0) return false;
  const std::string line(buffer, static_cast<std::size_t>(n));
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  e.pid = pid;
  e.state = line[close + 2];
  long ppid = 0, pgid = 0;
  if (std::sscanf(line.c_str() + close + 3, "%ld %ld", &ppid, &pgid) != 2) return false;
  e.ppid = static_cast<pid_t>(ppid);
  e.pgid = static_cast<pid_t>(pgid);
  return true;
}

// Gone, or a zombie (ended; only its parent's wait remains).
bool ended(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  ProcessEntry e;
  return !read_stat(pid, e) || e.state == 'Z' || e.state == 'X';
}

}  // namespace

std::vector<ProcessEntry> list_processes() {
  std::vector<ProcessEntry> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    ProcessEntry e;
    if (read_stat(static_cast<pid_t>(std::stol(name)), e)) out.push_back(e);
  }
  return out;
}

std::vector<pid_t> descendants(const std::vector<ProcessEntry>& processes, pid_t root) {
  std::multimap<pid_t, pid_t> children;
  for (const auto& p : processes) children.emplace(p.ppid, p.pid);
  std::vector<pid_t> out;
  std::vector<pid_t> stack = {root};
  while (!stack.empty()) {
    const pid_t parent = stack.back();
    stack.pop_back();
    const auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      if (it->second == root) continue;
      out.push_back(it->second);
      stack.push_back(it->second);
    }
  }
  return out;
}

std::size_t terminate_processes(const std::vector<pid_t>& pids, std::chrono::milliseconds grace) {
  if (pids.empty()) return 0;
  for (pid_t p : pids) ::kill(p, SIGTERM);
  const auto end = std::chrono::steady_clock::now() + grace;
  auto all_ended = [&] {
    for (pid_t p : pids) {
      if (!ended(p)) return false;
    }
    return true;
  };
  while (!all_ended() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::size_t killed = 0;
  for (pid_t p : pids) {
    if (!ended(p)) {
      ::kill(p, SIGKILL);
      ++killed;
    }
  }
  return killed;
}

bool adopt_orphans() {
  const bool ok = ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
  g_adopting = ok;
  return ok;
}

bool adopting_orphans() { return g_adopting; }

std::optional<std::string> initial_environment(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string entry;
  while (in && std::getline(in, entry, '\0')) {
    if (entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 && entry[name.size()] == '=') {
      return entry.substr(name.size() + 1);
    }
  }
  return std::nullopt;
}

std::vector<pid_t> sweep_adopted_orphans(const RunningCommands& running, pid_t finished_group,
                                         std::chrono::milliseconds grace) {
  std::vector<pid_t> killed;
  if (!g_adopting) return killed;
  const pid_t self = ::getpid();
  const auto strays = [&] {
    std::vector<ProcessEntry> found;
    for (const auto& p : list_processes()) {
      if (p.ppid != self || running.groups.count(p.pgid) || running.groups.count(p.pid)) continue;
      if (p.state != 'Z') {
        const auto token = initial_environment(p.pid, running.token_name);
        if (token && running.tokens.count(*token)) continue;
      }
      found.push_back(p);
    }
    return found;
  };
  // Killing an orphan re-parents its own children here in turn: repeat
  // until no stray child is left (bounded: each round ends a generation).
  for (int round = 0; round < 8; ++round) {
    const auto found = strays();
    if (found.empty()) break;
    const auto all = list_processes();
    std::map<pid_t, const ProcessEntry*> entry;
    for (const auto& p : all) entry[p.pid] = &p;
    std::vector<pid_t> targets;
    for (const auto& p : found) {
      // What hangs below a member of the finished command's own group (a
      // PID-namespace init's children) ends with it: killed here for
      // certain, but not counted as having escaped.
      const bool own = p.pgid == finished_group;
      std::vector<pid_t> tree = {p.pid};
      for (pid_t d : descendants(all, p.pid)) tree.push_back(d);
      std::erase_if(tree, [&](pid_t q) { return !entry.count(q) || entry[q]->state == 'Z'; });
      if (!own) killed.insert(killed.end(), tree.begin(), tree.end());
      targets.insert(targets.end(), tree.begin(), tree.end());
    }
    terminate_processes(targets, grace);
    // The strays are children of this process: reap them. They have ended
    // or were just sent SIGKILL; one stuck in the kernel (state D) is left
    // for the next sweep rather than waited on.
    const auto end = std::chrono::steady_clock::now() + grace;
    for (const auto& p : found) {
      int status = 0;
      while (::waitpid(p.pid, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  }
  return killed;
}

}  // namespace densefeed
