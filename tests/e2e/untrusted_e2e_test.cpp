// Issue 14's attacks, each through the real CLI in a project of its own (a
// temporary git repository made by `densefeed init`, never densefeed's
// checkout): a trace command (and, for a subset, an acceptance command run by
// `promote`) written to attack. attack.py prints ATTACK-SUCCEEDED and exits 3
// when its attack worked, ATTACK-REFUSED and exits 1 when it did not; every
// test checks the verdict names the command that failed AND the host-side
// effect (a file unchanged, a listener that saw no connection), so a stage
// that silently skipped the command would fail it too.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "sha256.h"
#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::string kExe = DENSEFEED_EXE;

const char* kAttack = R"PY(
import os, socket, sys, time, json
mode, args = sys.argv[1], sys.argv[2:]
def ok(msg):
    print("ATTACK-SUCCEEDED: " + msg, file=sys.stderr); sys.exit(3)
def refused(msg):
    print("ATTACK-REFUSED: " + msg, file=sys.stderr); sys.exit(1)
try:
    if mode == "write":
        with open(args[0], "a") as f: f.write("pwned\n")
        ok("appended to " + args[0])
    if mode == "tcp":
        s = socket.create_connection(("127.0.0.1", int(args[0])), timeout=2); ok("connected")
    if mode == "unix":
        s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(args[0]); ok("connected to " + args[0])
    if mode == "read":
        data = open(args[0], "rb").read()
        if data: ok("read %d bytes of %s" % (len(data), args[0]))
        refused("empty " + args[0])
    if mode == "list":
        names = os.listdir(args[0])
        if names: ok("listed " + ",".join(names))
        refused("empty folder " + args[0])
    if mode == "env":
        v = os.environ.get(args[0])
        if v: ok("read " + args[0] + "=" + v)
        refused("no " + args[0])
    if mode == "hop":
        # A hopper: forks, the parent exits, the child forks again, forever.
        if os.fork() > 0: refused("started a hopper")
        os.setsid()
        while True:
            if os.fork() > 0: os._exit(0)
            time.sleep(0.003)
    if mode == "sleep":
        if os.fork() == 0:
            os.setsid(); time.sleep(600)
        time.sleep(600)
    if mode == "memory":
        b = bytearray(int(args[0]) << 20)
        for i in range(0, len(b), 4096): b[i] = 1
        ok("held %s MiB" % args[0])
    if mode == "fork":
        kids = []
        for i in range(int(args[0])):
            p = os.fork()
            if p == 0: time.sleep(5); os._exit(0)
            kids.append(p)
        ok("%d processes" % len(kids))
    if mode == "disk":
        with open(os.path.join(args[0], "big.bin"), "wb") as f:
            for i in range(int(args[1])): f.write(b"x" * (1 << 20))
        ok("wrote %s MiB" % args[1])
    if mode == "tmpfill":
        for k in range(int(args[0])):
            with open("/tmp/fill%d" % k, "wb") as f: f.write(b"x" * (4 << 20))
        ok("filled /tmp")
except OSError as e:
    refused(repr(e))
except MemoryError as e:
    print("MemoryError", file=sys.stderr); refused("MemoryError")
refused("unknown mode " + mode)
)PY";

