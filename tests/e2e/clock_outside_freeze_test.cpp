// Issue 26, "a freeze nothing escapes": while one arm of a benchmark is
// timed, the other arm's session is held still (HarnessSession::pause, by
// ProcessFreezer). The attack the issue records, as a real process tree: a
// spinner that writes a line every millisecond, beside a SIGCONT sender
// that sends SIGCONT to the whole tree and replaces itself by a fresh fork
// (a new pid) as fast as it can, so that a SIGSTOP walk that lists the
// tree and stops it pid by pid is always a pid behind (the issue: 28 runs
// while "stopped"). Orphans are reaped inside the tree (a subreaper, as the
// sandbox's PID namespace does), as in a sandboxed session. The tree is
// started as a session is (session.cpp): born in the freezer's cgroup
// (ProcessFreezer::join_fd). A tree started outside it and moved in at the
// first freeze lost that race on a loaded CI machine (stop 37): the sender
// stayed outside, ran on after the test and held ctest's output pipe.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "process_freezer.h"
#include "test_support.h"

namespace densefeed {
namespace {

const char* kTree = R"(import ctypes, os, signal, sys, time
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans stay in the tree, as under the sandbox's PID namespace
log = sys.argv[1]
def spinner():
    with open(log, 'a', buffering=1) as f:
        while True:
            f.write('spin\n'); time.sleep(0.001)
def sender(group):
    while True:
        try: os.killpg(group, signal.SIGCONT)
        except OSError: pass
        with open(log, 'a', buffering=1) as f: f.write('sent\n')
        if os.fork() != 0: os._exit(0)  # the child goes on with a new pid, at once
group = os.getpgrp()
if os.fork() == 0: spinner()
if os.fork() == 0: sender(group)
while True:
    try: os.wait()
    except ChildProcessError: time.sleep(0.01)
)";

std::size_t lines(const std::filesystem::path& file) {
  const std::string text = testing::read_file(file);
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST(ClockOutside, AReForkingSigcontSenderRunsZeroTimesWhileFrozen) {
  std::string why;
  const std::filesystem::path own = own_cgroup_v2(&why);
  if (own.empty()) GTEST_SKIP() << "no cgroup v2 here (" << why << "): the freezer falls back to signals";
  // A cgroup2 mount this process cannot make a folder in (read-only, as in
  // CI's container at stop 40: EROFS; or not delegated: EACCES, EPERM) is
  // the freezer's documented fallback too (process_freezer.h), not a
  // failure of it: the probe asks the kernel, as make_cgroup() does, and
  // any other error still reaches the assertion on join_fd() below.
  const std::filesystem::path probe = own / ("densefeed-probe-" + std::to_string(::getpid()));
  if (::mkdir(probe.c_str(), 0755) != 0) {
    const int error = errno;
    if (error == EROFS || error == EACCES || error == EPERM)
      GTEST_SKIP() << "cannot make a cgroup under " << own << " (" << std::strerror(error)
                   << "): the freezer falls back to signals";
  } else {
    ::rmdir(probe.c_str());
  }
  testing::TempDir dir;
  testing::write_file(dir / "tree.py", kTree);
  const auto log = dir / "log";
  std::optional<ProcessFreezer> freezer;
  freezer.emplace("test");
  const int join = freezer->join_fd();
  ASSERT_GE(join, 0) << freezer->mechanism();
  const pid_t leader = ::fork();
  ASSERT_GE(leader, 0);
  if (leader == 0) {
    ::setpgid(0, 0);
    if (::write(join, "0", 1) != 1) ::_exit(126);
    // Never ctest's pipes: whatever the tree does, it cannot hold them.
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    ::execlp("python3", "python3", (dir / "tree.py").c_str(), log.c_str(), nullptr);
    ::_exit(127);
  }
  // Whatever fails below, nothing of the tree outlives the test: its
  // group is killed (a group kill races no fork: fork(2) restarts when a
  // signal to the group is pending).
  struct KillGroup {
    pid_t group;
    ~KillGroup() {
      ::killpg(group, SIGCONT);
      ::killpg(group, SIGKILL);
      ::waitpid(group, nullptr, WNOHANG);
    }
  } kill_group{leader};
  for (int i = 0; i < 200 && lines(log) < 100; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(lines(log), 100u) << "the tree did not start";
  {
    freezer->freeze(leader);
    EXPECT_EQ(freezer->mechanism(), "cgroup v2 freezer");
    const std::size_t at_freeze = lines(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const std::size_t after = lines(log);
    EXPECT_EQ(after, at_freeze) << "the tree ran " << after - at_freeze << " times while frozen";
    freezer->thaw(leader);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_GT(lines(log), after + 20) << "thawed, the tree goes on";
    freezer->freeze(leader);  // frozen again when the session ends: the freezer's end kills what is left
    freezer.reset();
  }
  // Nothing of the tree outlives the freezer (cgroup.kill): the leader is
  // reaped here, every other process of it is gone.
  int status = 0;
  pid_t reaped = 0;
  for (int i = 0; i < 500 && reaped == 0; ++i) {
    reaped = ::waitpid(leader, &status, WNOHANG);
    if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (reaped != leader) {
    ::killpg(leader, SIGCONT);  // what a failed freezer left: stopped, then killed, not left behind by the test
    ::killpg(leader, SIGKILL);
    ::waitpid(leader, &status, 0);
    FAIL() << "the tree's leader was still alive 5 s after the freezer ended";
  }
  EXPECT_TRUE(WIFSIGNALED(status)) << status;
  const std::size_t at_end = lines(log);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(lines(log), at_end) << "a process of the tree outlived it";
}

}  // namespace
}  // namespace densefeed
