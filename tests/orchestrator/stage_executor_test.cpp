// The gate and bench stages against a scripted executor (executor.h): no
// process starts; each launch is answered by a script from what the stage
// asked for (its argv and protocol environment), the way ninja's
// build_test.cc drives its builder with a fake CommandRunner. What is tested
// is the stage's own logic: which launches it makes, how it reads what they
// wrote and how it types what went wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_runner.h"
#include "executor.h"
#include "experiment_runner.h"
#include "gate_lock.h"
#include "gate_runner.h"
#include "gate_spec.h"
#include "gate_store.h"
#include "harness_command.h"
#include "harness_protocol.h"
#include "input_sets.h"
#include "npy_writer.h"
#include "project.h"
#include "test_support.h"

namespace densefeed {
namespace {

// Launches answered by `script`; every request and launch is kept.
class ScriptedExecutor : public Executor {
 public:
  using Script = std::function<LaunchResult(const Launch&)>;
  explicit ScriptedExecutor(Script script) : script_(std::move(script)) {}

  std::unique_ptr<Allocation> allocate(const AllocationRequest& request) override {
    std::lock_guard<std::mutex> lock(mutex_);
    requests.push_back(request);
    return std::make_unique<ScriptedAllocation>(*this);
  }
  bool assigns_gpus() const override { return false; }
  int concurrency(int requested, std::size_t) const override { return requested; }
  std::string name() const override { return "scripted"; }

  std::vector<AllocationRequest> requests;
  std::vector<Launch> launches;

 private:
  class ScriptedAllocation : public Allocation {
   public:
    explicit ScriptedAllocation(ScriptedExecutor& e) : e_(e) {}
    LaunchResult run(const Launch& launch) override {
      {
        std::lock_guard<std::mutex> lock(e_.mutex_);
        e_.launches.push_back(launch);
      }
      return e_.script_(launch);
    }

   private:
    ScriptedExecutor& e_;
  };

  Script script_;
  std::mutex mutex_;
};

// A launch that exited `code` after `wall_s` seconds, placed where the
// scheduler would say.
LaunchResult exited(int code, double wall_s = 0.01) {
  LaunchResult r;
  r.result.process.started = true;
  r.result.process.exit_code = code;
  r.result.process.wall_s = wall_s;
  r.result.sandboxed = true;
  r.result.containment = "scripted";
  r.placement = Placement{"scripted", "7", "node7"};
  return r;
}

const char* kGate = R"(gate: g
reference: {command: [ref, "{case.n}", "{out}"]}
candidate: {command: [cand, "{case.n}", "{out}"]}
outputs:
  y: {dtype: float32, tolerance: {rel_l2: 1.0e-5}}
cases:
  grid:
    - {n: [1, 2, 4]}
profiles: {quick: {n: [1]}, full: {}}
freezes: [frozen.txt]
bench:
  cases: [{n: 4}]
  warmup: 1
  iters: 5
)";

class StageExecutor : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_project(dir_.path());
    testing::write_file(dir_ / "frozen.txt", "frozen\n");
    testing::write_file(dir_ / "gates" / "g.yaml", kGate);
    gate_ = load_gate(worktree_store(load_project(dir_.path())), "g");
  }

  // The case's n from the protocol's DENSEFEED_CASE.
  static int case_n(const Launch& l) { return nlohmann::json::parse(l.untrusted.env.at("DENSEFEED_CASE")).at("n").get<int>(); }
  static bool is_reference(const Launch& l) { return l.untrusted.argv.at(0) == "ref"; }
  // y = [1, 2, ..., n] (+ `error` on the last element), as a harness writes it.
  static void write_y(const Launch& l, float error = 0) {
    const std::filesystem::path out = l.untrusted.env.at("DENSEFEED_OUT");
    std::filesystem::create_directories(out);
    std::vector<float> y;
    for (int i = 1; i <= case_n(l); ++i) y.push_back(static_cast<float>(i));
    y.back() += error;
    const std::vector<std::size_t> shape = {y.size()};
    write_npy(out / "y.npy", y, shape);
  }

  GateResult gate(ScriptedExecutor& ex, std::uint64_t seed = 11) {
    GateRunOptions o;
    o.work_dir = dir_ / "runs";
    o.seed = seed;
    o.jobs = 2;
    o.executor = &ex;
    return run_gate(gate_, gate_.profile_cases("full"), nlohmann::ordered_json::object(), o);
  }

  testing::TempDir dir_;
  GateSpec gate_;
};

