// The sandbox against real processes: what a sandboxed command can write,
// read, reach and leave behind. Where bwrap cannot start on this machine the
// tests that need it are skipped with bwrap's own reason.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>

#include "process_runner.h"
#include "process_tree.h"
#include "sandbox.h"
#include "test_support.h"

namespace densefeed {
namespace {

// Under the build tree, not /tmp: the sandbox gives a command its own empty
// /tmp, which would hide the difference between read-only and invisible.
class Scratch {
 public:
  Scratch() {
    std::random_device rd;
    path_ = std::filesystem::path(DENSEFEED_TEST_SCRATCH) / ("sandbox-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// A TCP listener on 127.0.0.1 that never blocks: connected() says whether
// anyone reached it.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("cannot listen on 127.0.0.1");
    }
    port_ = ntohs(addr.sin_port);
  }
  ~Listener() { ::close(fd_); }
  int port() const { return port_; }
  bool connected() const {
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK);
    if (c >= 0) ::close(c);
    return c >= 0;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

ProcessResult run_script(const Scratch& dir, const std::string& script, const std::vector<std::string>& launcher) {
  ProcessSpec spec;
  spec.argv = {"/bin/bash", "-c", script};
  spec.cwd = dir / "run";
  spec.stdout_path = dir / "stdout.log";
  spec.stderr_path = dir / "stderr.log";
  spec.timeout = std::chrono::seconds(60);
  spec.launcher = launcher;
  return run_process(spec);
}

SandboxPolicy policy_for(const Scratch& dir) {
  SandboxPolicy policy;
  policy.writable = {dir / "run" / "out"};
  policy.readable = {dir / "run"};
  policy.hidden = {dir / "hidden"};
  policy.cwd = dir / "run";
  return policy;
}

// Each attempt prints "NAME:ok" or "NAME:refused".
std::string attempts_script(const Scratch& dir, int port, const std::string& tmp_file) {
  const auto attempt = [](const std::string& name, const std::string& command) {
    return "if " + command + " 2>/dev/null; then echo " + name + ":ok; else echo " + name + ":refused; fi; ";
  };
  return attempt("overwrite-locked", "echo x > " + (dir / "locked.txt").string()) +
         attempt("read-hidden", "cat " + (dir / "hidden" / "secret.txt").string() + " >/dev/null") +
         attempt("write-out", "echo y > out/written.txt") +
         attempt("write-tmp", "echo z > " + tmp_file) +
         attempt("connect", "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port));
}

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const SandboxStatus status = sandbox_status(true);
    if (!status.on()) GTEST_SKIP() << "bwrap cannot run on this machine, so the sandbox is untested here: " << status.text();
    std::filesystem::create_directories(dir_ / "run" / "out");
    testing::write_file(dir_ / "locked.txt", "locked\n");
    testing::write_file(dir_ / "hidden" / "secret.txt", "the reference's answer\n");
  }
  Scratch dir_;
  std::string tmp_file_ = "/tmp/densefeed-sandbox-test-" + std::to_string(std::random_device{}());
};

TEST(Sandbox, OffWhenNotRequested) {
  const SandboxStatus s = sandbox_status(false);
  EXPECT_EQ(s.mode, SandboxMode::off);
  EXPECT_EQ(s.text(), "off: --no-sandbox");
}

TEST(Sandbox, ArgvShowsASmallWorldCoversThenRebindsAndShutsTheNamespaces) {
  Scratch dir;
  for (const char* d : {"w", "r", "h", "r/h2"}) std::filesystem::create_directories(dir / d);
  SandboxPolicy policy;
  policy.writable = {dir / "w"};
  policy.readable = {dir / "r", dir / "missing"};
  policy.hidden = {dir / "h", dir / "r" / "h2"};
  policy.cwd = dir / "r";
  const auto argv = sandbox_argv(policy);
  const auto at = [&](std::vector<std::string> seq) -> long {
    const auto it = std::search(argv.begin(), argv.end(), seq.begin(), seq.end());
    return it == argv.end() ? -1 : it - argv.begin();
  };
  // The system's runtime read-only, never the whole filesystem.
  EXPECT_EQ(at({"--ro-bind", "/usr", "/usr"}), 1);
  EXPECT_EQ(at({"--ro-bind", "/", "/"}), -1);
  EXPECT_GE(at({"--ro-bind", "/etc", "/etc"}), 0);
  // A private /tmp, after /proc, before anything shown inside it.
  EXPECT_GT(at({"--tmpfs", "/tmp"}), at({"--proc", "/proc"}));
  const auto r = std::filesystem::absolute(dir / "r").lexically_normal().string();
  const auto h = std::filesystem::absolute(dir / "h").lexically_normal().string();
  const auto h2 = std::filesystem::absolute(dir / "r" / "h2").lexically_normal().string();
  EXPECT_GT(at({"--ro-bind", r, r}), at({"--tmpfs", "/tmp"}));
  // A hidden folder is covered only where something shown holds it: h is
  // never shown (nothing to cover), h2 lies in r and is covered after it.
  EXPECT_EQ(at({"--tmpfs", h}), -1);
  EXPECT_GT(at({"--tmpfs", h2}), at({"--ro-bind", r, r}));
  const auto w = std::filesystem::absolute(dir / "w").lexically_normal().string();
  EXPECT_GT(at({"--bind", w, w}), at({"--ro-bind", r, r}));
  EXPECT_EQ(at({"--ro-bind", (dir / "missing").string()}), -1);
  EXPECT_GE(at({"--chdir", (dir / "r").string()}), 0);
  for (const char* flag : {"--unshare-pid", "--unshare-net", "--die-with-parent"}) EXPECT_GE(at({flag}), 0) << flag;
  EXPECT_GE(at({"--cap-drop", "ALL"}), 0);
  EXPECT_EQ(at({"--new-session"}), -1);  // it would leave densefeed's process group
  EXPECT_EQ(argv.back(), "--");
}

// A rank of a group (issue 25): a PID namespace, mounts and /tmp of its
// own and no capabilities, inside its group's sandbox, whose network
// namespace (the ranks' loopback) and /dev/shm it shares. The group's
// holder runs densefeed's own code only: as root it keeps the capabilities
// bwrap needs to make the ranks' sandboxes.
TEST(Sandbox, ARankHasItsOwnPidNamespaceAndNoCapabilitiesAndSharesItsGroupsNetwork) {
  Scratch dir;
  std::filesystem::create_directories(dir / "r");
  SandboxPolicy policy;
  policy.readable = {dir / "r"};
  policy.cwd = dir / "r";
  policy.role = SandboxRole::rank;
  const auto count = [](const std::vector<std::string>& argv, std::vector<std::string> seq) {
    long n = 0;
    for (auto it = argv.begin(); (it = std::search(it, argv.end(), seq.begin(), seq.end())) != argv.end(); ++it) ++n;
    return n;
  };
  const auto rank = sandbox_argv(policy);
  EXPECT_EQ(count(rank, {"--unshare-pid"}), 1);
  EXPECT_EQ(count(rank, {"--unshare-net"}), 0);
  EXPECT_EQ(count(rank, {"--cap-drop", "ALL"}), 1);
  EXPECT_EQ(count(rank, {"--bind", "/dev/shm", "/dev/shm"}), 1);
  policy.role = SandboxRole::group;
  const auto group = sandbox_argv(policy);
  EXPECT_EQ(count(group, {"--unshare-net"}), 1);
  EXPECT_EQ(count(group, {"--unshare-pid"}), 1);
  EXPECT_EQ(count(group, {"--cap-drop", "ALL"}), ::geteuid() == 0 ? 0 : 1);
  EXPECT_EQ(count(group, {"--bind", "/dev/shm", "/dev/shm"}), 0);
}

// A harness whose folder is a system folder (/bin/sh: /bin, a link to
// usr/bin on a merged-/usr system) runs: the folder is shown by the system
// part already and never bound again ("bwrap: Can't make symlink at /bin:
// File exists" before issue 25).
TEST_F(SandboxTest, AProgramInASystemFolderRunsWithItsFolderReadable) {
  SandboxPolicy policy = policy_for(dir_);
  for (const char* d : {"/bin", "/sbin", "/lib", "/usr/bin", "/etc/ssh"}) policy.readable.emplace_back(d);
  const auto argv = sandbox_argv(policy);
  const auto plain = sandbox_argv(policy_for(dir_));
  for (const char* d : {"/bin", "/sbin", "/lib", "/usr/bin", "/etc/ssh"}) {
    EXPECT_EQ(std::count(argv.begin(), argv.end(), std::string(d)), std::count(plain.begin(), plain.end(), std::string(d)))
        << d << " bound again (or uncovered)";
  }
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo ran > out/sh.txt"};
  spec.cwd = dir_ / "run";
  spec.stdout_path = dir_ / "stdout.log";
  spec.stderr_path = dir_ / "stderr.log";
  spec.timeout = std::chrono::seconds(60);
  spec.launcher = argv;
  const ProcessResult r = run_process(spec);
  EXPECT_TRUE(r.ok()) << r.describe() << ": " << testing::read_file(dir_ / "stderr.log");
  EXPECT_EQ(testing::read_file(dir_ / "run" / "out" / "sh.txt"), "ran\n");
}

TEST_F(SandboxTest, WritesOnlyItsOutputFolderAndReachesNoNetwork) {
  Listener listener;
  const auto r = run_script(dir_, attempts_script(dir_, listener.port(), tmp_file_), sandbox_argv(policy_for(dir_)));
  ASSERT_TRUE(r.ok()) << r.describe() << testing::read_file(dir_ / "stderr.log");
  // Its /tmp is its own, empty and writable. locked.txt is not shown at all:
  // the folders above the shown run folder exist inside only as bwrap's
  // private mount points, so the "overwrite" creates a file there, in the
  // sandbox's own memory, and the host's file is unchanged (checked below).
  EXPECT_EQ(testing::read_file(dir_ / "stdout.log"),
            "overwrite-locked:ok\nread-hidden:refused\nwrite-out:ok\nwrite-tmp:ok\nconnect:refused\n");
  EXPECT_EQ(testing::read_file(dir_ / "locked.txt"), "locked\n");
  EXPECT_EQ(testing::read_file(dir_ / "run" / "out" / "written.txt"), "y\n");
  EXPECT_FALSE(std::filesystem::exists(tmp_file_));  // its /tmp was its own
  EXPECT_FALSE(listener.connected());
}

TEST_F(SandboxTest, WithoutItTheSameScriptSucceedsEverywhere) {
  // The control: the attempts above are refused by the sandbox, not by the
  // script or the machine.
  Listener listener;
  const auto r = run_script(dir_, attempts_script(dir_, listener.port(), tmp_file_), {});
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(testing::read_file(dir_ / "stdout.log"), "overwrite-locked:ok\nread-hidden:ok\nwrite-out:ok\nwrite-tmp:ok\nconnect:ok\n");
  EXPECT_TRUE(listener.connected());
  EXPECT_TRUE(std::filesystem::remove(tmp_file_));
}

// A shown folder reached through a symbolic link (a project whose build/bin
// links to a build elsewhere, as on the H200 run of 2026-12-01, where bwrap
// refused to mount on the link) is shown at its real place, so the link in
// the shown project resolves inside; a link into what is hidden (the
// workspace: the reference's outputs) shows nothing through it.
TEST_F(SandboxTest, AFolderShownThroughALinkIsShownAtItsRealPlaceAndNeverIntoTheHidden) {
  std::filesystem::create_directories(dir_ / "elsewhere");
  testing::write_file(dir_ / "elsewhere" / "tool.txt", "tool\n");
  std::filesystem::create_directory_symlink(dir_ / "elsewhere", dir_ / "run" / "bin");
  std::filesystem::create_directory_symlink(dir_ / "hidden", dir_ / "run" / "peek");
  SandboxPolicy policy = policy_for(dir_);
  policy.readable.push_back(dir_ / "run" / "bin");
  policy.readable.push_back(dir_ / "run" / "peek");
  const auto r = run_script(dir_,
                            "cat bin/tool.txt; if cat peek/secret.txt 2>/dev/null; then echo peek:read; else echo peek:refused; fi",
                            sandbox_argv(policy));
  ASSERT_TRUE(r.ok()) << r.describe() << testing::read_file(dir_ / "stderr.log");
  EXPECT_EQ(testing::read_file(dir_ / "stdout.log"), "tool\npeek:refused\n");
  // The hidden folder named through a link of its own: a link to its real
  // place still shows nothing of it.
  std::filesystem::create_directory_symlink(dir_ / "hidden", dir_ / "hidden-alias");
  std::filesystem::create_directory_symlink(dir_ / "hidden", dir_ / "run" / "peek2");
  SandboxPolicy aliased = policy_for(dir_);
  aliased.hidden = {dir_ / "hidden-alias"};
  aliased.readable.push_back(dir_ / "run" / "peek2");
  const auto r3 = run_script(dir_, "if cat peek2/secret.txt 2>/dev/null; then echo peek2:read; else echo peek2:refused; fi",
                             sandbox_argv(aliased));
  ASSERT_TRUE(r3.ok()) << r3.describe() << testing::read_file(dir_ / "stderr.log");
  EXPECT_EQ(testing::read_file(dir_ / "stdout.log"), "peek2:refused\n");
  // A linked folder nothing shown holds: the link is made inside too.
  std::filesystem::create_directory_symlink(dir_ / "elsewhere", dir_ / "alone");
  SandboxPolicy lone = policy_for(dir_);
  lone.readable.push_back(dir_ / "alone");
  const auto r2 = run_script(dir_, "cat " + (dir_ / "alone" / "tool.txt").string(), sandbox_argv(lone));
  ASSERT_TRUE(r2.ok()) << r2.describe() << testing::read_file(dir_ / "stderr.log");
  EXPECT_EQ(testing::read_file(dir_ / "stdout.log"), "tool\n");
}

TEST_F(SandboxTest, ASignalInsideIsReportedAsThatSignal) {
  const auto r = run_script(dir_, "kill -SEGV $$", sandbox_argv(policy_for(dir_)));
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_EQ(r.describe(), "was killed by signal 11 (SIGSEGV)");
  EXPECT_EQ(run_script(dir_, "exit 7", sandbox_argv(policy_for(dir_))).describe(), "exited with code 7");
}

TEST_F(SandboxTest, ADaemonThatCalledSetsidEndsWithTheSandbox) {
  // A marker no other process has: the daemon's sleep argument.
  const std::string marker = std::to_string(1000 + std::random_device{}() % 9000) + ".5";
  const auto r = run_script(dir_,
                            "setsid -f bash -c 'trap \"\" TERM; echo started > out/daemon; exec sleep " + marker + "'; "
                            "while [ ! -s out/daemon ]; do sleep 0.01; done; exit 0",
                            sandbox_argv(policy_for(dir_)));
  ASSERT_TRUE(r.ok()) << r.describe();
  ASSERT_EQ(testing::read_file(dir_ / "run" / "out" / "daemon"), "started\n");
  const auto running = [&] {
    for (const auto& p : list_processes()) {
      std::ifstream in("/proc/" + std::to_string(p.pid) + "/cmdline");
      std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (p.state != 'Z' && cmdline == "sleep" + std::string(1, '\0') + marker + std::string(1, '\0')) return true;
    }
    return false;
  };
  // The PID namespace's end is the kernel's: wait for it, bounded.
  for (int i = 0; i < 250 && running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(running()) << "the daemon outlived its sandbox";
}

}  // namespace
}  // namespace densefeed