class Listener {
 public:
  explicit Listener(const std::filesystem::path& unix_path = {}) {
    if (unix_path.empty()) {
      fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof a;
      ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
      ::listen(fd_, 8);
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
      port_ = ntohs(a.sin_port);
    } else {
      fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::snprintf(a.sun_path, sizeof a.sun_path, "%s", unix_path.c_str());
      ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
      ::listen(fd_, 8);
    }
  }
  ~Listener() { ::close(fd_); }
  int port() const { return port_; }
  bool connected() const { return ::accept(fd_, nullptr, nullptr) >= 0; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class Untrusted : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_ / "project";
    std::filesystem::create_directories(repo_);
    git({"init", "-q", "-b", "main"});
    git({"config", "user.email", "t@example.org"});
    git({"config", "user.name", "T"});
    testing::write_file(repo_ / "README.md", "x\n");
    git({"add", "-A"});
    git({"commit", "-qm", "init"});
    ASSERT_EQ(densefeed({"init", repo_.string()}).exit_code, 0);
    // Small limits, so that each can be reached cheaply.
    auto gate = testing::read_file(repo_ / "gates" / "scan-sharded.yaml");
    gate += "\nlimits: {memory_mb: 512, processes: 128, file_size_mb: 16, tmp_mb: 16}\n";
    testing::write_file(repo_ / "gates" / "scan-sharded.yaml", gate);
    testing::write_file(repo_ / "attack.py", kAttack);
    git({"add", "-A"});
    git({"commit", "-qm", "densefeed"});
    const auto lock = densefeed({"gate", "lock"});
    ASSERT_EQ(lock.exit_code, 0) << lock.out << lock.err;
    git({"commit", "-qam", "lock"});
    // Another ledger's run, with a reference output in it.
    testing::write_file(dir_ / "other" / "ledger-runs" / "1" / "reference-000" / "out" / "final_state.npy", "secret reference bytes");
    testing::write_file(dir_ / "home" / ".ssh" / "id_rsa", "operator's key");
  }