TEST_F(StageExecutor, TheGateAsksEachCaseOfBothArmsInTheProtocolsWords) {
  ScriptedExecutor ex([](const Launch& l) {
    write_y(l);
    return exited(0);
  });
  const auto r = gate(ex, 11);
  EXPECT_EQ(r.verdict, Verdict::green) << r.reason;
  ASSERT_EQ(r.cases.size(), 3u);
  ASSERT_EQ(ex.launches.size(), 6u);  // a reference and a candidate per case
  std::set<std::pair<bool, int>> asked;
  for (const auto& l : ex.launches) {
    EXPECT_EQ(l.untrusted.env.at("DENSEFEED_MODE"), "gate");
    EXPECT_EQ(l.untrusted.env.at("DENSEFEED_SEED"), "11");
    // {out} in the argv and DENSEFEED_OUT name the same folder.
    EXPECT_EQ(l.untrusted.argv.at(2), l.untrusted.env.at("DENSEFEED_OUT"));
    EXPECT_EQ(l.untrusted.argv.at(1), std::to_string(case_n(l)));
    asked.insert({is_reference(l), case_n(l)});
  }
  EXPECT_EQ(asked.size(), 6u);
  for (const auto& c : r.cases) {
    EXPECT_EQ(c.verdict, Verdict::green) << c.reason;
    EXPECT_EQ(to_string(c.candidate_placement), "scripted job 7 on node7");
    EXPECT_EQ(c.candidate_containment, "scripted");
    ASSERT_EQ(c.outputs.size(), 1u);
    EXPECT_EQ(c.outputs[0].comparison.verdict, Verdict::green);
  }
  for (const auto& q : ex.requests) EXPECT_EQ(q.launches, 1) << q.name;  // each launch an allocation of its own
}

TEST_F(StageExecutor, TheGateTypesEachWayACaseFails) {
  ScriptedExecutor ex([](const Launch& l) {
    if (is_reference(l)) {
      write_y(l);
      return exited(0);
    }
    switch (case_n(l)) {
      case 1: {  // the machinery, not the candidate: NODE_FAIL after its retry
        LaunchResult r = exited(0);
        r.infrastructure = "scripted job 41 ended NODE_FAIL; its retry, job 42, ended NODE_FAIL";
        return r;
      }
      case 2: return exited(7);  // exits 7, writes nothing
      default: write_y(l, 0.5f); return exited(0);  // wrong in its last element
    }
  });
  const auto r = gate(ex);
  EXPECT_NE(r.verdict, Verdict::green);
  ASSERT_EQ(r.cases.size(), 3u);
  std::map<int, const CaseResult*> by_n;
  for (const auto& c : r.cases) by_n[c.gate_case.values.at("n").get<int>()] = &c;
  EXPECT_EQ(by_n[1]->verdict, Verdict::error) << by_n[1]->reason;
  EXPECT_EQ(by_n[1]->failure.kind, FailureKind::infrastructure);
  EXPECT_EQ(by_n[2]->verdict, Verdict::red);
  EXPECT_EQ(by_n[2]->failure.kind, FailureKind::exit_code);
  EXPECT_EQ(by_n[2]->failure.who, FailureWho::candidate);
  EXPECT_EQ(by_n[2]->failure.exit_code, 7);
  EXPECT_EQ(by_n[4]->verdict, Verdict::red);
  EXPECT_EQ(by_n[4]->failure.kind, FailureKind::tolerance);
  EXPECT_EQ(by_n[4]->failure.output, "y");
  EXPECT_EQ(by_n[4]->failure.metric, "rel_l2");
}

TEST_F(StageExecutor, AReferenceThatFailsIsTheGatesErrorNeverTheCandidatesRed) {
  ScriptedExecutor ex([](const Launch& l) {
    if (is_reference(l)) return exited(3);
    write_y(l);
    return exited(0);
  });
  const auto r = gate(ex);
  ASSERT_EQ(r.cases.size(), 3u);
  for (const auto& c : r.cases) {
    EXPECT_EQ(c.verdict, Verdict::error) << c.reason;
    EXPECT_EQ(c.failure.who, FailureWho::reference);
  }
}

// y = [1, 2, ..., n] for the launch's case (DENSEFEED_CASE) in its
// DENSEFEED_OUT, as the fixture's write_y writes it: for the scripts below.
void write_case_y(const Launch& l) {
  const std::filesystem::path out = l.untrusted.env.at("DENSEFEED_OUT");
  std::filesystem::create_directories(out);
  const int n = nlohmann::json::parse(l.untrusted.env.at("DENSEFEED_CASE")).at("n").get<int>();
  std::vector<float> y;
  for (int i = 1; i <= n; ++i) y.push_back(static_cast<float>(i));
  const std::vector<std::size_t> shape = {y.size()};
  write_npy(out / "y.npy", y, shape);
}

