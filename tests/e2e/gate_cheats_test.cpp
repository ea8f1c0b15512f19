// Each known way around a gate, tried by a harness written to cheat
// (tests/support/cheat_harness.cpp) through the real CLI: every one must end
// red (error for a broken reference) with a reason that names what was wrong.
#include <gtest/gtest.h>

#include <signal.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "process_runner.h"
#include "schema_validator.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;
// Where cheat_harness is: on PATH for the runs (a bare harness name is looked
// up in the project's harness_path, then PATH).
const std::map<std::string, std::string> kEnv = testing::with_on_path(std::filesystem::path(kExe).parent_path());

const char* kGate = R"(gate: cheat
description: y_i = scale * sin(seed / 1000 + i), float32 against a float64 reference.
reference:
  command: [cheat_harness, --role, reference, --n, "{case.n}", --scale, "{case.scale}",
            --ref-fault, "{case.ref_fault}", --seed, "{seed}", --out, "{out}"]
candidate:
  command: [cheat_harness, --role, candidate, --mode, "{param.mode}", --n, "{case.n}",
            --scale, "{case.scale}", --slowdown, "{param.slowdown}", --seed, "{seed}", --out, "{out}"]
params:
  mode:
    type: string
    enum: [honest, nan, zeros, few-wrong, fixed-seed, pow2-only, wrong-dtype, wrong-shape,
           truncated, crash, hang, exit-nonzero, no-output, bench-differs, hang-bench-round-2]
    default: honest
  slowdown: {type: number, default: 1}
outputs:
  y:
    dtype: float32
    reference_dtype: float64
    shape: ["{case.n}"]
    tolerance: {rel_l2: 1.0e-5, max_abs: 1.0e-5, atol: 1.0e-6, rtol: 1.0e-5}
cases:
  defaults: {scale: 1, ref_fault: none}
  grid:
    - {n: [64, 1000]}
  extra:
    - {n: 256, scale: 1.0e-7}
    - {n: 64, ref_fault: nan}
profiles:
  quick: {ref_fault: [none]}
  full: {ref_fault: [none]}
  reference-faults: {ref_fault: [nan]}
timeout_s: 2
freezes: []
bench:
  warmup: 1
  iters: 5
  cases: [{n: 1000}]
)";

class GateCheats : public ::testing::Test {
 protected:
  void SetUp() override {
    // A project in a plain folder (no git): its gates are trusted as they are.
    root_ = dir_ / "root";
    testing::write_project(root_);
    testing::write_file(root_ / "gates" / "cheat.yaml", kGate);
    ASSERT_EQ(testing::run_cli(kExe, {"--project", root_.string(), "--trust-worktree", "gate", "lock"}, dir_.path()).exit_code, 0);
  }
  // Runs the cheat gate with candidate `mode`; returns the JSON report.
  nlohmann::json run(const std::string& mode, int expected_exit, std::vector<std::string> extra = {}, bool bench = false,
                     const std::string& arms = "") {
    const auto manifest = dir_ / (mode + ".yaml");
    testing::write_file(manifest, "experiment: cheat-" + mode +
                                      "\nhypothesis: h\npredicted_effect: p\ngate: cheat\n" +
                                      (arms.empty() ? "candidate: {revision: WORKTREE, params: {mode: " + mode +
                                                          "}}\nbase: {revision: WORKTREE, params: {mode: " +
                                                          (mode == "zeros" ? "nan" : "zeros") + "}}\n"
                                                    : arms));
    std::vector<std::string> args = {"--project", root_.string(), "--trust-worktree", "run", manifest.string(), "--ledger",
                                     (dir_ / "ledger.db").string(), "--json"};
    if (!bench) args.push_back("--no-bench");
    args.insert(args.end(), extra.begin(), extra.end());
    const auto res = testing::run_cli(kExe, args, dir_.path(), kEnv);
    EXPECT_EQ(res.exit_code, expected_exit) << mode << "\n" << res.out << res.err;
    auto report = nlohmann::json::parse(res.out);
    // Every report, whatever the cheat, is a valid verdict document.
    EXPECT_EQ(SchemaValidator(kRoot / "schemas" / "run-report.schema.json").errors(report), std::vector<std::string>{}) << mode;
    return report;
  }
  // The reason of the case labelled `label`.
  static std::string reason(const nlohmann::json& report, const std::string& label) {
    for (const auto& c : report["stages"]["gate"]["cases"]) {
      if (c["case"] == label) return c["verdict"].get<std::string>() + ": " + c["reason"].get<std::string>();
    }
    return "no case " + label;
  }
  testing::TempDir dir_;
  std::filesystem::path root_;
};

