#include "process_freezer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "process_tree.h"

namespace densefeed {
namespace fs = std::filesystem;

namespace {

bool write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The leader and its descendants now.
std::vector<pid_t> tree(pid_t leader) {
  auto pids = descendants(list_processes(), leader);
  pids.insert(pids.begin(), leader);
  return pids;
}

void signal_tree(pid_t leader, int signal) {
  std::set<pid_t> sent;
  for (int pass = 0; pass < 8; ++pass) {
    bool fresh = false;
    for (const pid_t p : tree(leader)) {
      if (sent.insert(p).second) {
        ::kill(p, signal);
        fresh = true;
      }
    }
    if (!fresh) break;
  }
}

}  // namespace

fs::path own_cgroup_v2(std::string* why) {
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  fs::path mount;
  while (std::getline(mounts, line)) {
    // ... MOUNTPOINT ... - FSTYPE SOURCE OPTIONS (proc(5))
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, devno, root, point;
    head >> id >> parent >> devno >> root >> point;
    if (root == "/") {
      mount = point;
      break;
    }
  }
  if (mount.empty()) {
    *why = "no cgroup2 file system is mounted";
    return {};
  }
  std::ifstream own("/proc/self/cgroup");
  while (std::getline(own, line)) {
    if (line.rfind("0::", 0) == 0) return mount / line.substr(3).substr(line.size() > 3 && line[3] == '/' ? 1 : 0);
  }
  *why = "/proc/self/cgroup has no cgroup v2 line";
  return {};
}

ProcessFreezer::ProcessFreezer(std::string name) : name_(std::move(name)) {}

ProcessFreezer::~ProcessFreezer() {
  if (join_fd_ >= 0) ::close(join_fd_);
  if (cgroup_.empty()) return;
  write_text(cgroup_ / "cgroup.freeze", "0");
  write_text(cgroup_ / "cgroup.kill", "1");
  for (int i = 0; i < 100; ++i) {
    if (::rmdir(cgroup_.c_str()) == 0 || errno == ENOENT) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool ProcessFreezer::make_cgroup() {
  if (!cgroup_.empty()) return true;
  if (!fallback_reason_.empty()) return false;
  std::string why;
  const fs::path own = own_cgroup_v2(&why);
  if (own.empty()) {
    fallback_reason_ = why;
    return false;
  }
  static std::atomic<int> counter{0};
  const fs::path dir = own / fmt::format("densefeed-{}-{}-{}", ::getpid(), name_, counter++);
  if (::mkdir(dir.c_str(), 0755) != 0) {
    fallback_reason_ = fmt::format("cannot make {}: {}", dir.string(), std::strerror(errno));
    return false;
  }
  if (!fs::exists(dir / "cgroup.freeze")) {
    ::rmdir(dir.c_str());
    fallback_reason_ = "the kernel's cgroup v2 has no cgroup.freeze (Linux before 5.2)";
    return false;
  }
  cgroup_ = dir;
  return true;
}

int ProcessFreezer::join_fd() {
  if (join_fd_ >= 0) return join_fd_;
  if (!make_cgroup()) return -1;
  join_fd_ = ::open((cgroup_ / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  return join_fd_;
}

void ProcessFreezer::freeze(pid_t leader) {
  if (leader <= 0) return;
  frozen_ = true;
  if (make_cgroup()) {
    const std::string member = "/" + cgroup_.filename().string() + "\n";
    // Moves every process of the tree that is not in the cgroup yet; false
    // when one that is alive cannot be moved. *moved: whether any was.
    const auto move_in = [&](bool* moved) {
      *moved = false;
      for (const pid_t p : tree(leader)) {
        const std::string where = read_text(fmt::format("/proc/{}/cgroup", p));
        if (where.empty() || where.find(member) != std::string::npos) continue;  // gone, or in already
        std::ofstream procs(cgroup_ / "cgroup.procs");
        procs << p;
        procs.flush();
        if (!procs && ::kill(p, 0) == 0) return false;
        *moved = true;
      }
      return true;
    };
    bool ok = true, moved = true;
    for (int pass = 0; pass < 16 && ok && moved; ++pass) ok = move_in(&moved);
    // Once cgroup.freeze is set a process moved in is frozen as it joins, and
    // one forked inside is born frozen; the tree is frozen when the kernel
    // says so (cgroup.events) and a last pass finds none outside. At most 5 s.
    if (ok && write_text(cgroup_ / "cgroup.freeze", "1")) {
      for (int i = 0; i < 500 && ok; ++i) {
        if (read_text(cgroup_ / "cgroup.events").find("frozen 1") != std::string::npos) {
          ok = move_in(&moved);
          if (ok && !moved) return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    // A process that could not be moved, or one that was still outside
    // after 5 s: the cgroup does not hold the tree, and saying it does
    // would let that process run under the other arm's clock.
    write_text(cgroup_ / "cgroup.freeze", "0");
    fallback_reason_ = ok ? fmt::format("a process of the tree was still outside {} after 5 s (it forks faster than it can be moved)", cgroup_.string())
                          : fmt::format("cannot move the processes into {}", cgroup_.string());
  }
  signal_tree(leader, SIGSTOP);
}

void ProcessFreezer::thaw(pid_t leader) {
  if (!frozen_) return;
  frozen_ = false;
  if (!cgroup_.empty() && fallback_reason_.empty()) {
    write_text(cgroup_ / "cgroup.freeze", "0");
    return;
  }
  if (leader > 0) signal_tree(leader, SIGCONT);
}

std::string ProcessFreezer::mechanism() const {
  if (!fallback_reason_.empty()) return "signals (SIGSTOP walk): " + fallback_reason_;
  return "cgroup v2 freezer";
}

}  // namespace densefeed