// Bench: each arm writes samples.json with DENSEFEED_ITERS samples of
// `ms` each (a small round-dependent wobble), and its process's wall time is
// what those iterations (warm-up included) and a fixed start-up would take.
struct BenchScript {
  double base_ms = 10, candidate_ms = 5;
  double candidate_wall_ms = 0;  // > 0: the candidate's wall per iteration, whatever its samples claim
  bool base_infrastructure = false;
  int candidate_fails_at = 0;  // > 0: the candidate's launch of this number (1, 2, ...) exits 7, writing nothing
  bool write_outputs = false;  // each arm also writes y.npy, as a gated bench case's candidate must
  int round = 0;
  int candidate_launches = 0;

  LaunchResult operator()(const Launch& l) {
    const bool base = l.untrusted.env.at("DENSEFEED_OUT").find("base") != std::string::npos;
    const int warmup = std::stoi(l.untrusted.env.at("DENSEFEED_WARMUP"));
    const int iters = std::stoi(l.untrusted.env.at("DENSEFEED_ITERS"));
    if (base && base_infrastructure) {
      LaunchResult r = exited(0);
      r.infrastructure = "scripted job 9 ended PREEMPTED; its retry, job 10, ended PREEMPTED";
      return r;
    }
    if (!base && ++candidate_launches == candidate_fails_at) return exited(7);
    if (write_outputs) write_case_y(l);
    const double ms = base ? base_ms : candidate_ms;
    nlohmann::json samples = nlohmann::json::array();
    ++round;
    for (int i = 0; i < iters; ++i) samples.push_back(ms * (1 + 0.002 * ((round * 7 + i * 3) % 5)));
    const std::filesystem::path out = l.untrusted.env.at("DENSEFEED_OUT");
    std::filesystem::create_directories(out);
    testing::write_file(out / "samples.json", nlohmann::json{{"unit", "ms"}, {"samples", samples}}.dump());
    const double per_iter = !base && candidate_wall_ms > 0 ? candidate_wall_ms : ms;
    return exited(0, 0.2 + (warmup + iters) * per_iter / 1e3);
  }
};

BenchResult bench(const GateSpec& gate, const std::filesystem::path& dir, ScriptedExecutor& ex) {
  BenchOptions o;
  o.work_dir = dir / "bench";
  o.seed = 5;
  o.fixed_rounds = 9;
  o.executor = &ex;
  return run_bench(gate, nlohmann::ordered_json::object(), nlohmann::ordered_json::object(), o);
}

TEST_F(StageExecutor, TheBenchHoldsOneAllocationForBothArmsInterleavedAndDecides) {
  BenchScript script;
  ScriptedExecutor ex(std::ref(script));
  const auto r = bench(gate_, dir_.path(), ex);
  ASSERT_EQ(r.verdict, Verdict::green) << r.reason;
  ASSERT_EQ(ex.requests.size(), 1u);
  EXPECT_EQ(ex.requests[0].name, "bench");
  ASSERT_EQ(r.cases.size(), 1u);
  const auto& c = r.cases[0];
  EXPECT_EQ(c.base.size(), 9u);
  EXPECT_EQ(c.candidate.size(), 9u);
  EXPECT_EQ(ex.launches.size(), 20u);  // each arm's warm-up call, then 9 paired rounds
  // Rounds alternate the iteration count (iters, then a long round of 2 to
  // 16 x iters: timing_checks.h long_round_factor, which the 0.2 s start-up
  // of this harness against its 50 ms of iterations raises) for the wall fit.
  std::set<int> iters;
  for (const auto& l : ex.launches) {
    EXPECT_EQ(l.untrusted.env.at("DENSEFEED_MODE"), "bench");
    iters.insert(std::stoi(l.untrusted.env.at("DENSEFEED_ITERS")));
  }
  ASSERT_EQ(iters.size(), 2u);
  EXPECT_EQ(*iters.begin(), 5);
  EXPECT_EQ(*iters.rbegin() % 5, 0);
  EXPECT_GT(*iters.rbegin(), 10) << "a start-up four times the short round's work asks for more than twice the iterations";
  EXPECT_LE(*iters.rbegin(), 80);
  EXPECT_EQ(c.decision.verdict, BenchVerdict::faster) << c.decision.reason;
  EXPECT_NEAR(c.decision.speedup, 2.0, 0.05);
  EXPECT_TRUE(c.flags.empty()) << c.flags.front().reason;
  EXPECT_TRUE(guards_of(c.decision).empty());
  EXPECT_EQ(r.placement, "scripted job 7 on node7");
}