TEST_F(GateCheats, HonestCandidateIsGreen) {
  const auto r = run("honest", 0);
  EXPECT_EQ(r["verdict"], "green");
  EXPECT_EQ(r["stages"]["gate"]["cases"].size(), 3u);
}

TEST_F(GateCheats, NanAnywhereIsRed) {
  const auto r = run("nan", 1);
  EXPECT_NE(reason(r, "n=1000").find("red: y: 1 of 1000 candidate element(s) are NaN/Inf"), std::string::npos) << r.dump(1);
}

TEST_F(GateCheats, NanInTheReferenceIsAnError) {
  const auto r = run("honest", 3, {"--profile", "reference-faults"});
  EXPECT_EQ(r["verdict"], "error");
  EXPECT_NE(reason(r, "n=64 ref_fault=nan").find("error: y: the reference has 1 NaN/Inf element(s)"), std::string::npos)
      << r.dump(1);
}

TEST_F(GateCheats, AllZeroCandidateAgainstATinyReferenceIsJudgedRelatively) {
  const auto r = run("zeros", 1);
  const auto why = reason(r, "n=256 scale=1e-07");
  EXPECT_NE(why.find("red: y: rel_l2 1.000e+00 > bound 1.0e-05"), std::string::npos) << why;
  for (const auto& c : r["stages"]["gate"]["cases"]) {
    if (c["case"] == "n=256 scale=1e-07") EXPECT_TRUE(c["outputs"][0]["judged_relative"].get<bool>());
  }
}

TEST_F(GateCheats, AFewWrongElementsAreCounted) {
  const auto r = run("few-wrong", 1);
  EXPECT_NE(reason(r, "n=1000").find("violated by 3 of 1000 element(s)"), std::string::npos) << reason(r, "n=1000");
}

TEST_F(GateCheats, OutputsPrecomputedForOneSeedFailOnAFreshSeed) {
  const auto r = run("fixed-seed", 1);
  EXPECT_NE(r["seed"], "42");
  EXPECT_NE(reason(r, "n=64").find("red: y: rel_l2"), std::string::npos) << reason(r, "n=64");
}

TEST_F(GateCheats, SeedIsRecordedAndReplaysExactly) {
  const auto a = run("honest", 0);
  const auto b = run("honest", 0, {"--seed", a["seed"].get<std::string>()});
  EXPECT_EQ(a["seed"], b["seed"]);
  EXPECT_EQ(a["stages"]["gate"]["cases"][1]["outputs"][0]["metrics"], b["stages"]["gate"]["cases"][1]["outputs"][0]["metrics"]);
  const auto c = run("honest", 0);
  EXPECT_NE(c["seed"], a["seed"]);  // a fresh seed per run
}

TEST_F(GateCheats, ShapeSpecialCasingIsCaughtByTheNonPowerOfTwoCase) {
  const auto r = run("pow2-only", 1);
  EXPECT_EQ(reason(r, "n=64"), "green: ");
  EXPECT_EQ(reason(r, "n=1000").rfind("red: y: ", 0), 0u) << reason(r, "n=1000");
}

TEST_F(GateCheats, WrongDtypeShapeAndByteCountNameTheFile) {
  const auto dtype = run("wrong-dtype", 1);
  EXPECT_NE(reason(dtype, "n=64").find("y.npy: declared dtype float32 but the file holds '<f8' (float64)"), std::string::npos)
      << reason(dtype, "n=64");
  const auto shape = run("wrong-shape", 1);
  EXPECT_NE(reason(shape, "n=1000").find("y.npy: shape [999] but the gate declares [1000]"), std::string::npos)
      << reason(shape, "n=1000");
  const auto bytes = run("truncated", 1);
  const auto why = reason(bytes, "n=64");
  EXPECT_NE(why.find("candidate output: "), std::string::npos) << why;
  EXPECT_NE(why.find("y.npy"), std::string::npos) << why;
  EXPECT_NE(why.find("needs 256 bytes"), std::string::npos) << why;
}

