// Issue 18, "past one machine": the Slurm executor against a real
// single-node Slurm (munged, slurmctld, slurmd with two fake GPUs as GRES),
// started by tests/support/slurm/slurm_cluster.sh (idempotent; .ci/run starts
// it before the tests). Every test skips, saying why, only when that script
// cannot start Slurm on this machine.
//
//   - both CP examples through --executor slurm give the local executor's
//     verdicts, case by case; the benchmark runs as one job;
//   - a case whose job is scancelled from outside is error after one retry,
//     never red; a job past its time limit is red with TIMEOUT named;
//   - two 1-GPU cases are placed on different fake GPUs (recorded);
//   - a 2-rank case (issue 20) asks --gres=gpu:2 and its ranks get one GPU each;
//   - `densefeed cancel` of a running experiment leaves no job in squeue;
//   - a worker killed outright leaves its job running; the next worker start
//     cancels it and runs the experiment again.
// The Slurm tests share one cluster (2 CPUs, 2 GPUs): ctest runs them one at
// a time (RESOURCE_LOCK slurm).
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <regex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::string kExe = DENSEFEED_EXE;
const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;

// Starts (or finds) the cluster once for the whole binary: the SLURM_CONF
// line, or why it could not start.
struct Cluster {
  std::string conf;
  std::string why_not;
};

const Cluster& cluster() {
  static const Cluster c = [] {
    Cluster c;
    const auto r = testing::run_cli("/bin/bash", {(kRoot / "tests" / "support" / "slurm" / "slurm_cluster.sh").string(), "start"},
                                    kRoot);
    const auto at = r.out.find("SLURM_CONF=");
    if (r.exit_code != 0 || at == std::string::npos) {
      c.why_not = "tests/support/slurm/slurm_cluster.sh start exited " + std::to_string(r.exit_code) + ": " + r.err + r.out;
      return c;
    }
    c.conf = r.out.substr(at + 11, r.out.find('\n', at) - at - 11);
    return c;
  }();
  return c;
}

// harness.py: reference and candidate of gate `slow`/`gpu`: y = 2 x; the
// candidate sleeps --sleep seconds first, or waits while {project}/hold
// exists (at most 120 s), and writes the CUDA_VISIBLE_DEVICES it saw.
const char* kHarness = R"(import argparse, json, os, time
import numpy as np
p = argparse.ArgumentParser()
p.add_argument('--role'); p.add_argument('--n', type=int); p.add_argument('--sleep', type=float, default=0)
p.add_argument('--hold', default=''); p.add_argument('--exit', type=int, default=0)
p.add_argument('--seed', type=int); p.add_argument('--out')
a = p.parse_args()
if a.role == 'candidate' and a.exit:
    raise SystemExit(a.exit)
if a.role == 'candidate':
    try:  # a candidate that tries to leave a mark outside DENSEFEED_OUT
        open(a.hold + '-escaped', 'w').write('out of the sandbox')
    except OSError:
        pass
    time.sleep(a.sleep)
    end = time.time() + 120
    while a.hold and os.path.exists(a.hold) and time.time() < end:
        time.sleep(0.1)
np.save(os.path.join(a.out, 'y.npy'), 2 * np.random.default_rng(a.seed).standard_normal(a.n))
)";

std::string gate(const std::string& name, const std::string& extra) {
  return "gate: " + name + "\ndescription: y = 2 x\n"
         "reference:\n  command: [python3, \"{project}/harness.py\", --role, reference, --n, \"{case.n}\", --seed, \"{seed}\", "
         "--out, \"{out}\"]\n"
         "candidate:\n  command: [python3, \"{project}/harness.py\", --role, candidate, --n, \"{case.n}\", --sleep, \"{param.sleep}\", "
         "--hold, \"{project}/hold\", --exit, \"{param.exit}\", --seed, \"{seed}\", --out, \"{out}\"]\n"
         "params:\n  sleep: {type: number, default: 0}\n  exit: {type: integer, default: 0}\n"
         "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
         "profiles: {quick: {}, full: {}}\nfreezes: [harness.py]\n" + extra;
}