// The candidate's samples say 5 ms an iteration; the wall time densefeed
// took of its process says 10 ms: a claim of time it did not spend.
TEST_F(StageExecutor, SamplesFasterThanTheCandidatesOwnWallTimeAreFlaggedNotCounted) {
  BenchScript script;
  script.candidate_wall_ms = 10;
  ScriptedExecutor ex(std::ref(script));
  const auto r = bench(gate_, dir_.path(), ex);
  EXPECT_EQ(r.verdict, Verdict::red) << r.reason;
  EXPECT_EQ(r.failure.kind, FailureKind::implausible_timing) << r.reason;
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_NE(r.cases[0].decision.verdict, BenchVerdict::faster) << r.cases[0].decision.reason;
  EXPECT_FALSE(r.cases[0].flags.empty());
}

TEST_F(StageExecutor, AnInfrastructureFailureOfTheBaseIsAnErrorWithNoCase) {
  BenchScript script;
  script.base_infrastructure = true;
  ScriptedExecutor ex(std::ref(script));
  const auto r = bench(gate_, dir_.path(), ex);
  EXPECT_EQ(r.verdict, Verdict::error) << r.reason;
  EXPECT_EQ(r.failure.kind, FailureKind::infrastructure);
  EXPECT_NE(r.reason.find("PREEMPTED"), std::string::npos) << r.reason;
  EXPECT_TRUE(r.cases.empty());
}

// A candidate that fails in its fourth launch (after its warm-up call, in
// round 2, the candidate first): the stage is red at once, its failure
// typed as the process ended, the case not kept, and nothing after that
// launch runs.
TEST_F(StageExecutor, ACandidateRoundThatFailsMidwayEndsTheBenchWithItsFailureTyped) {
  BenchScript script;
  script.candidate_fails_at = 4;
  ScriptedExecutor ex(std::ref(script));
  const auto r = bench(gate_, dir_.path(), ex);
  EXPECT_EQ(r.verdict, Verdict::red) << r.reason;
  EXPECT_EQ(r.failure.kind, FailureKind::exit_code) << r.reason;
  EXPECT_EQ(r.failure.who, FailureWho::candidate);
  EXPECT_EQ(r.failure.exit_code, 7);
  EXPECT_EQ(r.reason.rfind("case n=4: the candidate arm in bench mode: it ", 0), 0u) << r.reason;
  EXPECT_TRUE(r.cases.empty());
  // Both warm-ups, rounds 0 (base, candidate) and 1 (candidate, base), then round 2's candidate.
  ASSERT_EQ(ex.launches.size(), 7u);
  EXPECT_NE(ex.launches.back().untrusted.env.at("DENSEFEED_OUT").find("bench-00-round-02-candidate"), std::string::npos);
  EXPECT_EQ(r.placement, "scripted job 7 on node7");
}

// Where a scheduler ran each process reaches the case as a value: the
// node and the job, never words to be parsed back; the words are
// placement.h's, in a failing case's reason too.
TEST_F(StageExecutor, TheSchedulersPlacementReachesEachCaseTyped) {
  ScriptedExecutor ex([](const Launch& l) {
    LaunchResult r = exited(0);
    const int n = case_n(l);
    if (is_reference(l)) {
      write_y(l);
      r.placement = Placement{"slurm", std::to_string(100 + n), "ref-node"};
      return r;
    }
    r.placement = Placement{"slurm", std::to_string(200 + n), fmt::format("node{}", n)};
    if (n == 2) {
      r = exited(7);
      r.placement = Placement{"slurm", "202", "node2"};
      r.scheduler_state = "FAILED";
      return r;
    }
    write_y(l);
    return r;
  });
  const auto r = gate(ex);
  ASSERT_EQ(r.cases.size(), 3u);
  for (const auto& c : r.cases) {
    const int n = c.gate_case.values.at("n").get<int>();
    EXPECT_EQ(c.candidate_placement, (Placement{"slurm", std::to_string(200 + n), fmt::format("node{}", n)}));
    EXPECT_EQ(c.candidate_placement.node, fmt::format("node{}", n));
    EXPECT_EQ(c.reference_placement.node, "ref-node");
    EXPECT_EQ(c.reference_placement.job, std::to_string(100 + n));
    EXPECT_TRUE(ran_elsewhere(c.candidate_placement));
    if (n == 2) {
      EXPECT_EQ(c.verdict, Verdict::red);
      EXPECT_NE(c.reason.find("(slurm job 202 on node2 ended FAILED)"), std::string::npos) << c.reason;
    } else {
      EXPECT_EQ(c.verdict, Verdict::green) << c.reason;
      EXPECT_EQ(to_string(c.candidate_placement), fmt::format("slurm job {} on node{}", 200 + n, n));
    }
  }
  EXPECT_EQ(to_string(Placement{"slurm", "9", ""}), "slurm job 9");
  EXPECT_EQ(to_string(local_placement()), "local");
  EXPECT_FALSE(ran_elsewhere(local_placement()));
  EXPECT_EQ(to_string(Placement{}), "");
}