TEST_F(GateCheats, CrashHangNonZeroExitAndMissingOutputAreRed) {
  EXPECT_NE(reason(run("crash", 1), "n=64").find("the candidate was killed by signal 11 (SIGSEGV)"), std::string::npos);
  EXPECT_NE(reason(run("hang", 1), "n=64").find("the candidate timed out after 2 s and was killed"), std::string::npos);
  EXPECT_NE(reason(run("exit-nonzero", 1), "n=64").find("the candidate exited with code 7"), std::string::npos);
  EXPECT_NE(reason(run("no-output", 1), "n=64").find("y.npy: missing"), std::string::npos);
}

TEST_F(GateCheats, NoBenchmarkOnARedAnErrorOrASkippedGate) {
  const auto count_bench_rows = [&] {
    return testing::run_cli("/usr/bin/sqlite3", {(dir_ / "ledger.db").string(), "SELECT COUNT(*) FROM bench_cases"}, dir_.path()).out;
  };
  const auto red = run("nan", 1, {}, /*bench=*/true);
  EXPECT_EQ(red["stages"]["bench"]["status"], "skipped");
  const auto error = run("honest", 3, {"--profile", "reference-faults"}, /*bench=*/true);
  EXPECT_EQ(error["stages"]["bench"]["status"], "skipped");
  EXPECT_NE(error["stages"]["bench"]["reason"].get<std::string>().find("never measured on a red gate"), std::string::npos);
  // A gate that never ran its cases (edited after the lock) is skipped too.
  testing::write_file(root_ / "gates" / "cheat.yaml", std::string(kGate) + "# edited\n");
  const auto skipped = run("honest", 1, {}, /*bench=*/true);
  EXPECT_TRUE(skipped["stages"]["gate"]["cases"].empty());
  EXPECT_EQ(skipped["stages"]["bench"]["status"], "skipped");
  EXPECT_EQ(count_bench_rows(), "0\n");
}

TEST_F(GateCheats, APlantedSlowdownIsSlowerAndIdenticalCodeIsNotFasterOrSlower) {
  const auto slow = run("honest", 0, {}, true,
                        "candidate: {revision: WORKTREE, params: {slowdown: 1.25}}\n"
                        "base: {revision: WORKTREE, params: {slowdown: 1.0}}\npredicted_speedup: 1.1\n");
  const auto& c = slow["stages"]["bench"]["cases"][0];
  // A 25 % planted slowdown: slower, or inconclusive on a loaded machine
  // (tests/perf/bench_acceptance.py measures how often each happens).
  EXPECT_TRUE(c["verdict"] == "slower" || c["verdict"] == "inconclusive") << c.dump(1);
  EXPECT_GE(c["rounds"].get<int>(), 4);
  EXPECT_NEAR(c["prediction_error"].get<double>(), c["speedup"].get<double>() / 1.1 - 1, 1e-12);
  // Calibration runs the base against itself and records the noise floor...
  const auto cal = testing::run_cli(kExe, {"--project", root_.string(), "--trust-worktree", "bench", "calibrate", "cheat",
                                           "--comparisons", "3", "--ledger", (dir_ / "ledger.db").string(), "--json"},
                                    dir_.path(), kEnv);
  ASSERT_EQ(cal.exit_code, 0) << cal.out << cal.err;
  const auto doc = nlohmann::json::parse(cal.out);
  ASSERT_EQ(doc["cases"].size(), 1u);
  EXPECT_EQ(doc["cases"][0]["comparisons"].size(), 3u);
  for (const auto& v : doc["cases"][0]["comparisons"]) EXPECT_NE(v["verdict"], "faster");
  const double floor = doc["cases"][0]["noise_floor"].get<double>();
  // ...which the next decision uses as its threshold when above 1 %.
  const auto after = run("honest", 0, {}, true,
                         "candidate: {revision: WORKTREE, params: {slowdown: 1.25}}\n"
                         "base: {revision: WORKTREE, params: {slowdown: 1.0}}\n");
  EXPECT_DOUBLE_EQ(after["stages"]["bench"]["cases"][0]["threshold"].get<double>(), std::max(0.01, floor));
}

