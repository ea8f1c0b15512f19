#include <gtest/gtest.h>

#include <signal.h>

#include <fstream>

#include "process_runner.h"
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
  EXPECT_EQ(r.describe(), "exit code 3");
  EXPECT_EQ(testing::read_file(dir / "out.log"), "hello\n");
  EXPECT_EQ(file_tail(dir / "err.log"), "oops");
}

TEST(ProcessRunner, SignalIsReported) {
  testing::TempDir dir;
  const auto r = run_sh(dir, "kill -SEGV $$");
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_EQ(r.describe(), "killed by signal 11 (SEGV)");
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