// A whole experiment through run_experiment with the executor passed in
// RunOptions: every job of the run (the gate's references and candidates,
// the bench's one allocation) is the given executor's, none this
// machine's, and the outcome names it for the printers.
TEST_F(StageExecutor, AnExperimentRunsEveryJobOnTheExecutorItIsGiven) {
  const auto project_dir = dir_ / "project";
  testing::write_project(project_dir);
  testing::write_file(project_dir / "frozen.txt", "frozen\n");
  std::string gate_text = kGate;
  gate_text.replace(gate_text.find("outputs:"), 0, "params:\n  mode: {type: string, enum: [fast, slow], default: slow}\n");
  // The reference is trusted: its program must be found on trusted ground
  // (trusted_paths.h), though the script runs in its place.
  gate_text.replace(gate_text.find("[ref,"), 5, "[\"true\",");
  testing::write_file(project_dir / "gates" / "g.yaml", gate_text);
  testing::write_file(project_dir / ".gitignore", ".densefeed/\n");
  const Project project = load_project(project_dir);
  write_lock(worktree_store(project), {});
  ASSERT_EQ(testing::git_init_main(project_dir), "");
  testing::write_file(project_dir / "e.yaml",
                      "experiment: e\nhypothesis: h\npredicted_effect: p\ngate: g\n"
                      "candidate: {revision: WORKTREE, params: {mode: fast}}\nbase: {revision: WORKTREE, params: {mode: slow}}\n");

  BenchScript bench_script;
  bench_script.write_outputs = true;
  std::mutex script_mutex;
  auto ex = std::make_shared<ScriptedExecutor>([&](const Launch& l) {
    std::lock_guard<std::mutex> lock(script_mutex);
    if (l.untrusted.env.at("DENSEFEED_MODE") == "bench") return bench_script(l);
    write_case_y(l);
    return exited(0);
  });
  RunOptions options;
  options.project = project;
  options.store = worktree_store(project);
  options.workspace = Workspace{project.ledger};
  options.profile = "quick";
  options.seed = 3;
  options.sandbox = false;
  options.executor = ex;
  const ExperimentOutcome out = run_experiment(project_dir / "e.yaml", options);
  EXPECT_EQ(out.gate_result.verdict, Verdict::green) << out.gate_result.reason;
  ASSERT_TRUE(out.bench.has_value()) << out.bench_skipped;
  EXPECT_EQ(out.bench->verdict, Verdict::green) << out.bench->reason;
  EXPECT_EQ(out.executor, "scripted");
  // The quick profile's case (n=1) and the bench case (n=4, gated in the
  // same run): a reference and a candidate each, an allocation apiece;
  // then the bench's one allocation for every round of both arms.
  ASSERT_EQ(ex->requests.size(), 5u);
  EXPECT_EQ(ex->requests.back().name, "bench");
  std::size_t gate_launches = 0, bench_launches = 0;
  for (const auto& l : ex->launches) {
    (l.untrusted.env.at("DENSEFEED_MODE") == "gate" ? gate_launches : bench_launches) += 1;
  }
  EXPECT_EQ(gate_launches, 4u);
  EXPECT_EQ(bench_launches, 2 * out.bench->cases.at(0).base.size() + 2);  // and each arm's warm-up call
  for (const auto& c : out.gate_result.cases) EXPECT_EQ(to_string(c.candidate_placement), "scripted job 7 on node7");
}


// The one builder of harness commands (harness_command.h): what each
// stage's call becomes, field by field, and what the gate's and the bench's
// launches carry through the scripted executor.
class HarnessCommand : public StageExecutor {
 protected:
  void SetUp() override {
    StageExecutor::SetUp();
    arm_.label = "the arm";
    arm_.project = "/p";
    arm_.gate_dir = "/g";
    arm_.python = "/usr/bin/python3";
  }