TEST_F(GateCheats, AHarnessThatBehavesDifferentlyWhenTimedIsRed) {
  // Honest when gated, wrong when benchmarked: the bench runs' outputs are
  // compared with the gate's reference too, so no speedup is recorded.
  const auto r = run("bench-differs", 1, {}, /*bench=*/true);
  EXPECT_EQ(r["stages"]["gate"]["verdict"], "green");
  EXPECT_EQ(r["stages"]["bench"]["status"], "red");
  EXPECT_NE(r["stages"]["bench"]["reason"].get<std::string>().find("what was timed is not what was gated: y: rel_l2"),
            std::string::npos)
      << r["stages"]["bench"]["reason"];
  EXPECT_TRUE(r["stages"]["bench"]["cases"].empty());
  EXPECT_EQ(testing::run_cli("/usr/bin/sqlite3", {(dir_ / "ledger.db").string(), "SELECT COUNT(*) FROM bench_cases"}, dir_.path()).out,
            "0\n");
}

// Issue 29: SIGTERM (what `timeout` sends) ends every harness, and the run,
// instead of dying with the experiment left `started`, records it
// `interrupted` at once and says so.
TEST_F(GateCheats, KillingDensefeedKillsItsHarnessesAndRecordsTheRunInterrupted) {
  const auto manifest = dir_ / "hang.yaml";
  testing::write_file(manifest, "experiment: hang\nhypothesis: h\npredicted_effect: p\ngate: cheat\n"
                                "candidate: {revision: WORKTREE, params: {mode: hang}}\nbase: {revision: WORKTREE, params: {mode: zeros}}\n");
  // densefeed itself is stopped (SIGTERM) before the hanging candidate's own timeout.
  ProcessSpec spec;
  spec.argv = {kExe, "--project", root_.string(), "--trust-worktree", "run", manifest.string(), "--ledger",
               (dir_ / "ledger.db").string(), "--jobs", "1"};
  spec.env = kEnv;
  spec.cwd = dir_.path();
  spec.stdout_path = dir_ / "out.log";
  spec.stderr_path = dir_ / "err.log";
  spec.timeout = std::chrono::milliseconds(1200);
  spec.kill_grace = std::chrono::seconds(5);
  const auto r = run_process(spec);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.signal, 0) << "it ended by itself within the grace, not by the kill";
  EXPECT_EQ(r.exit_code, 3);  // README: interrupted
  EXPECT_NE(testing::read_file(dir_ / "err.log").find("experiment 1 stopped and recorded as interrupted"), std::string::npos)
      << testing::read_file(dir_ / "err.log");
  const auto status = testing::run_cli(kExe, {"--project", root_.string(), "--trust-worktree", "status", "1", "--ledger",
                                              (dir_ / "ledger.db").string(), "--json"}, dir_.path(), kEnv);
  const auto doc = nlohmann::json::parse(status.out);
  EXPECT_EQ(doc["state"], "interrupted") << status.out;
  EXPECT_NE(doc["events"].back()["detail"].get<std::string>().find("interrupted by signal 15"), std::string::npos) << status.out;
  const auto out_dir = dir_ / "ledger-runs" / "1" / "candidate-000" / "out";
  ASSERT_TRUE(std::filesystem::exists(out_dir / "hang.pid"));  // it was running when densefeed was stopped
  // Found by its command line (its output folder), sandboxed or not.
  EXPECT_EQ(testing::processes_left_mentioning(out_dir.string()), std::vector<int>{}) << "a harness outlived densefeed";
}

