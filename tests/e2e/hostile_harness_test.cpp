// Harnesses that attack the runner (tests/support/hostile_harness.cpp),
// through the real CLI: each ends with the verdict it deserves, no process
// of theirs outlives the run, logs stay capped, and under the sandbox the
// gate file, the lock, the ledger, the reference's outputs and the network
// stay out of reach. Every process-control test runs twice: sandboxed (where
// bwrap can start here; skipped with its reason where it cannot) and with
// --no-sandbox.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>

#include <nlohmann/json.hpp>

#include "process_runner.h"
#include "sandbox.h"
#include "schema_validator.h"
#include "sha256.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;
const std::filesystem::path kBin = std::filesystem::path(kExe).parent_path();

// Two gates alike but for their timeout: `hostile-hang` (2 s) for the modes
// that never end, `hostile` (120 s, far above what any mode needs) for the
// rest, so that a loaded machine cannot turn a flood into a timeout.
std::string gate_text(const std::string& name, int timeout_s) {
  return "gate: " + name + R"(
description: y_i = sin(seed / 1000 + i); the candidate attacks the runner instead.
reference:
  command: [hostile_harness, --role, reference, --ref-mode, "{case.ref_mode}", --n, "{case.n}",
            --seed, "{seed}", --out, "{out}"]
candidate:
  command: [hostile_harness, --role, candidate, --mode, "{param.mode}", --n, "{case.n}", --seed, "{seed}",
            --out, "{out}", --gate-file, "{param.gate_file}", --lock-file, "{param.lock_file}",
            --ledger-file, "{param.ledger_file}", --port, "{param.port}"]
params:
  mode:
    type: string
    enum: [honest, sleep, fork-ignore-term, daemonize, flood, segfault, exit-nonzero, bad-utf8, no-output, tamper]
    default: honest
  gate_file: {type: string, default: ""}
  lock_file: {type: string, default: ""}
  ledger_file: {type: string, default: ""}
  port: {type: integer, default: 0}
outputs:
  y:
    dtype: float32
    reference_dtype: float64
    shape: ["{case.n}"]
    tolerance: {rel_l2: 1.0e-5, max_abs: 1.0e-5}
cases:
  defaults: {n: 64, ref_mode: honest}
  grid:
    - {ref_mode: [honest, sleep, segfault, exit-nonzero, no-output]}
profiles:
  quick: {ref_mode: [honest]}
  full: {ref_mode: [honest]}
  reference-faults: {ref_mode: [sleep, segfault, exit-nonzero, no-output]}
timeout_s: )" + std::to_string(timeout_s) + "\nfreezes: []\n";
}

// A TCP listener on 127.0.0.1 that never blocks.
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