  // A call of `mode` from /r writing /r/out, as a stage makes it.
  HarnessCall call(ProtocolMode mode) const {
    HarnessCall c;
    c.mode = mode;
    c.arm = &arm_;
    c.command = {"python3", "h.py", "{case.n}", "{param.p}", "{seed}", "{out}", "{project}", "{gate_dir}"};
    c.values = {nlohmann::ordered_json{{"n", 2}, {"m", 3}}, nlohmann::ordered_json{{"p", "x"}}, 11, "/r/out"};
    c.case_values = nlohmann::ordered_json{{"n", 2}, {"m", 3}};
    c.dir = "/r";
    c.out = "/r/out";
    c.timeout = harness_timeout(2.5);
    c.limits.memory_bytes = 1 << 20;
    c.limits.processes = 7;
    c.sandbox = false;
    c.readable = {"/rev"};
    return c;
  }

  // Every field but argv and env, as the call says.
  static void expect_folders_and_limits(const UntrustedCommand& u, const HarnessCall& c, const std::filesystem::path& dir) {
    EXPECT_EQ(u.arm, c.arm);
    EXPECT_EQ(u.cwd, dir);
    EXPECT_EQ(u.writable, std::vector<std::filesystem::path>{c.out});
    EXPECT_EQ(u.readable, c.readable);
    EXPECT_EQ(u.stdout_path, dir / "stdout.log");
    EXPECT_EQ(u.stderr_path, dir / "stderr.log");
    EXPECT_EQ(u.timeout, c.timeout);
    EXPECT_EQ(u.limits.memory_bytes, c.limits.memory_bytes);
    EXPECT_EQ(u.limits.processes, c.limits.processes);
    EXPECT_EQ(u.limits.file_size_bytes, c.limits.file_size_bytes);
    EXPECT_EQ(u.limits.tmp_bytes, c.limits.tmp_bytes);
    EXPECT_EQ(u.sandbox, c.sandbox);
    EXPECT_EQ(u.rank_env, c.rank_env);
    EXPECT_EQ(u.clock_fd, c.clock_fd);
  }

  using Env = std::map<std::string, std::string>;
  const std::vector<std::string> rendered_ = {"/usr/bin/python3", "h.py", "2", "x", "11", "/r/out", "/p", "/g"};
  ArmContext arm_;
};