// Issue 29: a run stopped during a case's second timed round has one round
// of it: a speedup and no interval. Recording it failed (NOT NULL
// bench_cases.speedup_lo) and left the experiment `started`; now the stage
// is `interrupted`, the case holds its round with NULL bounds, and what is
// printed says how it ended, not "pending" or "green".
TEST_F(GateCheats, ABenchStoppedInItsSecondRoundIsRecordedInterruptedWithItsOneRound) {
  const auto manifest = dir_ / "hang-bench.yaml";
  testing::write_file(manifest, "experiment: hang-bench\nhypothesis: h\npredicted_effect: p\ngate: cheat\n"
                                "candidate: {revision: WORKTREE, params: {mode: hang-bench-round-2}}\n"
                                "base: {revision: WORKTREE, params: {mode: honest}}\n");
  const auto ledger = dir_ / "ledger.db";
  // densefeed in the background; SIGTERM once the candidate's round 2 hangs.
  const std::string script =
      "\"$0\" --project \"$1\" --trust-worktree run \"$2\" --ledger \"$3\" --jobs 1 > \"$4/out.txt\" 2> \"$4/err.txt\" & p=$!; "
      "for i in $(seq 600); do ls \"$4\"/ledger-runs/1/bench-*-candidate/out/hang.pid > /dev/null 2>&1 && break; sleep 0.05; done; "
      "kill -TERM $p; wait $p; echo $?";
  const auto r = testing::run_cli("/bin/bash", {"-c", script, kExe, root_.string(), manifest.string(), ledger.string(), dir_.path().string()},
                                  dir_.path(), kEnv);
  EXPECT_EQ(r.out, "3\n") << r.out << r.err << testing::read_file(dir_ / "err.txt");  // README: interrupted
  const auto show = testing::run_cli(kExe, {"--project", root_.string(), "--trust-worktree", "ledger", "show", "1", "--ledger",
                                            ledger.string(), "--json"}, dir_.path(), kEnv);
  ASSERT_EQ(show.exit_code, 0) << show.out << show.err;
  const auto doc = nlohmann::json::parse(show.out);
  ASSERT_EQ(doc["bench_cases"].size(), 1u) << show.out;
  const auto& c = doc["bench_cases"][0];
  EXPECT_EQ(c["rounds"], 1) << c.dump(1);
  EXPECT_TRUE(c["speedup_lo"].is_null() && c["speedup_hi"].is_null()) << c.dump(1);
  EXPECT_TRUE(c["speedup"].is_number()) << c.dump(1);
  EXPECT_EQ(c["verdict"], "inconclusive");
  EXPECT_NE(c["reason"].get<std::string>().find("stopped after 1 round (signal 15), before the first look"), std::string::npos)
      << c["reason"];
  const std::string text = testing::read_file(dir_ / "out.txt");
  EXPECT_NE(text.find("verdict: none (interrupted: interrupted by signal 15"), std::string::npos) << text;
  EXPECT_NE(text.find("no interval yet, 1 round,"), std::string::npos) << text;
  EXPECT_NE(text.find("bench: interrupted"), std::string::npos) << text;
  EXPECT_EQ(text.find("verdict: pending"), std::string::npos) << text;
  const auto human = testing::run_cli(kExe, {"--project", root_.string(), "--trust-worktree", "ledger", "show", "1", "--ledger",
                                             ledger.string()}, dir_.path(), kEnv);
  EXPECT_NE(human.out.find("stage bench      interrupted"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("verdict: none (interrupted"), std::string::npos) << human.out;
  EXPECT_EQ(testing::processes_left_mentioning((dir_ / "ledger-runs" / "1").string()), std::vector<int>{});
}

TEST_F(GateCheats, AStaleOutputFromBeforeTheRunIsNeverCompared) {
  // Plant a perfect y.npy where the next run's candidate will write: the
  // runner empties the folder first, so a harness that writes nothing is red.
  const auto honest = run("honest", 0);
  const auto next_id = std::to_string(honest["experiment_id"].get<int>() + 1);
  const auto planted_dir = dir_ / "ledger-runs" / next_id / "candidate-000" / "out";
  std::filesystem::create_directories(planted_dir);
  std::filesystem::copy_file(dir_ / "ledger-runs" / std::to_string(honest["experiment_id"].get<int>()) / "candidate-000" / "out" / "y.npy",
                             planted_dir / "y.npy");
  const auto r = run("no-output", 1, {"--seed", honest["seed"].get<std::string>()});
  EXPECT_EQ(std::to_string(r["experiment_id"].get<int>()), next_id);
  EXPECT_NE(reason(r, "n=64").find("y.npy: missing"), std::string::npos) << reason(r, "n=64");
}

}  // namespace
}  // namespace densefeed