class SlurmE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cluster().why_not.empty()) GTEST_SKIP() << "Slurm could not start here: " << cluster().why_not;
    repo_ = dir_ / "project";
    std::filesystem::create_directories(repo_);
    ASSERT_EQ(testing::locked_project(
                  repo_,
                  {{"harness.py", kHarness},
                   {"gates/slow.yaml", gate("slow", "cases:\n  grid:\n    - {n: [1000]}\ntimeout_s: 60\n")},
                   {"gates/limit.yaml", gate("limit", "cases:\n  grid:\n    - {n: [1000]}\ntimeout_s: 300\n")},
                   {"gates/tight.yaml", gate("tight", "cases:\n  grid:\n    - {n: [1000]}\ntimeout_s: 2\n")},
                   // Two cases whose array runs one task at a time.
                   {"gates/pair.yaml", gate("pair", "cases:\n  grid:\n    - {n: [1000, 2000]}\ntimeout_s: 60\n"
                                                    "resources:\n  gate: {array_throttle: 1}\n")},
                   {"gates/gpu.yaml", gate("gpu", "cases:\n  grid:\n    - {n: [1000, 2000]}\ntimeout_s: 60\ngpus: 1\n")},
                   {"mr.py", testing::read_file(kRoot / "tests" / "support" / "multirank_harness.py")},
                   {"gates/mr.yaml",
                    "gate: mr\ndescription: a chunked scan over 2 ranks\nranks: 2\nrank_outputs: per_rank\n"
                    "reference:\n  command: [python3, \"{project}/mr.py\", --reference, --T, \"{case.T}\", --D, \"4\"]\n"
                    "candidate:\n  command: [python3, \"{project}/mr.py\", --T, \"{case.T}\", --D, \"4\", --bad, \"{param.bad}\"]\n"
                    "params:\n  bad: {type: integer, default: 1}\n"
                    "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}, partition: {axis: 0, parts: 2}}\n"
                    "  final: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
                    "cases:\n  grid:\n    - {T: [32]}\nprofiles: {quick: {}, full: {}}\ntimeout_s: 60\nfreezes: [mr.py]\n"}},
                  kExe, env()),
              "");
  }
  std::map<std::string, std::string> env() const {
    auto e = testing::project_env(dir_ / "home");
    e["SLURM_CONF"] = cluster().conf;
    e["DENSEFEED_SLURM_POLL_S"] = "0.1";
    e["DENSEFEED_SLURM_POLL_MAX_S"] = "0.5";
    e["DENSEFEED_HEARTBEAT_S"] = "1";
    return e;
  }
  testing::CliResult df(std::vector<std::string> args) const { return testing::run_cli(kExe, args, repo_, env()); }
  std::filesystem::path manifest(const std::string& g, double sleep, int exit = 0) {
    const auto m = dir_ / (g + std::to_string(counter_++) + ".yaml");
    testing::write_file(m, "experiment: " + g + "\nhypothesis: h\npredicted_effect: p\ngate: " + g +
                               "\ncandidate: {revision: WORKTREE, params: {sleep: " + std::to_string(sleep) + ", exit: " + std::to_string(exit) + "}}\n"
                               "base: {revision: WORKTREE}\n");
    return m;
  }
  // squeue's view of this user's jobs: id -> {name, state}.
  std::map<std::string, std::pair<std::string, std::string>> jobs() const {
    const auto r = testing::run_cli("/usr/bin/squeue", {"-h", "--states=all", "-o", "%i|%j|%T"}, repo_, env());
    std::map<std::string, std::pair<std::string, std::string>> out;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      const auto a = line.find('|'), b = line.rfind('|');
      if (a != std::string::npos && b > a) out[line.substr(0, a)] = {line.substr(a + 1, b - a - 1), line.substr(b + 1)};
    }
    return out;
  }
  // Waits up to `seconds` for a RUNNING job whose name ends with `suffix` and
  // is not in `besides`; its id, or "".
  std::string wait_running(const std::string& suffix, const std::set<std::string>& besides = {}, int seconds = 60) const {
    for (int i = 0; i < seconds * 10; ++i) {
      for (const auto& [id, job] : jobs()) {
        const auto& [name, state] = job;
        if (state == "RUNNING" && !besides.count(id) && name.size() >= suffix.size() &&
            name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
          return id;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "";
  }
  // Jobs of this test's ledger that have not ended.
  std::vector<std::string> live_jobs() const {
    std::vector<std::string> live;
    for (const auto& [id, job] : jobs()) {
      const auto& [name, state] = job;
      const bool ours = name.rfind("densefeed-", 0) == 0 && job_ids_.count(id) + names_seen(name) > 0;
      if (ours && (state == "RUNNING" || state == "PENDING" || state == "COMPLETING" || state == "CONFIGURING")) live.push_back(id + " " + name + " " + state);
    }
    return live;
  }
  // Names are this ledger's when they start with its prefix (the first
  // 'densefeed-HASH-' seen in this test's run folders).
  int names_seen(const std::string& name) const { return !prefix_.empty() && name.rfind(prefix_, 0) == 0; }
  void learn_prefix(const std::string& job_id) {
    job_ids_.insert(job_id);
    const auto j = jobs();
    // "densefeed-<8 hex of the ledger>-": up to the hyphen after the hash
    // (the hash itself may begin with 'e': a search for "-e" then stopped at
    // "densefeed-" and took every test's jobs for this one's, 1 run in 16).
    const std::string head = "densefeed-";
    if (auto it = j.find(job_id); it != j.end() && it->second.first.rfind(head, 0) == 0) {
      prefix_ = it->second.first.substr(0, it->second.first.find('-', head.size()) + 1);
    }
  }

  testing::TempDir dir_;
  std::filesystem::path repo_;
  int counter_ = 0;
  std::set<std::string> job_ids_;
  std::string prefix_;
};

// The case label -> verdict of a run report.
std::map<std::string, std::string> case_verdicts(const J& r) {
  std::map<std::string, std::string> v;
  for (const auto& c : r["stages"]["gate"]["cases"]) v[c["case"]] = c["verdict"];
  return v;
}

TEST_F(SlurmE2E, BothCpExamplesGiveTheLocalExecutorsVerdicts) {
  const auto run = [&](const std::string& example, const std::string& executor, bool bench) {
    std::vector<std::string> args = {"--project", kRoot.string(), "--trust-worktree", "run",
                                     (kRoot / "experiments" / example).string(), "--ledger", (dir_ / (executor + ".db")).string(),
                                     "--json", "--jobs", "2", "--executor", executor, "--seed", "20261201"};
    if (!bench) args.push_back("--no-bench");
    const auto r = testing::run_cli(kExe, args, dir_.path(), env());
    J doc = J::parse(r.out, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << r.out << r.err;
    return std::pair{r.exit_code, doc};
  };
  for (const auto& [example, code] : {std::pair{std::string("cp-affine-chain-tf32.yaml"), 1}, std::pair{std::string("cp-affine-chain-tf32x3.yaml"), 0}}) {
    const auto [local_code, local] = run(example, "local", false);
    const auto [slurm_code, slurm] = run(example, "slurm", code == 0);
    EXPECT_EQ(local_code, code) << example << local.dump(1).substr(0, 2000);
    EXPECT_EQ(slurm_code, code) << example << slurm.dump(1).substr(0, 2000);
    EXPECT_EQ(slurm["executor"], "slurm");
    EXPECT_EQ(local["executor"], "local");
    EXPECT_EQ(slurm["stages"]["gate"]["verdict"], local["stages"]["gate"]["verdict"]) << example;
    EXPECT_EQ(case_verdicts(slurm), case_verdicts(local)) << example;
    EXPECT_GT(case_verdicts(slurm).size(), 8u);
    // Every case ran as Slurm jobs; locally, here.
    for (const auto& c : slurm["stages"]["gate"]["cases"]) {
      EXPECT_EQ(c["candidate_placement"].get<std::string>().rfind("slurm job ", 0), 0u) << c.dump(1);
    }
    for (const auto& c : local["stages"]["gate"]["cases"]) EXPECT_EQ(c["candidate_placement"], "local");
    if (code == 0) {
      // The benchmark: one job held its node for every round of both arms.
      const auto& bench = slurm["stages"]["bench"];
      EXPECT_EQ(bench["status"], "measured") << bench.dump(1);
      const std::string placement = bench["placement"];
      EXPECT_EQ(placement.rfind("slurm job ", 0), 0u) << placement;
      EXPECT_EQ(placement.find(';'), std::string::npos) << "more than one job: " << placement;
      EXPECT_GE(bench["cases"][0]["rounds"].get<int>(), 4);
    }
  }
}

TEST_F(SlurmE2E, ACaseWhoseJobIsCancelledFromOutsideIsErrorAfterOneRetryNotRed) {
  J report;
  int code = -2;
  std::thread runner([&] {
    const auto r = df({"run", manifest("slow", 60).string(), "--json", "--executor", "slurm", "--no-bench"});
    code = r.exit_code;
    report = J::parse(r.out, nullptr, false);
  });
  const std::string first = wait_running("-gate-candidates");
  ASSERT_NE(first, "");
  learn_prefix(first);
  testing::run_cli("/usr/bin/scancel", {first}, repo_, env());
  const std::string retry = wait_running("-gate-candidates", {first});
  EXPECT_NE(retry, "");
  if (!retry.empty()) testing::run_cli("/usr/bin/scancel", {retry}, repo_, env());
  runner.join();
  EXPECT_EQ(code, 3) << report.dump(1);
  EXPECT_EQ(report["verdict"], "error");
  const auto& c = report["stages"]["gate"]["cases"][0];
  EXPECT_EQ(c["verdict"], "error") << c.dump(1);
  const std::string reason = c["reason"];
  EXPECT_NE(reason.find("Slurm job " + first + " ended CANCELLED"), std::string::npos) << reason;
  EXPECT_NE(reason.find("its retry: Slurm job " + retry + " ended CANCELLED"), std::string::npos) << reason;
  EXPECT_NE(reason.find("neither red nor green"), std::string::npos) << reason;
  EXPECT_EQ(report["record"]["stages"]["gate"]["failure"]["kind"], "infrastructure") << report["record"].dump(1);
}

TEST_F(SlurmE2E, AJobPastItsTimeLimitIsRedWithTimeoutNamed) {
  // The job's limit is lowered under it (as an administrator or a
  // preemption policy may): slurmctld ends it TIMEOUT at its next check of
  // limits (every 30 s) while the gate's own 300 s are far off.
  J report;
  int code = -2;
  std::thread runner([&] {
    const auto r = df({"run", manifest("limit", 600).string(), "--json", "--executor", "slurm", "--no-bench"});
    code = r.exit_code;
    report = J::parse(r.out, nullptr, false);
  });
  const std::string job = wait_running("-gate-candidates");
  ASSERT_NE(job, "");
  const auto u = testing::run_cli("/usr/bin/scontrol", {"update", "JobId=" + job, "TimeLimit=0"}, repo_, env());
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  runner.join();
  EXPECT_EQ(code, 1) << report.dump(1).substr(0, 2000);
  const auto& c = report["stages"]["gate"]["cases"][0];
  EXPECT_EQ(c["verdict"], "red") << c.dump(1);
  EXPECT_NE(c["reason"].get<std::string>().find("Slurm job " + job + " ended TIMEOUT"), std::string::npos) << c["reason"];
  EXPECT_EQ(report["record"]["stages"]["gate"]["failure"]["kind"], "timeout") << report["record"].dump(1);
  EXPECT_EQ(report["record"]["stages"]["gate"]["failure"]["who"], "candidate");
}

TEST_F(SlurmE2E, TheGatesTimeoutHoldsToTheSecondOnTheNode) {
  // timeout_s: 2, a candidate of 20 s: red as locally, not saved by Slurm's
  // whole minutes.
  const auto r = df({"run", manifest("tight", 20).string(), "--json", "--executor", "slurm", "--no-bench"});
  const J report = J::parse(r.out, nullptr, false);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const auto& c = report["stages"]["gate"]["cases"][0];
  EXPECT_EQ(c["verdict"], "red") << c.dump(1);
  EXPECT_NE(c["reason"].get<std::string>().find("the candidate timed out after 2 s"), std::string::npos) << c["reason"];
  EXPECT_LT(c["candidate_wall_s"].get<double>(), 10) << c.dump(1);
}

TEST_F(SlurmE2E, ALaunchFileDensefeedDidNotWriteIsNeverRun) {
  // Whoever can write a job's folder (it is in no launch's reach) still
  // cannot have slurm-serve run a command: the planted launch lacks the
  // HMAC of the submitting densefeed's key. The candidates' array runs one
  // task at a time: task 1's launch is replaced while task 0 runs; task 1
  // refuses it, and the case's retry (a new array) runs densefeed's own.
  J report;
  int code = -2;
  std::thread runner([&] {
    const auto r = df({"run", manifest("pair", 3).string(), "--json", "--executor", "slurm", "--no-bench"});
    code = r.exit_code;
    report = J::parse(r.out, nullptr, false);
  });
  const std::string job = wait_running("-gate-candidates");
  std::filesystem::path folder;
  if (!job.empty()) {
    const std::string array = job.substr(0, job.find('_'));
    for (const auto& e : std::filesystem::recursive_directory_iterator(repo_ / ".densefeed")) {
      if (e.path().filename() == "job-id" && testing::read_file(e.path()) == array + "\n") folder = e.path().parent_path();
    }
  }
  if (job.empty() || folder.empty()) {
    runner.join();
    FAIL() << "no running candidate task (" << job << ") or its folder";
  }
  const auto marker = dir_ / "planted-ran";
  J planted = J::parse(testing::read_file(folder / "launch-0000.json"));
  planted["trusted"] = true;
  planted["spec"] = {{"argv", {"/bin/sh", "-c", "touch " + marker.string()}}, {"exe_dirs", J::array()}, {"env", J::object()},
                     {"clear_env", false}, {"rlimit_as_bytes", 0}, {"rlimit_fsize_bytes", 0}, {"cwd", "/"},
                     {"stdout_path", "/dev/null"}, {"stderr_path", "/dev/null"}, {"timeout_ms", 10000}, {"kill_grace_ms", 100},
                     {"output_cap_bytes", 1000}};
  testing::write_file(folder / "launch-0001.json.hmac", "0000");
  testing::write_file(folder / "launch-0001.json", planted.dump());
  runner.join();
  EXPECT_EQ(code, 0) << report.dump(1).substr(0, 2000);
  for (const auto& c : report["stages"]["gate"]["cases"]) EXPECT_EQ(c["verdict"], "green") << c.dump(1);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "slurm-serve ran a launch file densefeed did not write";
  std::string err;
  for (const auto& e : std::filesystem::directory_iterator(folder)) {
    if (e.path().extension() == ".err") err += testing::read_file(e.path());
  }
  EXPECT_NE(err.find("refused: its HMAC does not match"), std::string::npos) << err;
}

TEST_F(SlurmE2E, CancelOfARunningRunIsRecordedCancelledWithNoJobLeft) {
  J report;
  std::thread runner([&] {
    const auto r = df({"run", manifest("slow", 120).string(), "--json", "--executor", "slurm", "--no-bench"});
    report = J::parse(r.out, nullptr, false);
  });
  const std::string job = wait_running("-gate-candidates");
  ASSERT_NE(job, "");
  learn_prefix(job);
  const auto c = df({"cancel", "1"});
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  // Its candidate's job among them (the reference's may still run too).
  const auto listed = c.out.find("scancelled its Slurm job(s) ");
  EXPECT_NE(listed, std::string::npos) << c.out;
  EXPECT_NE(c.out.find(job, listed), std::string::npos) << c.out;
  runner.join();
  std::vector<std::string> live = live_jobs();
  for (int i = 0; i < 100 && !live.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    live = live_jobs();
  }
  EXPECT_EQ(live, std::vector<std::string>{});
  const auto s = df({"status", "1", "--json"});
  EXPECT_EQ(J::parse(s.out)["state"], "cancelled") << s.out;
  // Not retried as an infrastructure failure: one job for the candidate.
  int candidate_jobs = 0;
  for (const auto& [id, j] : jobs()) candidate_jobs += names_seen(j.first) && j.first.find("gate-candidates") != std::string::npos;
  EXPECT_EQ(candidate_jobs, 1);
}

TEST_F(SlurmE2E, ACandidateThatExitsNonZeroIsRedWithItsJobsFailedState) {
  const auto r = df({"run", manifest("slow", 0.01, 3).string(), "--json", "--executor", "slurm", "--no-bench"});
  const J report = J::parse(r.out, nullptr, false);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const auto& c = report["stages"]["gate"]["cases"][0];
  EXPECT_EQ(c["verdict"], "red") << c.dump(1);
  const std::string reason = c["reason"];
  EXPECT_NE(reason.find("the candidate exited with code 3 (slurm job "), std::string::npos) << reason;
  EXPECT_NE(reason.find(" ended FAILED)"), std::string::npos) << reason;
  EXPECT_EQ(report["record"]["stages"]["gate"]["failure"]["kind"], "exit_code") << report["record"].dump(1);
}

TEST_F(SlurmE2E, TwoOneGpuCasesArePlacedOnDifferentFakeGpus) {
  // Each candidate sleeps 4 s, so both hold a GPU at once.
  const auto r = df({"run", manifest("gpu", 4).string(), "--json", "--executor", "slurm", "--no-bench"});
  const J report = J::parse(r.out, nullptr, false);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::set<std::string> gpus;
  for (const auto& c : report["stages"]["gate"]["cases"]) gpus.insert(c["candidate_gpu"].get<std::string>());
  EXPECT_EQ(gpus, (std::set<std::string>{"0", "1"})) << report["stages"]["gate"].dump(1);
  // Recorded in the ledger with the job that ran it.
  const auto q = testing::run_cli("/usr/bin/sqlite3", {(repo_ / ".densefeed" / "ledger.db").string(),
                                                      "SELECT output_capture FROM gate_cases ORDER BY id"}, repo_, env());
  std::set<std::string> recorded;
  std::istringstream in(q.out);
  for (std::string line; std::getline(in, line);) {
    const J capture = J::parse(line);
    recorded.insert(capture["candidate"]["gpu"].get<std::string>());
    EXPECT_EQ(capture["candidate"]["placement"].get<std::string>().rfind("slurm job ", 0), 0u) << line;
  }
  EXPECT_EQ(recorded, (std::set<std::string>{"0", "1"})) << q.out << q.err;
}

// Issue 20: a 2-rank case is one job asking --gres=gpu:2; its ranks split
// the job's GPUs, one each, and exchange over loopback in the node's sandbox.
TEST_F(SlurmE2E, MultiRankTwoRankCaseAsksGresGpu2AndIsGreen) {
  const auto m = dir_ / "mr.yaml";
  testing::write_file(m, "experiment: mr\nhypothesis: h\npredicted_effect: p\ngate: mr\n"
                         "candidate: {revision: WORKTREE, params: {bad: 1}}\nbase: {revision: WORKTREE, params: {bad: 7}}\n");
  const auto r = df({"run", m.string(), "--json", "--executor", "slurm", "--no-bench"});
  const J report = J::parse(r.out, nullptr, false);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const J& c = report["stages"]["gate"]["cases"][0];
  EXPECT_EQ(c["verdict"], "green");
  EXPECT_EQ(c["candidate_ranks"], 2);
  const std::string placement = c["candidate_placement"];
  ASSERT_EQ(placement.rfind("slurm job ", 0), 0u) << placement;
  const std::string job = placement.substr(10, placement.find(' ', 10) - 10);
  const auto show = testing::run_cli("/usr/bin/scontrol", {"show", "job", job, "-o"}, repo_, env());
  EXPECT_NE(show.out.find("gpu:2"), std::string::npos) << show.out << show.err;
  // Each rank saw one GPU of the job's two.
  std::set<std::string> gpus;
  const std::regex line(R"(MRLOG (\d+) (\S+) )");
  for (const auto& e : std::filesystem::recursive_directory_iterator(repo_ / ".densefeed")) {
    if (e.path().parent_path().filename() != "ranks" || e.path().extension() != ".log") continue;
    const std::string text = testing::read_file(e.path());
    for (std::sregex_iterator it(text.begin(), text.end(), line), end; it != end; ++it) gpus.insert((*it)[2]);
  }
  EXPECT_EQ(gpus, (std::set<std::string>{"0", "1"}));
}

TEST_F(SlurmE2E, TheCandidateIsSandboxedOnTheNodeAsLocally) {
  const auto r = df({"run", manifest("slow", 0.5).string(), "--json", "--executor", "slurm", "--no-bench"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(std::filesystem::exists(repo_ / "hold-escaped")) << "the candidate wrote into the project from its Slurm job";
  const auto q = testing::run_cli("/usr/bin/sqlite3", {(repo_ / ".densefeed" / "ledger.db").string(), "SELECT output_capture FROM gate_cases"},
                                  repo_, env());
  const J capture = J::parse(q.out);
  EXPECT_EQ(capture["candidate"]["containment"].get<std::string>().rfind("bwrap", 0), 0u) << q.out;
  // The same candidate with --no-sandbox does leave its mark: the check above can fail.
  const auto bare = df({"run", manifest("slow", 0.5).string(), "--json", "--executor", "slurm", "--no-bench", "--no-sandbox"});
  ASSERT_EQ(bare.exit_code, 0) << bare.out << bare.err;
  EXPECT_TRUE(std::filesystem::exists(repo_ / "hold-escaped"));
}

TEST_F(SlurmE2E, CancelOfARunningExperimentLeavesSqueueEmpty) {
  const auto submitted = df({"submit", manifest("slow", 120).string(), "--json"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  const auto id = std::to_string(J::parse(submitted.out)["experiment_id"].get<int>());
  std::thread worker([&] { df({"worker", "--once", "--executor", "slurm"}); });
  const std::string job = wait_running("-gate-candidates");
  ASSERT_NE(job, "");
  learn_prefix(job);
  const auto c = df({"cancel", id, "--json"});
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  worker.join();
  std::vector<std::string> live = live_jobs();
  for (int i = 0; i < 100 && !live.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    live = live_jobs();
  }
  EXPECT_EQ(live, std::vector<std::string>{});
  const auto s = df({"status", id, "--json"});
  EXPECT_EQ(J::parse(s.out)["state"], "cancelled") << s.out;
}

TEST_F(SlurmE2E, AWorkerKilledOutrightLeavesAJobTheNextWorkerStartCancels) {
  testing::write_file(repo_ / "hold", "");
  const auto submitted = df({"submit", manifest("slow", 0.01).string(), "--json"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  const auto id = std::to_string(J::parse(submitted.out)["experiment_id"].get<int>());
  const std::string ledger = (repo_ / ".densefeed" / "ledger.db").string();
  std::thread first([&] { df({"worker", "--executor", "slurm", "--ledger", ledger}); });
  const std::string job = wait_running("-gate-candidates");
  ASSERT_NE(job, "");
  learn_prefix(job);
  // SIGKILL, the run first: nothing of densefeed is left to cancel its job.
  // Only this test's processes, named by its ledger: a bare "worker-run 1"
  // also matched another test's worker (CI of this stop: a service's
  // experiment 1 in ServiceE2E.*, run beside this test, was killed).
  for (int pid : testing::processes_mentioning("worker-run " + id + " --ledger " + ledger)) ::kill(pid, SIGKILL);
  for (int pid : testing::processes_mentioning(kExe + " worker --executor slurm --ledger " + ledger)) ::kill(pid, SIGKILL);
  first.join();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(jobs()[job].second, "RUNNING") << "the killed worker's job should still run";
  std::thread second([&] { df({"worker", "--once", "--executor", "slurm"}); });
  std::string state;
  for (int i = 0; i < 300; ++i) {
    state = jobs()[job].second;
    // A scancelled job passes through COMPLETING (its processes signalled,
    // not yet reaped) before CANCELLED; it stays visible MinJobAge = 300 s.
    if (state != "RUNNING" && state != "COMPLETING") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(state.rfind("CANCELLED", 0), 0u) << state;
  // The experiment ran again, to its end.
  std::filesystem::remove(repo_ / "hold");
  second.join();
  const auto s = df({"status", id, "--json"});
  const J st = J::parse(s.out);
  EXPECT_EQ(st["state"], "finished") << s.out;
  EXPECT_EQ(st["verdict"], "green") << s.out;
  EXPECT_EQ(live_jobs(), std::vector<std::string>{});
}

}  // namespace
}  // namespace densefeed