class HostileBase : public ::testing::Test {
 protected:
  void SetUp() override {
    // Under /var/tmp, not /tmp: the sandbox gives a harness its own /tmp,
    // and these files must be visible to it to be refused read-only.
    std::random_device rd;
    dir_ = std::filesystem::path(DENSEFEED_TEST_SCRATCH) / ("hostile-" + std::to_string(rd()) + std::to_string(rd()));
    // A project whose gates are trusted as they are (--trust-worktree): the
    // gate file and lock a candidate tries to overwrite are the ones the run
    // reads.
    root_ = dir_ / "root";
    testing::write_project(root_);
    testing::write_file(root_ / "gates" / "hostile.yaml", gate_text("hostile", 120));
    testing::write_file(root_ / "gates" / "hostile-hang.yaml", gate_text("hostile-hang", 2));
    ASSERT_EQ(densefeed({"gate", "lock"}).exit_code, 0);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // densefeed on this project, with hostile_harness (the build's, named bare
  // in the gates) on PATH.
  testing::CliResult densefeed(std::vector<std::string> args, const std::map<std::string, std::string>& env = {}) const {
    args.insert(args.begin(), {"--project", root_.string(), "--trust-worktree"});
    return testing::run_cli(kExe, args, dir_, testing::with_on_path(kBin, env));
  }

  // Runs `gate` with candidate `params` (a YAML flow map's inside); returns
  // the JSON report after checking the exit code and the report's schema.
  nlohmann::json run(const std::string& gate, const std::string& params, int expected_exit, bool sandbox,
                     std::vector<std::string> extra = {}, const std::map<std::string, std::string>& env = {}) {
    const auto manifest = dir_ / ("m" + std::to_string(runs_++) + ".yaml");
    testing::write_file(manifest, "experiment: hostile\nhypothesis: h\npredicted_effect: p\ngate: " + gate +
                                      "\ncandidate: {revision: WORKTREE, params: {" + params +
                                      "}}\nbase: {revision: WORKTREE, params: {mode: honest, port: 1}}\n");
    std::vector<std::string> args = {"run", manifest.string(), "--ledger", ledger().string(), "--json", "--no-bench"};
    if (!sandbox) args.push_back("--no-sandbox");
    args.insert(args.end(), extra.begin(), extra.end());
    const auto res = densefeed(args, env);
    EXPECT_EQ(res.exit_code, expected_exit) << params << "\n" << res.out << res.err;
    auto report = nlohmann::json::parse(res.out);
    EXPECT_EQ(SchemaValidator(kRoot / "schemas" / "run-report.schema.json").errors(report), std::vector<std::string>{});
    return report;
  }
  std::filesystem::path ledger() const { return dir_ / "ledger.db"; }
  // The folder of experiment `report`'s candidate (case 0).
  std::filesystem::path candidate_dir(const nlohmann::json& report) const {
    return std::filesystem::path(report["work_dir"].get<std::string>()) / "candidate-000";
  }
  static const nlohmann::json& only_case(const nlohmann::json& report) { return report["stages"]["gate"]["cases"][0]; }

  std::filesystem::path dir_;
  std::filesystem::path root_;
  int runs_ = 0;
};

// Parameter: whether the run asks for the sandbox.
class Hostile : public HostileBase, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    if (GetParam() && !sandbox_status(true).on()) {
      GTEST_SKIP() << "bwrap cannot start a sandbox on this machine, so the sandboxed run is not tested here: "
                   << sandbox_status(true).text();
    }
    HostileBase::SetUp();
  }
  nlohmann::json run_mode(const std::string& gate, const std::string& mode, int expected_exit) {
    auto report = run(gate, "mode: " + mode, expected_exit, GetParam());
    EXPECT_EQ(report["sandbox"]["mode"], GetParam() ? "on" : "off") << report["sandbox"];
    // Whatever the mode, nothing it started is still running.
    EXPECT_EQ(testing::processes_left_mentioning((candidate_dir(report) / "out").string()), std::vector<int>{})
        << mode << " left processes behind";
    return report;
  }
};

TEST_P(Hostile, SleepingForeverIsRedAtTheTimeout) {
  const auto r = run_mode("hostile-hang", "sleep", 1);
  EXPECT_EQ(only_case(r)["reason"], "the candidate timed out after 2 s and was killed (SIGTERM ended it)");
  EXPECT_TRUE(only_case(r)["candidate_process"]["timed_out"].get<bool>());
}

TEST_P(Hostile, ChildrenThatIgnoreSigtermOrCallSetsidAreKilledToo) {
  const auto r = run_mode("hostile-hang", "fork-ignore-term", 1);
  const auto reason = only_case(r)["reason"].get<std::string>();
  // Unsandboxed the group outlives SIGTERM; sandboxed, SIGTERM ends bwrap
  // and with it the PID namespace of everything inside.
  EXPECT_EQ(reason, GetParam() ? "the candidate timed out after 2 s and was killed (SIGTERM ended it)"
                               : "the candidate timed out after 2 s and was killed (it outlived SIGTERM by the 2 s grace "
                                 "period: SIGKILL)");
  // The child that called setsid and its own child: found outside the group.
  EXPECT_EQ(only_case(r)["candidate_process"]["strays_killed"], 2);
}