  std::map<std::string, std::string> env(const std::string& path = "/usr/local/bin:/usr/bin:/bin") const {
    return {{"PATH", path}, {"HOME", (dir_ / "home").string()}, {"DENSEFEED_TEST_SECRET", "operator-secret-42"}};
  }
  testing::CliResult densefeed(const std::vector<std::string>& args, const std::string& path = "/usr/local/bin:/usr/bin:/bin") const {
    return testing::run_cli(kExe, args, repo_, env(path));
  }
  void git(const std::vector<std::string>& args) const {
    std::vector<std::string> a = {"git", "-C", repo_.string()};
    a.insert(a.end(), args.begin(), args.end());
    const auto r = testing::run_cli("/usr/bin/env", a, repo_, env());
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  std::string yaml_list(const std::vector<std::string>& argv) const {
    std::string s = "[python3, \"{project}/attack.py\"";
    for (const auto& a : argv) s += ", \"" + a + "\"";
    return s + "]";
  }
  std::filesystem::path manifest(const std::string& name, const std::string& extra, const std::string& hypothesis = "h") const {
    const auto p = dir_ / (name + ".yaml");
    testing::write_file(p, "experiment: " + name + "\nauthor: agent\nhypothesis: \"" + hypothesis +
                               "\"\npredicted_effect: p\ngate: scan-sharded\n"
                               "candidate: {revision: WORKTREE, params: {merge_dtype: float32}}\n"
                               "base: {revision: WORKTREE, params: {merge_dtype: float16}}\n" + extra);
    return p;
  }
  // Runs a trace command `argv` of attack.py; returns the run's JSON.
  J run_trace(const std::vector<std::string>& argv, int expected_exit = 1, const std::vector<std::string>& flags = {}) {
    const auto m = manifest("trace-attack", "trace:\n  command: " + yaml_list(argv) +
                                                "\n  arms: [candidate]\n  checks:\n    - share: {name: gemm, max_fraction: 0.9}\n");
    std::vector<std::string> a = {"run", m.string(), "--json", "--no-bench"};
    a.insert(a.end(), flags.begin(), flags.end());
    const auto r = densefeed(a);
    EXPECT_EQ(r.exit_code, expected_exit) << r.out << r.err;
    return J::parse(r.out, nullptr, false);
  }
  // The trace stage failed because the attack was refused inside.
  void expect_refused(const J& doc) {
    ASSERT_TRUE(doc.is_object());
    EXPECT_EQ(doc["stages"]["gate"]["verdict"], "green");
    const std::string reason = doc["stages"]["trace"]["reason"];
    EXPECT_NE(reason.find("the candidate's trace command"), std::string::npos) << reason;
    EXPECT_NE(reason.find("ATTACK-REFUSED"), std::string::npos) << reason;
    EXPECT_EQ(reason.find("ATTACK-SUCCEEDED"), std::string::npos) << reason;
  }

  testing::TempDir dir_;
  std::filesystem::path repo_;
};

TEST_F(Untrusted, TraceCommandCannotWriteTheGateStoreLockLedgerOrHome) {
  // The ledger exists once one run is recorded.
  const J first = run_trace({"read", "/nonexistent"});
  expect_refused(first);
  const auto ledger = repo_ / ".densefeed" / "ledger.db";
  ASSERT_TRUE(std::filesystem::exists(ledger));
  std::filesystem::path exported;
  for (const auto& e : std::filesystem::directory_iterator(repo_ / ".densefeed" / "ledger-exports")) exported = e.path();
  for (const auto& target : {repo_ / "gates" / "scan-sharded.yaml", repo_ / "gates" / "gates.lock", ledger,
                             exported / "gates" / "gates.lock", dir_ / "home" / "pwned.txt"}) {
    const bool existed = std::filesystem::exists(target);
    expect_refused(run_trace({"write", target.string()}));
    EXPECT_EQ(std::filesystem::exists(target), existed) << target;
    if (existed) EXPECT_EQ(testing::read_file(target).find("pwned"), std::string::npos) << target;
  }
  EXPECT_EQ(densefeed({"ledger", "verify"}).exit_code, 0);
}

TEST_F(Untrusted, TraceCommandCannotConnectOverTcpOrToAHostUnixSocket) {
  Listener tcp;
  expect_refused(run_trace({"tcp", std::to_string(tcp.port())}));
  EXPECT_FALSE(tcp.connected());
  const auto path = dir_ / "host.sock";
  Listener unix_socket(path);
  expect_refused(run_trace({"unix", path.string()}));
  EXPECT_FALSE(unix_socket.connected());
  // The same listeners are reachable from outside: the checks can fail.
  EXPECT_EQ(testing::run_cli("/usr/bin/python3", {(repo_ / "attack.py").string(), "unix", path.string()}, dir_.path()).exit_code, 3);
  EXPECT_TRUE(unix_socket.connected());
}

TEST_F(Untrusted, TraceCommandCannotReadRootShadowAnotherLedgerOrTheEnvironment) {
  ASSERT_EQ(testing::run_cli("/usr/bin/python3", {(repo_ / "attack.py").string(), "read", "/etc/shadow"}, dir_.path()).exit_code, 3)
      << "the host's /etc/shadow must be readable here for this test to mean anything";
  expect_refused(run_trace({"read", "/etc/shadow"}));
  if (std::filesystem::exists("/root") && !std::filesystem::is_empty("/root")) expect_refused(run_trace({"list", "/root"}));
  expect_refused(run_trace({"read", (dir_ / "other" / "ledger-runs" / "1" / "reference-000" / "out" / "final_state.npy").string()}));
  expect_refused(run_trace({"read", (dir_ / "home" / ".ssh" / "id_rsa").string()}));
  expect_refused(run_trace({"list", "/run"}));
  expect_refused(run_trace({"env", "DENSEFEED_TEST_SECRET"}));
  // This run's own reference outputs.
  expect_refused(run_trace({"read", (repo_ / ".densefeed" / "ledger-runs" / "1" / "reference-000" / "out" / "final_state.npy").string()}));
}

TEST_F(Untrusted, EachLimitIsANamedRed) {
  const auto named = [&](const std::vector<std::string>& argv, const std::string& limit) {
    const J doc = run_trace(argv);
    ASSERT_TRUE(doc.is_object());
    const std::string reason = doc["stages"]["trace"]["reason"];
    EXPECT_NE(reason.find(limit), std::string::npos) << argv[0] << ": " << reason;
    EXPECT_EQ(reason.find("ATTACK-SUCCEEDED"), std::string::npos) << reason;
  };
  named({"memory", "1024"}, "the memory limit of 512 MiB");
  named({"fork", "400"}, "the process limit of 128");
  named({"disk", "out", "64"}, "the file-size limit of 16 MiB");
  named({"tmpfill", "8"}, "the private /tmp limit of 16 MiB");
}

TEST_F(Untrusted, AHopperDiesWithItsCommandSandboxedAndNot) {
  for (const std::vector<std::string> flags : {std::vector<std::string>{}, std::vector<std::string>{"--no-sandbox"}}) {
    const std::string marker = "hopper-" + std::to_string(flags.size()) + "-" + std::to_string(::getpid());
    expect_refused(run_trace({"hop", marker}, 1, flags));
    EXPECT_EQ(testing::processes_left_mentioning(marker), std::vector<int>{}) << (flags.empty() ? "sandboxed" : "--no-sandbox");
  }
}

TEST_F(Untrusted, WithoutBwrapNothingUntrustedRunsExitThree) {
  // A PATH with everything densefeed and the harnesses need, but bwrap.
  const auto bin = dir_ / "bin";
  std::filesystem::create_directories(bin);
  for (const char* tool : {"git", "python3", "tar", "true", "sh", "env"}) {
    const auto where = testing::run_cli("/bin/sh", {"-c", std::string("command -v ") + tool}, dir_.path()).out;
    std::filesystem::create_symlink(where.substr(0, where.find('\n')), bin / tool);
  }
  const auto marker = dir_ / "candidate-ran";
  auto scan = testing::read_file(repo_ / "harness" / "scan.py");
  testing::write_file(repo_ / "harness" / "scan.py", "open('" + marker.string() + "', 'w').write('ran')\n" + scan);
  const auto r = densefeed({"run", (repo_ / "experiments" / "scan-merge-float32.yaml").string(), "--no-bench"}, bin.string());
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("bwrap not found"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--no-sandbox"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(marker)) << "a candidate ran without the sandbox";
  // --no-sandbox runs it, says so, and audit fails on the green result.
  const auto bare = densefeed({"run", (repo_ / "experiments" / "scan-merge-float32.yaml").string(), "--no-bench", "--no-sandbox"}, bin.string());
  EXPECT_EQ(bare.exit_code, 0) << bare.out << bare.err;
  EXPECT_TRUE(std::filesystem::exists(marker));
  const auto audit = densefeed({"audit"});
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;
  EXPECT_NE(audit.out.find("without the sandbox (off: --no-sandbox)"), std::string::npos) << audit.out;
  EXPECT_EQ(densefeed({"audit", "--allow-unsandboxed"}).exit_code, 0);
}

TEST_F(Untrusted, WithoutTheSandboxLinkAndRewriteCheatsAreRed) {
  // The WORKTREE candidate waits for its case's reference and copies its answer in three ways.
  const std::string cheat = R"PY(
import glob, os, sys, time, shutil
out = os.environ["DENSEFEED_OUT"]
mode = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cheat-mode")).read().strip()
refs = sorted(glob.glob(os.path.join(out, "..", "..", "reference-*", "out", "final_state.npy")))
ref = refs[0]
if mode == "hardlink":
    os.link(ref, os.path.join(out, "final_state.npy"))
elif mode == "symlink-folder":
    os.rmdir(out); os.symlink(os.path.dirname(ref), out)
elif mode == "rewrite":
    import numpy as np
    x = np.load(ref).astype(np.float32)
    np.save(os.path.join(out, "final_state.npy"), x)
    np.save(ref, x.astype(np.float64) + 1.0)  # the reference now says what it never computed
sys.exit(0)
)PY";
  testing::write_file(repo_ / "harness" / "scan.py", cheat);
  for (const std::string mode : {"hardlink", "symlink-folder", "rewrite"}) {
    testing::write_file(repo_ / "harness" / "cheat-mode", mode);
    const auto r = densefeed({"run", (repo_ / "experiments" / "scan-merge-float32.yaml").string(), "--no-bench", "--no-sandbox",
                              "--jobs", "1", "--json"});
    EXPECT_EQ(r.exit_code, 1) << mode << r.out << r.err;
    const J doc = J::parse(r.out, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << r.out << r.err;
    std::string reasons;
    for (const auto& c : doc["stages"]["gate"]["cases"]) reasons += c["reason"].get<std::string>() + "\n";
    // The folder's link loops (its target goes through the link itself): still a red naming the link, no error.
    const std::string expected = mode == "hardlink"         ? "a hard link"
                                 : mode == "symlink-folder" ? "candidate-000/out: the output folder was replaced by a symbolic link"
                                                            : "changed after the reference exited";
    EXPECT_NE(reasons.find(expected), std::string::npos) << mode << ": " << reasons;
  }
  // Sandboxed, the same candidate cannot even see a reference.
  testing::write_file(repo_ / "harness" / "cheat-mode", "hardlink");
  const auto boxed = densefeed({"run", (repo_ / "experiments" / "scan-merge-float32.yaml").string(), "--no-bench", "--json"});
  EXPECT_EQ(boxed.exit_code, 1) << boxed.out;
  EXPECT_NE(boxed.out.find("IndexError"), std::string::npos) << boxed.out;
}

TEST_F(Untrusted, AcceptanceCommandIsSandboxedAndDiesWithAKilledPromote) {
  const auto secret_target = dir_ / "home" / "accepted.txt";
  const auto run_accept = [&](const std::vector<std::string>& argv) {
    const auto m = manifest("accept", "acceptance:\n  command: " + yaml_list(argv) + "\n  criteria: [\"x <= 1\"]\n");
    const auto r = densefeed({"run", m.string(), "--no-bench", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return J::parse(r.out)["experiment_id"].get<int>();
  };
  Listener tcp;
  for (const auto& argv : std::vector<std::vector<std::string>>{{"write", secret_target.string()}, {"tcp", std::to_string(tcp.port())},
                                                                {"read", "/etc/shadow"}, {"env", "DENSEFEED_TEST_SECRET"}}) {
    const int id = run_accept(argv);
    const auto p = densefeed({"promote", std::to_string(id), "--by", "tester", "--json"});
    EXPECT_EQ(p.exit_code, 1) << p.out << p.err;
    const J doc = J::parse(p.out, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << p.out << p.err;
    const std::string reason = doc["reason"];
    EXPECT_NE(reason.find("the acceptance command"), std::string::npos) << reason;
    EXPECT_NE(reason.find("ATTACK-REFUSED"), std::string::npos) << reason;
  }
  EXPECT_FALSE(std::filesystem::exists(secret_target));
  EXPECT_FALSE(tcp.connected());

  // promote SIGKILLed mid-acceptance leaves nothing behind.
  const std::string marker = "accept-sleeper-" + std::to_string(::getpid());
  const int id = run_accept({"sleep", marker});
  ProcessSpec spec;
  spec.argv = {kExe, "promote", std::to_string(id), "--by", "tester"};
  spec.cwd = repo_;
  spec.env = env();
  spec.stdout_path = dir_ / "promote.out";
  spec.stderr_path = dir_ / "promote.err";
  spec.timeout = std::chrono::seconds(4);  // then SIGTERM; kill_grace 0: SIGKILL
  spec.kill_grace = std::chrono::milliseconds(1);
  std::atomic<bool> seen{false};
  std::thread watcher([&] {
    for (int i = 0; i < 350 && !seen; ++i) {
      seen = !testing::processes_mentioning(marker).empty();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  const auto r = run_process(spec);
  watcher.join();
  EXPECT_TRUE(r.timed_out);
  EXPECT_TRUE(seen) << "the acceptance command never started: " << testing::read_file(dir_ / "promote.err");
  EXPECT_EQ(testing::processes_left_mentioning(marker), std::vector<int>{});
}

TEST_F(Untrusted, ControlCharactersInAHypothesisAreEscapedInLedgerShow) {
  const auto m = manifest("escapes", "", "red\\x1b[2K\\rGREEN \\u202e reversed");
  const auto r = densefeed({"run", m.string(), "--no-bench"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  const auto show = densefeed({"ledger", "show", "1"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(show.out.find('\x1b'), std::string::npos) << show.out;
  EXPECT_EQ(show.out.find('\r'), std::string::npos) << show.out;
  EXPECT_EQ(show.out.find("\xe2\x80\xae"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("red\\x1b[2K\\x0dGREEN \\u202e reversed"), std::string::npos) << show.out;
  const auto list = densefeed({"ledger", "list"});
  EXPECT_EQ(list.out.find('\x1b'), std::string::npos) << list.out;
  // JSON keeps the text, escaped as JSON does.
  const auto json = densefeed({"ledger", "show", "1", "--json"});
  EXPECT_EQ(J::parse(json.out)["hypothesis"], "red\x1b[2K\rGREEN \xe2\x80\xae reversed");
}

}  // namespace
}  // namespace densefeed
