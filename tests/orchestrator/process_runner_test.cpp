#include <gtest/gtest.h>

#include <signal.h>

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "process_runner.h"
#include "process_tree.h"
#include "test_support.h"

namespace densefeed {
namespace {

ProcessResult run_sh(const testing::TempDir& dir, const std::string& script, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.cwd = dir.path();
  spec.stdout_path = dir / "out.log";
  spec.stderr_path = dir / "err.log";
  spec.timeout = timeout;
  spec.kill_grace = std::chrono::milliseconds(200);
  return run_process(spec);
}

// True while `pid` exists and is not a zombie.
bool alive(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string skip, state;
  stat >> skip >> skip >> state;
  return state != "Z";
}

TEST(ProcessRunner, ExitCodeAndOutputFiles) {
  testing::TempDir dir;
  const auto r = run_sh(dir, "echo hello; echo oops >&2; exit 3");
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.describe(), "exited with code 3");
  EXPECT_EQ(testing::read_file(dir / "out.log"), "hello\n");
  EXPECT_EQ(file_tail(dir / "err.log"), "oops");
}

TEST(ProcessRunner, SignalIsReported) {
  testing::TempDir dir;
  const auto r = run_sh(dir, "kill -SEGV $$");
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_EQ(r.describe(), "was killed by signal 11 (SIGSEGV)");
}

TEST(ProcessRunner, TimeoutKillsTheWholeGroupEvenWhenTermIsIgnored) {
  testing::TempDir dir;
  const auto r = run_sh(dir, "trap '' TERM; sleep 60 & echo $! > child.pid; wait", std::chrono::milliseconds(500));
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.wall_s, 10);
  const int child = std::stoi(testing::read_file(dir / "child.pid"));
  for (int i = 0; i < 100 && alive(child); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(alive(child));
}

// Waits (bounded) for `pid` to end; true once it has.
bool ends(int pid) {
  for (int i = 0; i < 250 && alive(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return !alive(pid);
}

// Children of this process that are zombies: what a runner that forgot to
// reap leaves.
std::vector<pid_t> zombie_children() {
  std::vector<pid_t> z;
  for (const auto& p : list_processes()) {
    if (p.ppid == ::getpid() && p.state == 'Z') z.push_back(p.pid);
  }
  return z;
}

TEST(ProcessRunner, TimeoutMessageSaysWhetherSigtermWasEnough) {
  testing::TempDir dir;
  const auto polite = run_sh(dir, "sleep 60", std::chrono::milliseconds(300));
  EXPECT_TRUE(polite.timed_out);
  EXPECT_FALSE(polite.sigkill_needed);
  EXPECT_EQ(polite.describe(), "timed out after 0.3 s and was killed (SIGTERM ended it)");
  const auto stubborn = run_sh(dir, "trap '' TERM; while :; do sleep 1; done", std::chrono::milliseconds(300));
  EXPECT_TRUE(stubborn.sigkill_needed);
  EXPECT_EQ(stubborn.describe(), "timed out after 0.3 s and was killed (it outlived SIGTERM by the 0.2 s grace period: SIGKILL)");
}

TEST(ProcessRunner, OutputBeyondTheCapIsCountedAndDropped) {
  testing::TempDir dir;
  ProcessSpec spec;
  // 3 MiB to stdout, 10 bytes to stderr, with a 1 MiB cap per stream.
  spec.argv = {"/bin/sh", "-c", "head -c 3145728 /dev/zero; printf 'last line\\n' >&2; printf 'more\\n' >&2"};
  spec.cwd = dir.path();
  spec.stdout_path = dir / "out.log";
  spec.stderr_path = dir / "err.log";
  spec.output_cap_bytes = 1 << 20;
  const auto r = run_process(spec);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.stdout_capture.bytes, 3u << 20);
  EXPECT_EQ(r.stdout_capture.dropped, 2u << 20);
  EXPECT_EQ(r.stderr_capture.bytes, 15u);
  EXPECT_EQ(r.stderr_capture.dropped, 0u);
  const std::string note = "\n[densefeed: 2097152 more bytes were dropped beyond the 1 MiB cap of this log]\n";
  EXPECT_EQ(std::filesystem::file_size(dir / "out.log"), (1u << 20) + note.size());
  EXPECT_EQ(testing::read_file(dir / "out.log").substr(1u << 20), note);
  EXPECT_EQ(testing::read_file(dir / "err.log"), "last line\nmore\n");
  const auto tail = log_tail(dir / "out.log", dir / "err.log", 1);
  EXPECT_EQ(tail.stream, "stderr");
  EXPECT_EQ(tail.text, "more");
}

TEST(ProcessRunner, ChildThatLeftTheGroupIsKilledAtTheTimeout) {
  testing::TempDir dir;
  // The background child calls setsid (a new session and group), ignores
  // SIGTERM and outlives its parent: only a walk of the process tree finds it.
  const auto r = run_sh(dir, "setsid sh -c 'trap \"\" TERM; echo $$ > esc.pid; exec sleep 60' & "
                             "while [ ! -s esc.pid ]; do sleep 0.01; done; wait",
                        std::chrono::seconds(3));
  EXPECT_TRUE(r.timed_out);
  const int escaped = std::stoi(testing::read_file(dir / "esc.pid"));
  EXPECT_TRUE(ends(escaped)) << "process " << escaped << " that called setsid outlived the timeout";
}

TEST(ProcessRunner, OrphanedDaemonIsSweptAndReaped) {
  ASSERT_TRUE(adopt_orphans());
  testing::TempDir dir;
  // Forks, the child calls setsid and its parent exits at once: an orphan in
  // its own session that ignores SIGTERM, left behind by a command that
  // itself exits 0.
  const auto r = run_sh(dir, "setsid -f sh -c 'trap \"\" TERM; echo $$ > daemon.pid; exec sleep 60'; "
                             "while [ ! -s daemon.pid ]; do sleep 0.01; done; exit 0");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.strays_killed, 1u);
  const int daemon = std::stoi(testing::read_file(dir / "daemon.pid"));
  EXPECT_FALSE(alive(daemon));  // already killed and reaped when run_process returned
  EXPECT_EQ(zombie_children(), std::vector<pid_t>{});
}

TEST(ProcessRunner, NoZombieAfterATimeoutWithForkingChildren) {
  ASSERT_TRUE(adopt_orphans());
  testing::TempDir dir;
  const auto r = run_sh(dir, "trap '' TERM; for i in 1 2 3; do (trap '' TERM; sleep 60) & done; "
                             "setsid -f sh -c 'trap \"\" TERM; sleep 60'; wait",
                        std::chrono::seconds(1));
  EXPECT_TRUE(r.timed_out);
  EXPECT_TRUE(r.sigkill_needed);
  EXPECT_EQ(zombie_children(), std::vector<pid_t>{});
  for (const auto& p : list_processes()) EXPECT_NE(p.ppid, ::getpid()) << "child " << p.pid << " still there";
}

TEST(ProcessRunner, ALauncherReportsASignalAsExitCode128PlusIt) {
  testing::TempDir dir;
  ProcessSpec spec;
  spec.argv = {"/bin/true"};
  // As bwrap reports a command killed by SIGSEGV.
  spec.launcher = {"/bin/sh", "-c", "exit 139"};
  spec.cwd = dir.path();
  spec.stdout_path = dir / "o";
  spec.stderr_path = dir / "e";
  const auto r = run_process(spec);
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_EQ(r.describe(), "was killed by signal 11 (SIGSEGV)");
  spec.launcher = {"/bin/sh", "-c", "exit 3"};
  EXPECT_EQ(run_process(spec).describe(), "exited with code 3");
}

TEST(ProcessRunner, EnvironmentAndMissingExecutable) {
  testing::TempDir dir;
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo \"$DENSEFEED_MODE\""};
  spec.env = {{"DENSEFEED_MODE", "gate"}};
  spec.cwd = dir.path();
  spec.stdout_path = dir / "o";
  spec.stderr_path = dir / "e";
  EXPECT_TRUE(run_process(spec).ok());
  EXPECT_EQ(testing::read_file(dir / "o"), "gate\n");
  spec.argv = {"no-such-harness-anywhere"};
  const auto r = run_process(spec);
  EXPECT_FALSE(r.started);
  EXPECT_NE(r.describe().find("'no-such-harness-anywhere' not found"), std::string::npos) << r.describe();
}

}  // namespace
}  // namespace densefeed