TEST_P(Hostile, ADaemonLeftBehindIsKilledAndTheRightAnswerIsStillGreen) {
  const auto r = run_mode("hostile", "daemonize", 0);
  EXPECT_EQ(only_case(r)["verdict"], "green");
  // Unsandboxed densefeed adopts the orphan and kills it; sandboxed, the
  // PID namespace ends it uncounted.
  EXPECT_EQ(only_case(r)["candidate_process"]["strays_killed"], GetParam() ? 0 : 1);
}

TEST_P(Hostile, AGibibyteOnStdoutIsCappedCountedAndNeverHeldInMemory) {
  const auto r = run_mode("hostile", "flood", 0);
  const auto& p = only_case(r)["candidate_process"];
  EXPECT_EQ(p["stdout_bytes"], 1ull << 30);
  EXPECT_EQ(p["stdout_dropped"], (1ull << 30) - (16ull << 20));
  EXPECT_EQ(p["stderr_bytes"], 29);  // "flood: wrote 1 GiB to stdout\n"
  EXPECT_EQ(p["stderr_dropped"], 0);
  const auto log = candidate_dir(r) / "stdout.log";
  const std::string note = "\n[densefeed: 1056964608 more bytes were dropped beyond the 16 MiB cap of this log]\n";
  EXPECT_EQ(std::filesystem::file_size(log), (16u << 20) + note.size());
  // densefeed (and every process below it) stayed far below the gibibyte it
  // was sent: ru_maxrss is the largest resident set among reaped children.
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  EXPECT_LT(usage.ru_maxrss, 256 * 1024) << "KiB";
}

TEST_P(Hostile, ASegfaultIsRedNamingTheSignalWithItsLastLines) {
  const auto r = run_mode("hostile", "segfault", 1);
  EXPECT_EQ(only_case(r)["reason"],
            "the candidate was killed by signal 11 (SIGSEGV); last stderr line: about to dereference a null pointer");
  EXPECT_EQ(only_case(r)["log_tail_stream"], "stderr");
  EXPECT_EQ(only_case(r)["stderr_tail"], "about to dereference a null pointer");
}

TEST_P(Hostile, ANonZeroExitIsRedNamingTheCode) {
  const auto r = run_mode("hostile", "exit-nonzero", 1);
  EXPECT_EQ(only_case(r)["reason"], "the candidate exited with code 7; last stderr line: giving up with exit code 7");
}

// Bytes that are not UTF-8 on a failing candidate's stdout and stderr are
// its red verdict, recorded, with the bytes escaped (a hostile trial: they
// threw from the JSON dump and the experiment ended "interrupted", no
// verdict recorded).
TEST_P(Hostile, BytesThatAreNotUtf8InItsOutputKeepTheRedVerdict) {
  const auto r = run_mode("hostile", "bad-utf8", 1);
  EXPECT_EQ(only_case(r)["reason"], "the candidate exited with code 3; last stderr line: \\xff\\xfe bad utf8 \\xe2\\x80");
  const auto id = std::to_string(r["experiment_id"].get<long long>());
  const auto status = densefeed({"status", id, "--ledger", ledger().string(), "--json"});
  EXPECT_EQ(status.exit_code, 1) << status.out << status.err;
  const auto doc = nlohmann::json::parse(status.out);
  EXPECT_EQ(doc["state"], "finished") << doc.dump(1);
  EXPECT_EQ(doc["verdict"], "red") << doc.dump(1);
  const auto show = densefeed({"ledger", "show", id, "--ledger", ledger().string(), "--json"});
  EXPECT_EQ(show.exit_code, 0) << show.out << show.err;
  EXPECT_NO_THROW((void)nlohmann::json::parse(show.out)) << show.out;
}