TEST_F(HarnessCommand, AGateCallIsTheGateModesCommand) {
  HarnessCall c = call(ProtocolMode::gate);
  c.gpu = "1,2";
  const UntrustedCommand u = harness_command(c);
  EXPECT_EQ(u.argv, rendered_);
  EXPECT_EQ(u.env, (Env{{"CUDA_VISIBLE_DEVICES", "1,2"},
                        {"DENSEFEED_CASE", R"({"n":2,"m":3})"},
                        {"DENSEFEED_MODE", "gate"},
                        {"DENSEFEED_OUT", "/r/out"},
                        {"DENSEFEED_SEED", "11"}}));
  expect_folders_and_limits(u, c, "/r");
  EXPECT_EQ(u.timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(u.limits.memory_bytes, 1u << 20);
  EXPECT_FALSE(u.sandbox);
  EXPECT_EQ(u.readable, std::vector<std::filesystem::path>{"/rev"});
  EXPECT_EQ(u.clock_fd, -1);
  EXPECT_TRUE(u.rank_env.empty());
}

// A reference is told only the keys it is keyed by, whatever its argv
// renders; a multi-rank candidate's ranks add their own variables; a
// one-rank case of a ranked gate gets rank 0 of 1 beside the protocol's.
TEST_F(HarnessCommand, AGateCallTellsItsOwnCaseAndCarriesItsRanks) {
  HarnessCall c = call(ProtocolMode::gate);
  c.case_values = nlohmann::ordered_json{{"n", 2}};
  c.rank_env = {{{"DENSEFEED_OUT", "/r/out/rank-0"}, {"CUDA_VISIBLE_DEVICES", "0"}}, {{"DENSEFEED_OUT", "/r/out/rank-1"}}};
  c.extra_env = {{"RANK", "0"}, {"DENSEFEED_MODE", "not the protocol's"}};
  const UntrustedCommand u = harness_command(c);
  EXPECT_EQ(u.argv, rendered_);
  EXPECT_EQ(u.env, (Env{{"DENSEFEED_CASE", R"({"n":2})"},
                        {"DENSEFEED_MODE", "gate"},
                        {"DENSEFEED_OUT", "/r/out"},
                        {"DENSEFEED_SEED", "11"},
                        {"RANK", "0"}}));
  ASSERT_EQ(u.rank_env.size(), 2u);
  EXPECT_EQ(u.rank_env[0].at("DENSEFEED_OUT"), "/r/out/rank-0");
  EXPECT_EQ(u.rank_env[1].at("DENSEFEED_OUT"), "/r/out/rank-1");
  expect_folders_and_limits(u, c, "/r");
}

TEST_F(HarnessCommand, ABenchCallIsTheBenchModesCommandWithItsDriversAdditions) {
  HarnessCall c = call(ProtocolMode::bench);
  c.warmup = 2;
  c.iters = 10;
  c.gpu = "4";
  c.input_seeds = std::vector<std::uint64_t>{7, 8, 9};
  c.clock_fd = 41;
  c.extra_env = {{"DENSEFEED_KERNEL", R"({"library":"k.so","symbol":"f"})"}, {"DENSEFEED_PARAMS", R"({"p":"x"})"}};
  const UntrustedCommand u = harness_command(c);
  EXPECT_EQ(u.argv, rendered_);
  EXPECT_EQ(u.env, (Env{{"CUDA_VISIBLE_DEVICES", "4"},
                        {"DENSEFEED_CASE", R"({"n":2,"m":3})"},
                        {"DENSEFEED_CLOCK_FD", "3"},
                        {"DENSEFEED_INPUT_SEEDS", input_seeds_value({7, 8, 9})},
                        {"DENSEFEED_ITERS", "10"},
                        {"DENSEFEED_KERNEL", R"({"library":"k.so","symbol":"f"})"},
                        {"DENSEFEED_MODE", "bench"},
                        {"DENSEFEED_OUT", "/r/out"},
                        {"DENSEFEED_PARAMS", R"({"p":"x"})"},
                        {"DENSEFEED_SEED", "11"},
                        {"DENSEFEED_WARMUP", "2"}}));
  EXPECT_EQ(u.clock_fd, 41);
  expect_folders_and_limits(u, c, "/r");
  // An arm's own harness: no driver's variables, no clock.
  HarnessCall own = call(ProtocolMode::bench);
  own.warmup = 1;
  own.iters = 5;
  EXPECT_EQ(harness_command(own).env, (Env{{"DENSEFEED_CASE", R"({"n":2,"m":3})"},
                                           {"DENSEFEED_ITERS", "5"},
                                           {"DENSEFEED_MODE", "bench"},
                                           {"DENSEFEED_OUT", "/r/out"},
                                           {"DENSEFEED_SEED", "11"},
                                           {"DENSEFEED_WARMUP", "1"}}));
  EXPECT_EQ(harness_command(own).clock_fd, -1);
}

TEST_F(HarnessCommand, TraceAndAcceptanceCallsHaveNoCase) {
  for (ProtocolMode mode : {ProtocolMode::trace, ProtocolMode::acceptance}) {
    HarnessCall c = call(mode);
    c.command = {"tool", "{param.p}", "{out}", "{seed}"};
    c.values.case_values = nlohmann::ordered_json::object();
    c.case_values = nlohmann::ordered_json::object();
    c.timeout = harness_timeout(12.5);
    if (mode == ProtocolMode::acceptance) c.readable.clear();
    const UntrustedCommand u = harness_command(c);
    EXPECT_EQ(u.argv, (std::vector<std::string>{"tool", "x", "/r/out", "11"}));
    EXPECT_EQ(u.env, (Env{{"DENSEFEED_CASE", "{}"},
                          {"DENSEFEED_MODE", mode == ProtocolMode::trace ? "trace" : "acceptance"},
                          {"DENSEFEED_OUT", "/r/out"},
                          {"DENSEFEED_SEED", "11"}}));
    EXPECT_EQ(u.timeout, std::chrono::milliseconds(12500));
    expect_folders_and_limits(u, c, "/r");
  }
}

// A session is told its mode only; it writes its exchange folder, logs in
// its own folder, lives for the run; its argv is the call's.
TEST_F(HarnessCommand, ASessionCallIsToldItsModeOnly) {
  for (ProtocolMode mode : {ProtocolMode::gate, ProtocolMode::bench}) {
    HarnessCall round = call(mode);
    round.warmup = 1;
    round.iters = 5;
    round.gpu = "3";
    const HarnessCall c = session_call(round, "/s");
    const UntrustedCommand u = harness_command(c);
    EXPECT_EQ(u.argv, rendered_);
    EXPECT_EQ(u.env, (Env{{"CUDA_VISIBLE_DEVICES", "3"}, {"DENSEFEED_MODE", to_string(mode)}}));
    EXPECT_EQ(u.writable, std::vector<std::filesystem::path>{"/s/exchange"});
    EXPECT_EQ(u.timeout, std::chrono::hours(24 * 7));
    expect_folders_and_limits(u, c, "/s");
  }
}

// What the gate's and the bench's launches carry, as the executor got
// them: exactly the protocol's environment, their run folder, their logs,
// the gate's timeout, and the gate's limits for what is not trusted.
TEST_F(HarnessCommand, TheGatesAndTheBenchsLaunchesCarryExactlyTheProtocolEnvironment) {
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(gate_.timeout_s * 1000));
  gate_.limits.processes = 99;
  const auto expect_launch = [&](const Launch& l, const Env& env, const CommandLimits& limits,
                                 std::chrono::milliseconds want_timeout = std::chrono::milliseconds(0)) {
    const UntrustedCommand& u = l.untrusted;
    EXPECT_EQ(u.env, env);
    const std::filesystem::path out = env.at("DENSEFEED_OUT");
    EXPECT_EQ(u.cwd, out.parent_path());
    EXPECT_EQ(u.writable, std::vector<std::filesystem::path>{out});
    EXPECT_EQ(u.stdout_path, out.parent_path() / "stdout.log");
    EXPECT_EQ(u.stderr_path, out.parent_path() / "stderr.log");
    EXPECT_EQ(u.timeout, want_timeout.count() ? want_timeout : timeout);
    EXPECT_EQ(u.limits.processes, limits.processes);
    EXPECT_TRUE(u.sandbox);
    EXPECT_TRUE(u.rank_env.empty());
    EXPECT_EQ(u.clock_fd, -1);
  };
  ScriptedExecutor gate_ex([](const Launch& l) {
    write_y(l);
    return exited(0);
  });
  ASSERT_EQ(gate(gate_ex, 11).verdict, Verdict::green);
  ASSERT_EQ(gate_ex.launches.size(), 6u);
  for (const auto& l : gate_ex.launches) {
    const std::string n = l.untrusted.argv.at(1);
    const std::string out = l.untrusted.argv.at(2);
    EXPECT_EQ(out.rfind((dir_ / "runs" / (is_reference(l) ? "reference-" : "candidate-")).string(), 0), 0u) << out;
    expect_launch(l, Env{{"DENSEFEED_CASE", "{\"n\":" + n + "}"}, {"DENSEFEED_MODE", "gate"}, {"DENSEFEED_OUT", out}, {"DENSEFEED_SEED", "11"}},
                  is_reference(l) ? CommandLimits{} : gate_.limits);
  }
  BenchScript script;
  ScriptedExecutor bench_ex(std::ref(script));
  ASSERT_EQ(bench(gate_, dir_.path(), bench_ex).verdict, Verdict::green);
  ASSERT_EQ(bench_ex.launches.size(), 20u);
  for (std::size_t i = 0; i < bench_ex.launches.size(); ++i) {
    const Launch& l = bench_ex.launches[i];
    // Each arm's warm-up call (base first), then the paired rounds.
    const int round = i < 2 ? -1 : static_cast<int>((i - 2) / 2);
    // ABBA: rounds 0 and 3 (mod 4) start with the base.
    const bool base = i < 2 ? i == 0 : ((i - 2) % 2 == 0) == (round % 4 == 0 || round % 4 == 3);
    const auto out = dir_ / "bench" /
                     (i < 2 ? fmt::format("bench-00-warmup-{}", base ? "base" : "candidate")
                            : fmt::format("bench-00-round-{:02}-{}", round, base ? "base" : "candidate")) /
                     "out";
    EXPECT_EQ(l.untrusted.argv, (std::vector<std::string>{"cand", "4", out.string()}));
    expect_launch(l,
                  Env{{"DENSEFEED_CASE", R"({"n":4})"}, {"DENSEFEED_ITERS", l.untrusted.env.at("DENSEFEED_ITERS")},
                      {"DENSEFEED_MODE", "bench"}, {"DENSEFEED_OUT", out.string()}, {"DENSEFEED_SEED", "5"},
                      {"DENSEFEED_WARMUP", "1"}},
                  gate_.limits,
                  // A warm-up call's limit is the gate's bench.max_warmup_seconds, not its timeout_s.
                  round < 0 ? std::chrono::milliseconds(static_cast<long long>(gate_.bench.max_warmup_seconds * 1000))
                            : std::chrono::milliseconds(0));
    if (round % 2 == 0 || round < 0) EXPECT_EQ(l.untrusted.env.at("DENSEFEED_ITERS"), "5");
  }
}
}  // namespace
}  // namespace densefeed