TEST_P(Hostile, ExitingZeroWithoutOutputsIsRed) {
  const auto r = run_mode("hostile", "no-output", 1);
  const auto reason = only_case(r)["reason"].get<std::string>();
  EXPECT_NE(reason.find("y: candidate output: "), std::string::npos) << reason;
  EXPECT_NE(reason.find("y.npy: missing: the harness exited 0 without writing y.npy"), std::string::npos) << reason;
}

INSTANTIATE_TEST_SUITE_P(Runner, Hostile, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Sandboxed" : "Unsandboxed"; });

TEST_F(HostileBase, AReferenceThatFailsIsAnErrorNamingHow) {
  const auto r = run("hostile-hang", "mode: honest", 3, true, {"--profile", "reference-faults"});
  std::map<std::string, std::string> reasons;
  for (const auto& c : r["stages"]["gate"]["cases"]) {
    EXPECT_EQ(c["verdict"], "error") << c["case"];
    reasons[c["values"]["ref_mode"].get<std::string>()] = c["reason"].get<std::string>();
  }
  EXPECT_EQ(reasons["sleep"], "the reference timed out after 2 s and was killed (SIGTERM ended it)");
  EXPECT_EQ(reasons["segfault"], "the reference was killed by signal 11 (SIGSEGV)");
  EXPECT_EQ(reasons["exit-nonzero"], "the reference exited with code 7");
  EXPECT_NE(reasons["no-output"].find("y: reference output: "), std::string::npos) << reasons["no-output"];
  EXPECT_NE(reasons["no-output"].find("y.npy: missing: the harness exited 0 without writing y.npy"), std::string::npos);
}

// The files a candidate must not change, by content.
std::map<std::string, std::string> trusted_hashes(const std::filesystem::path& root) {
  return {{"gate", sha256_file(root / "gates" / "hostile.yaml")}, {"lock", sha256_file(root / "gates" / "gates.lock")}};
}

TEST_F(HostileBase, UnderTheSandboxTamperingWithGatesLockLedgerOrNetworkIsRefused) {
  const SandboxStatus status = sandbox_status(true);
  if (!status.on()) GTEST_SKIP() << "bwrap cannot start a sandbox on this machine, so tampering is not refused here: " << status.text();
  // An earlier experiment in the ledger, to see that nothing of it changes.
  run("hostile", "mode: honest", 0, true);
  const auto before = densefeed({"ledger", "show", "1", "--json", "--ledger", ledger().string()});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  const auto hashes = trusted_hashes(root_);
  Listener listener;
  const auto r = run("hostile",
                     "mode: tamper, gate_file: '" + (root_ / "gates" / "hostile.yaml").string() + "', lock_file: '" +
                         (root_ / "gates" / "gates.lock").string() + "', ledger_file: '" + ledger().string() +
                         "', port: " + std::to_string(listener.port()),
                     0, true);
  EXPECT_EQ(r["sandbox"]["mode"], "on");
  const std::string said = testing::read_file(candidate_dir(r) / "stdout.log");
  EXPECT_NE(said.find("gate-file: refused (Read-only file system)\n"), std::string::npos) << said;
  EXPECT_NE(said.find("lock-file: refused (Read-only file system)\n"), std::string::npos) << said;
  // The small world (issue 14) does not show the ledger at all: not there to write.
  EXPECT_NE(said.find("ledger-file: refused (No such file or directory)\n"), std::string::npos) << said;
  // The runs folder, with the reference's answer, is hidden.
  EXPECT_NE(said.find("reference-output: refused (No such file or directory)\n"), std::string::npos) << said;
  EXPECT_NE(said.find("network: refused ("), std::string::npos) << said;
  EXPECT_FALSE(listener.connected());
  EXPECT_EQ(trusted_hashes(root_), hashes);
  const auto after = densefeed({"ledger", "show", "1", "--json", "--ledger", ledger().string()});
  EXPECT_EQ(after.out, before.out);
  EXPECT_EQ(testing::run_cli("/usr/bin/sqlite3", {ledger().string(), "PRAGMA integrity_check"}, dir_).out, "ok\n");
}

TEST_F(HostileBase, WithoutTheSandboxTheSameHarnessReachesAllOfIt) {
  // The control for the test above: its refusals come from the sandbox, not
  // from a harness that never really tried. (The ledger is left out here:
  // overwriting it under a running densefeed is not this test's subject.)
  const auto hashes = trusted_hashes(root_);
  Listener listener;
  const auto r = run("hostile",
                     "mode: tamper, gate_file: '" + (root_ / "gates" / "hostile.yaml").string() + "', lock_file: '" +
                         (root_ / "gates" / "gates.lock").string() + "', port: " + std::to_string(listener.port()),
                     0, false);
  EXPECT_EQ(r["sandbox"]["mode"], "off");
  const std::string said = testing::read_file(candidate_dir(r) / "stdout.log");
  EXPECT_EQ(said, "gate-file: written\nlock-file: written\nreference-output: read\nnetwork: connected\n");
  EXPECT_TRUE(listener.connected());
  EXPECT_NE(trusted_hashes(root_), hashes);
}

TEST_F(HostileBase, ASandboxThatCannotStartIsSaidOnceAndNothingRuns) {
  // A bwrap that fails as it does in a container without user namespaces.
  const auto fake = dir_ / "fake-bin";
  testing::write_file(fake / "bwrap", "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n");
  std::filesystem::permissions(fake / "bwrap", std::filesystem::perms::owner_all);
  const std::map<std::string, std::string> env = {{"PATH", fake.string() + ":" + std::getenv("PATH")}};
  const auto manifest = dir_ / "m0.yaml";
  testing::write_file(manifest, "experiment: hostile\nhypothesis: h\npredicted_effect: p\ngate: hostile\n"
                                "candidate: {revision: WORKTREE, params: {mode: honest}}\n"
                                "base: {revision: WORKTREE, params: {mode: honest, port: 1}}\n");
  // Fail closed (issue 14): an infrastructure error, no untrusted command run
  // and nothing recorded; --no-sandbox is the person's explicit way out.
  const auto r = densefeed({"run", manifest.string(), "--ledger", ledger().string(), "--json", "--no-bench"}, env);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(SchemaValidator(kRoot / "schemas" / "error.schema.json").errors(doc), std::vector<std::string>{}) << r.out;
  EXPECT_EQ(doc["verdict"], "infrastructure-error");
  const std::string error = doc["error"].get<std::string>();
  EXPECT_NE(error.find("the sandbox cannot start, so no untrusted command was run"), std::string::npos) << error;
  EXPECT_NE(error.find("bwrap: No permissions to create new namespace"), std::string::npos) << error;
  EXPECT_NE(error.find("--no-sandbox"), std::string::npos) << error;
  const auto nothing_recorded = [&] {
    return !std::filesystem::exists(ledger()) ||
           testing::run_cli("/usr/bin/sqlite3", {ledger().string(), "SELECT COUNT(*) FROM experiments"}, dir_).out == "0\n";
  };
  EXPECT_TRUE(nothing_recorded());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "ledger-runs" / "1")) << "a run folder was made";

  const auto text = densefeed({"run", manifest.string(), "--ledger", ledger().string(), "--no-bench"}, env);
  EXPECT_EQ(text.exit_code, 3) << text.out << text.err;
  std::size_t said = 0;
  for (std::size_t at = text.err.find("the sandbox cannot start"); at != std::string::npos;
       at = text.err.find("the sandbox cannot start", at + 1)) {
    ++said;
  }
  EXPECT_EQ(said, 1u) << text.err;
  EXPECT_EQ(text.out.find("the sandbox cannot start"), std::string::npos) << text.out;
  EXPECT_TRUE(nothing_recorded());
}

}  // namespace
}  // namespace densefeed
