// The `next` field: constructed results in, the cheapest narrowing
// experiments out, with the figures of the result in their words.
#include "next_steps.h"
#include "ledger_record.h"

#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

MetricFact over(double value, double bound = 1e-5, const std::string& metric = "rel_l2") {
  return MetricFact{"final_state", metric, value, bound, value <= bound, 0, {0, 0, 3, 4}, std::nullopt};
}

CaseFact grid_case(std::size_t index, long T, int shards, bool red, double error = 3e-2) {
  CaseFact c;
  c.index = index;
  c.values = {{"regime", "long-memory"}, {"T", T}, {"shards", shards}, {"K", 128}};
  c.label = "regime=long-memory T=" + std::to_string(T) + " shards=" + std::to_string(shards);
  c.verdict = red ? "red" : "green";
  c.metrics = {over(red ? error : 2e-6)};
  if (red) c.reason = fmt::format("final_state: rel_l2 {:.3e} > bound 1.0e-05", error);
  return c;
}

// The CP precision bug's shape: red at every shards > 1, green at shards = 1.
ResultFacts cp_tf32() {
  ResultFacts f;
  f.experiment_id = 7;
  f.gate = "cp-affine-chain";
  f.gate_verdict = "red";
  f.gate_reason = "8 of 12 case(s) not green";
  std::size_t i = 0;
  for (long T : {8192L, 32768L}) {
    for (int shards : {1, 2, 16, 64}) f.cases.push_back(grid_case(i++, T, shards, shards > 1, 1e-2 * std::log2(shards + 1)));
  }
  f.params = {ParamSpec{"precision", "string", J::array({"ieee", "tf32", "tf32-rn", "tf32x3"}), "ieee", ""}};
  f.candidate_params = {{"precision", "tf32"}};
  f.candidate_command = {"no_such_harness", "--precision", "{param.precision}", "--shards", "{case.shards}", "--T", "{case.T}",
                         "--seed", "{seed}", "--out", "{out}"};
  f.seed = "42";
  f.work_dir = "/tmp/ledger-runs/7";
  f.timeout_s = 900;
  return f;
}

TEST(NextSteps, RedOnlyAboveOneShardSeparatesPrecisionFromAlgorithm) {
  const auto steps = next_steps(cp_tf32());
  ASSERT_FALSE(steps.empty());
  const NextStep& s = steps[0];
  EXPECT_EQ(s.kind, "isolate-precision");
  EXPECT_EQ(s.case_label, "regime=long-memory T=8192 shards=64");  // the largest shard count, furthest over
  EXPECT_EQ(s.set_params, J({{"precision", "ieee"}}));
  EXPECT_NE(s.suggestion.find("rerun case regime=long-memory T=8192 shards=64 with precision=ieee"), std::string::npos) << s.suggestion;
  EXPECT_NE(s.suggestion.find("to separate precision from algorithm"), std::string::npos) << s.suggestion;
  EXPECT_NE(s.why.find("red only at shards > 1 (6 of 6 such cases); every shards=1 case is green"), std::string::npos) << s.why;
}

// A step that suggests other params runs them: its command is the
// candidate's with set_params over it (a fresh-user trial: set_params said
// variant float32, the command ran --variant float16).
TEST(NextSteps, AStepsCommandRunsTheParamsItSuggests) {
  auto f = cp_tf32();
  // Red at T=8192 shards=1 and T=32768 shards=16 only: no key separates the
  // red cases from the green ones, so the step is the worst case alone.
  for (auto& c : f.cases) c.verdict = "green", c.metrics = {over(2e-6)}, c.reason.clear();
  for (const std::size_t i : {0u, 6u}) f.cases[i] = grid_case(i, f.cases[i].values["T"].get<long>(), f.cases[i].values["shards"].get<int>(), true);
  const auto steps = next_steps(f);
  ASSERT_FALSE(steps.empty());
  const NextStep& s = steps[0];
  EXPECT_EQ(s.kind, "inspect-case");
  EXPECT_EQ(s.set_params, J({{"precision", "ieee"}}));
  // Issue 30: densefeed replaying the case with those params, linked to experiment 7.
  EXPECT_EQ(s.command, (std::vector<std::string>{"densefeed", "run", "--failing-of", "7", "--case", "regime=long-memory T=8192 shards=1",
                                                 "--candidate-param", "precision=ieee"}))
      << fmt::format("{}", fmt::join(s.command, " "));
  f.manifest_path = "experiments/x.yaml";
  EXPECT_EQ(next_steps(f)[0].command[2], "experiments/x.yaml");
}

TEST(NextSteps, WithoutAnExactPrecisionTheSlicesAreNext) {
  auto f = cp_tf32();
  f.params = {ParamSpec{"precision", "string", J::array({"tf32", "tf32-rn"}), "tf32", ""}};
  f.cases[3].metrics[0].first_failing_slice = 5;  // T=8192 shards=64
  const auto steps = next_steps(f);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps[0].kind, "isolate-value");
  EXPECT_TRUE(steps[0].set_params.empty());
  EXPECT_NE(steps[0].why.find("final_state first fails at slice 5"), std::string::npos) << steps[0].why;
}

TEST(NextSteps, RedAtTheOneValueThatIsNotAPowerOfTwoSaysSo) {
  ResultFacts f;
  f.gate_verdict = "red";
  std::size_t i = 0;
  for (long T : {8000L, 8192L, 32768L}) {
    for (int shards : {1, 16}) f.cases.push_back(grid_case(i++, T, shards, T == 8000));
  }
  f.candidate_command = {"h", "--T", "{case.T}", "--out", "{out}"};
  f.seed = "1";
  f.work_dir = "/w";
  f.experiment_id = 3;
  const auto steps = next_steps(f);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps[0].kind, "isolate-value");
  EXPECT_NE(steps[0].why.find("red only at T=8000 (2 case(s)); every case at T=32768,8192 is green"), std::string::npos) << steps[0].why;
  EXPECT_NE(steps[0].why.find("8000 is the only value that is not a power of two"), std::string::npos) << steps[0].why;
  EXPECT_EQ(steps[0].command, (std::vector<std::string>{"densefeed", "run", "--failing-of", "3", "--case", "regime=long-memory T=8000 shards=1"}))
      << fmt::format("{}", fmt::join(steps[0].command, " "));
}

TEST(NextSteps, ATimeoutIsRerunAloneWithTheSameInputs) {
  auto f = cp_tf32();
  for (auto& c : f.cases) c.verdict = "green", c.metrics = {over(2e-6)};
  f.cases[5].verdict = "red";
  f.cases[5].metrics.clear();
  f.cases[5].reason = "the candidate timed out after 900.0 s and was killed";
  f.cases[5].failure = Failure{FailureKind::timeout, FailureWho::candidate, {}, {}, "", "", ""};
  const auto steps = next_steps(f);
  ASSERT_EQ(steps.size(), 1u);
  const NextStep& s = steps[0];
  EXPECT_EQ(s.kind, "rerun-case");
  EXPECT_EQ(s.case_label, "regime=long-memory T=32768 shards=2");
  EXPECT_NE(s.suggestion.find("without the gate's 900 s limit"), std::string::npos) << s.suggestion;
  // Without the limit is a person's run by hand: densefeed repro prints
  // its commands (issue 30), environment and seed.
  EXPECT_EQ(s.command, (std::vector<std::string>{"densefeed", "repro", "7", "regime=long-memory T=32768 shards=2"}));
  EXPECT_TRUE(s.env.empty());
  EXPECT_TRUE(s.cwd.empty());
}

TEST(NextSteps, CrashesAndOutputDefectsAreNamedOncePerKind) {
  auto f = cp_tf32();
  for (auto& c : f.cases) c.verdict = "green", c.metrics = {over(2e-6)};
  for (std::size_t i : {1, 2}) {
    f.cases[i].verdict = "red";
    f.cases[i].metrics.clear();
    f.cases[i].reason = "the candidate killed by signal 11 (SEGV)";
    f.cases[i].failure = Failure{FailureKind::crash, FailureWho::candidate, 11, {}, "", "", ""};
  }
  f.cases[6].verdict = "red";
  f.cases[6].metrics.clear();
  f.cases[6].reason = "final_state: candidate output: /w/out/final_state.npy: missing (the harness wrote neither final_state.npy nor one .safetensors file)";
  f.cases[6].failure = Failure{FailureKind::missing_output, FailureWho::candidate, {}, {}, "final_state", "", ""};
  const auto steps = next_steps(f);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].kind, "rerun-case");
  // Rendered from the failure's value (signal 11), not from the reason's words.
  EXPECT_NE(steps[0].suggestion.find("killed by signal 11 (SIGSEGV)) (and 1 more case(s) the same way)"), std::string::npos)
      << steps[0].suggestion;
  EXPECT_EQ(steps[1].kind, "fix-output");
  EXPECT_NE(steps[1].suggestion.find("densefeed gate show cp-affine-chain --json"), std::string::npos) << steps[1].suggestion;
}

TEST(NextSteps, AFewWrongElementsPointAtIndexing) {
  ResultFacts f;
  f.gate_verdict = "red";
  CaseFact c = grid_case(0, 1000, 1, true);
  c.metrics = {MetricFact{"y", "elementwise", 0.003, 0, false, 3, {999}, std::nullopt}};
  f.cases = {c};
  const auto steps = next_steps(f);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps[0].kind, "inspect-elements");
  EXPECT_NE(steps[0].suggestion.find("the 3 element(s) of y over the bound"), std::string::npos) << steps[0].suggestion;
  EXPECT_NE(steps[0].suggestion.find("the worst at [999]"), std::string::npos) << steps[0].suggestion;
}

TEST(NextSteps, AnUnrelatedOutputIsNotRounding) {
  ResultFacts f;
  f.gate_verdict = "red";
  f.cases = {grid_case(0, 64, 1, true, 1.0), grid_case(1, 1000, 1, true, 1.41)};
  const auto steps = next_steps(f);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.back().kind, "inspect-case");
  EXPECT_NE(steps.back().suggestion.find("DENSEFEED_SEED"), std::string::npos);
  EXPECT_NE(steps.back().why.find("final_state.rel_l2 1.410e+00 vs bound 1.0e-05"), std::string::npos) << steps.back().why;
}

TEST(NextSteps, ALockMismatchOrAFrozenFileInTheRevisionComesFirstAndAlone) {
  auto f = cp_tf32();
  f.lock_problems = {"kernels/affine_chain/reference.cpp: sha256 differs from gates/gates.lock"};
  auto steps = next_steps(f);
  // A committed change not re-locked: re-lock it (a person) or restore it; nothing else.
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].kind, "ask-to-lock");
  EXPECT_EQ(steps[0].command, (std::vector<std::string>{"densefeed", "gate", "lock", f.gate}));
  EXPECT_EQ(steps[1].kind, "restore-frozen");
  EXPECT_EQ(steps[1].command, (std::vector<std::string>{"densefeed", "gate", "verify", "--json"}));
  f.lock_problems.clear();
  f.cases.clear();
  f.gate_reason = "the candidate revision 0123456789ab changes frozen files: gates/cp-affine-chain.yaml; no case ran";
  steps = next_steps(f);
  EXPECT_TRUE(steps.empty() || steps[0].kind != "revert-frozen") << "the reason's words alone must not decide the step";
  f.gate_failure = Failure{FailureKind::lock, FailureWho::candidate, {}, {}, "", "own_commits", "gates/cp-affine-chain.yaml"};
  steps = next_steps(f);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, "revert-frozen");
  EXPECT_EQ(steps[0].why, f.gate_reason);
}

TEST(NextSteps, AGateThatWasNeverLockedIsAPersonsToLockNotAnAgents) {
  auto f = cp_tf32();
  f.cases.clear();
  f.lock_problems = {"gates/cp-affine-chain.yaml: not in gates/gates.lock (a person must run 'densefeed gate lock')"};
  f.gate_unlocked = true;  // the gate stage's failure: lock, metric unlocked
  const auto steps = next_steps(f);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, "ask-to-lock");
  EXPECT_TRUE(steps[0].command.empty());  // nothing for an agent to run
  EXPECT_NE(steps[0].suggestion.find("agents never lock a gate"), std::string::npos) << steps[0].suggestion;
  EXPECT_EQ(steps[0].why, "no case ran: " + f.lock_problems[0]);
}

TEST(NextSteps, AFailedReferenceIsReportedNotRetried) {
  ResultFacts f;
  f.gate_verdict = "error";
  CaseFact c = grid_case(0, 64, 1, false);
  c.verdict = "error";
  c.reason = "y: the reference has 1 NaN/Inf element(s)";
  f.cases = {c};
  const auto steps = next_steps(f);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, "report-reference");
  EXPECT_NE(steps[0].why.find("the reference has 1 NaN/Inf"), std::string::npos);
}

BenchFact bench(const std::string& verdict, double s, double lo, double hi, const std::string& reason = "") {
  return BenchFact{"T=8192 shards=8", verdict, reason, s, lo, hi, 0.01, false, 9, std::nullopt, std::nullopt};
}

ResultFacts green_with(std::vector<BenchFact> b) {
  ResultFacts f;
  f.experiment_id = 3;
  f.gate = "cp-affine-chain";
  f.gate_verdict = "green";
  f.bench_status = "measured";
  f.bench = std::move(b);
  return f;
}

TEST(NextSteps, AnInconclusiveBenchmarkAsksForTheNoiseFloorOrAnIdleMachine) {
  auto steps = next_steps(green_with({bench("inconclusive", 1.004, 0.991, 1.018, "inconclusive: needs 6 more rounds")}));
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, "calibrate");
  EXPECT_EQ(steps[0].command, (std::vector<std::string>{"densefeed", "bench", "calibrate", "cp-affine-chain", "--comparisons", "20"}));
  EXPECT_NE(steps[0].why.find("speedup 1.004x [0.991, 1.018] over 9 rounds, noise threshold 1.0%"), std::string::npos) << steps[0].why;
  // Spread, not the threshold, held it back: calibration would not help.
  auto spread = bench("inconclusive", 0.606, 0.586, 0.625, "inconclusive: relative spread base 21.2%, candidate 14.0% (limit < 10%); median ...");
  spread.guards = std::vector<BenchGuard>{BenchGuard::spread};
  spread.base_spread = 0.212, spread.candidate_spread = 0.14;
  steps = next_steps(green_with({spread}));
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, "rerun-bench");
  EXPECT_NE(steps[0].why.find("relative spread base 21.2%, candidate 14.0% (limit < 10%)"), std::string::npos) << steps[0].why;
}

// The guards are values: a reason that only says "relative spread" or
// "throttled" (a candidate's own text could) moves no step, and a guard
// recorded without those words does.
TEST(NextSteps, TheGuardsDecideTheStepNotTheReasonsWords) {
  auto worded = bench("inconclusive", 1.004, 0.991, 1.018, "inconclusive: relative spread base 21.2%; SM clocks; throttled");
  worded.guards = std::vector<BenchGuard>{};
  EXPECT_EQ(next_steps(green_with({worded}))[0].kind, "calibrate");
  auto clock = bench("inconclusive", 1.004, 0.991, 1.018, "inconclusive: median ...");
  clock.guards = std::vector<BenchGuard>{BenchGuard::throttle};
  const auto steps = next_steps(green_with({clock}));
  EXPECT_EQ(steps[0].kind, "rerun-bench");
  EXPECT_NE(steps[0].suggestion.find("clocks steady"), std::string::npos) << steps[0].suggestion;
}

TEST(NextSteps, SlowerSameAndAWrongPredictionEachSayWhatToDo) {
  EXPECT_EQ(next_steps(green_with({bench("slower", 0.8, 0.78, 0.82)}))[0].kind, "profile");
  EXPECT_EQ(next_steps(green_with({bench("same", 1.0, 0.995, 1.004)}))[0].kind, "profile");
  auto b = bench("faster", 1.4, 1.38, 1.43);
  b.predicted_speedup = 2.0;
  b.prediction_error = 1.4 / 2.0 - 1;
  const auto steps = next_steps(green_with({b}));
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, "revise-prediction");
  EXPECT_NE(steps[0].why.find("off by -30%"), std::string::npos) << steps[0].why;
}

TEST(NextSteps, TheBasesFailedTraceCheckIsNoStep) {
  auto f = green_with({bench("faster", 1.2, 1.1, 1.3)});
  f.trace = {TraceFact{"candidate", 0, "overlap", true, 1.0, 0.9, J::object()},
             TraceFact{"base", 0, "overlap", false, 0.0, 0.9, J::object()}};
  for (const auto& s : next_steps(f)) EXPECT_NE(s.kind, "trace-intervals") << s.suggestion;
}

TEST(NextSteps, AFailedTraceCheckNamesItsIntervals) {
  auto f = green_with({bench("faster", 1.2, 1.1, 1.3)});
  f.trace = {TraceFact{"candidate", 0, "overlap", false, 0.0, 0.9,
                       J{{"a", {{"name", "kv_transfer"}, {"ts", 100}, {"dur", 50}}}, {"b", {{"name", "prefill"}, {"ts", 160}, {"dur", 400}}}}}};
  const auto steps = next_steps(f);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, "trace-intervals");
  EXPECT_NE(steps[0].suggestion.find("trace check 0 (overlap, candidate arm)"), std::string::npos) << steps[0].suggestion;
  EXPECT_NE(steps[0].suggestion.find("kv_transfer"), std::string::npos) << steps[0].suggestion;
  EXPECT_NE(steps[0].why.find("value 0 vs bound 0.9"), std::string::npos) << steps[0].why;
}

TEST(NextSteps, AGreenFasterResultGoesToAPersonThenToPromotion) {
  auto f = green_with({bench("faster", 1.7, 1.6, 1.8)});
  f.risk = {"numerics"};
  f.categories = {{"numerics", "none"}};
  auto steps = next_steps(f);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, "ask-review");
  EXPECT_NE(steps[0].suggestion.find("densefeed review approve 3 --by NAME"), std::string::npos);
  f.categories = {{"numerics", "approve"}};
  EXPECT_EQ(next_steps(f)[0].kind, "add-acceptance");
  f.has_acceptance = true;
  steps = next_steps(f);
  EXPECT_EQ(steps[0].kind, "promote");
  EXPECT_EQ(steps[0].command, (std::vector<std::string>{"densefeed", "promote", "3", "--json"}));
  f.promoted = true;
  EXPECT_TRUE(next_steps(f).empty());
}

TEST(NextSteps, AQueuedExperimentWaitsForAWorker) {
  ResultFacts f;
  f.experiment_id = 12;
  f.state = ExperimentState::queued;
  const auto steps = next_steps(f);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].kind, "wait");
  EXPECT_EQ(steps[0].command, (std::vector<std::string>{"densefeed", "status", "12", "--wait", "--json"}));
  EXPECT_NE(steps[0].suggestion.find("densefeed worker"), std::string::npos);
}

TEST(NextSteps, TheListIsCappedAndItsJsonLeavesEmptyFieldsOut) {
  auto f = cp_tf32();
  EXPECT_EQ(next_steps(f, 1).size(), 1u);
  const auto doc = next_steps_json(next_steps(f));
  ASSERT_TRUE(doc.is_array());
  EXPECT_EQ(doc[0]["kind"], "isolate-precision");
  // Issue 30: the experiment is densefeed's replay with the other params, a command.
  EXPECT_EQ(doc[0]["command"][1], "run") << doc[0].dump(1);
  EXPECT_FALSE(doc[0].contains("cwd"));
  EXPECT_FALSE(doc[0].contains("env"));
  EXPECT_EQ(doc[0]["set_params"], J({{"precision", "ieee"}}));
  EXPECT_TRUE(next_steps_json({}).is_array());
}

TEST(NextSteps, ALedgerRecordGivesTheSameFactsAsTheRun) {
  const J record = J::parse(R"({
    "id": 4, "gate": "cp-affine-chain", "state": "finished", "risk": ["numerics"], "candidate_revision": "WORKTREE",
    "candidate_params": {"precision": "tf32"}, "acceptance": {}, "promotion": null, "categories": {"numerics": "none"},
    "events": [{"event": "finished", "detail": ""}],
    "gate_run": {"verdict": "red", "reason": "1 of 2 case(s) not green", "lock_problems": [], "seed": "99",
      "cases": [
        {"case_index": 0, "case_label": "T=8192 shards=1", "case_json": {"T": 8192, "shards": 1}, "verdict": "green", "reason": "",
         "metrics": [{"output": "s", "metric": "rel_l2", "value": 2e-6, "bound": 1e-5, "passed": 1, "violations": 0,
                      "worst_index": [0, 1], "first_failing_slice": null}]},
        {"case_index": 1, "case_label": "T=8192 shards=8", "case_json": {"T": 8192, "shards": 8}, "verdict": "red",
         "reason": "s: rel_l2 4e-2 > bound 1e-5",
         "metrics": [{"output": "s", "metric": "rel_l2", "value": null, "bound": 1e-5, "passed": 0, "violations": 0,
                      "worst_index": null, "first_failing_slice": 2}]}]},
    "bench_cases": [], "trace_findings": [
      {"arm": "candidate", "check_index": 1, "kind": "overlap", "passed": false, "value": 0.1, "bound": 0.9, "details": {"a": 1}}]
  })");
  const auto f = facts_from_record(experiment_record_from_rows(record), nullptr, "/l-runs/4");
  EXPECT_EQ(f.experiment_id, 4);
  EXPECT_EQ(f.gate_verdict, "red");
  EXPECT_EQ(f.seed, "99");
  ASSERT_EQ(f.cases.size(), 2u);
  EXPECT_TRUE(f.cases[0].metrics[0].passed);
  EXPECT_FALSE(f.cases[1].metrics[0].passed);
  EXPECT_TRUE(std::isnan(f.cases[1].metrics[0].value));
  EXPECT_EQ(f.cases[1].metrics[0].first_failing_slice, 2);
  EXPECT_EQ(f.cases[1].index, 1u);
  EXPECT_EQ(f.bench_status, "skipped");
  ASSERT_EQ(f.trace.size(), 1u);
  EXPECT_FALSE(f.trace[0].passed);
  EXPECT_EQ(f.trace[0].bound, 0.9);
  EXPECT_FALSE(f.has_acceptance);
  EXPECT_EQ(f.work_dir, "/l-runs/4");
  // Without the gate (params, command) it still names the pattern; with two
  // shard counts only, that is one value.
  const auto steps = next_steps(f);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps[0].kind, "isolate-value");
  EXPECT_NE(steps[0].why.find("red only at shards=8 (1 case(s)); every case at shards=1 is green"), std::string::npos) << steps[0].why;
  // No gate is needed for the replay: densefeed reads it again (issue 30).
  ASSERT_GE(steps[0].command.size(), 6u);
  EXPECT_EQ(steps[0].command[0], "densefeed");
  EXPECT_EQ(steps[0].command[steps[0].command.size() - 3], "4");
  EXPECT_EQ(steps[0].command.back(), "T=8192 shards=8");
}

// A green gate whose bench stage is red (the candidate crashed in bench
// mode) or an error (the base failed): the record's next is the bench's
// step, as the run's is, never review or promotion (a hostile trial got
// "ask-review", then "promote", for a candidate that crashes only in bench
// mode).
TEST(NextSteps, ARecordedRedOrErrorBenchStageIsTheNextStepNeverPromotion) {
  const J rows = J::parse(R"({
    "id": 11, "gate": "scan", "state": "finished", "risk": ["numerics"], "candidate_revision": "WORKTREE",
    "candidate_params": {}, "acceptance": {"criteria": ["ms <= 1"]}, "promotion": null, "categories": {"numerics": "approve"},
    "events": [{"event": "finished", "detail": ""}],
    "gate_run": {"verdict": "green", "reason": "", "lock_problems": [], "seed": "5",
      "cases": [{"case_index": 0, "case_label": "T=64", "case_json": {"T": 64}, "verdict": "green", "reason": "", "metrics": []}]},
    "bench_cases": [], "trace_findings": []
  })");
  for (const auto verdict : {StageVerdict::red, StageVerdict::error}) {
    ExperimentRecord record = experiment_record_from_rows(rows);
    StageOutcome bench;
    bench.stage = "bench";
    bench.verdict = verdict;
    bench.reason = "the candidate was killed by signal 11 (SIGSEGV) in bench mode";
    record.summary.stages = {StageOutcome{"gate", StageVerdict::green, {}, "", std::nullopt, ""}, bench};
    const auto f = facts_from_record(record, nullptr, "/l-runs/11");
    EXPECT_EQ(f.bench_status, to_string(verdict));
    const auto steps = next_steps(f);
    ASSERT_FALSE(steps.empty()) << to_string(verdict);
    EXPECT_EQ(steps[0].kind, verdict == StageVerdict::red ? "fix-bench-mode" : "report-reference");
    EXPECT_EQ(steps[0].why, bench.reason);
    for (const auto& s : steps) EXPECT_NE(s.kind, "promote") << to_string(verdict);
    for (const auto& s : steps) EXPECT_NE(s.kind, "ask-review") << to_string(verdict);
  }
}

// Issue 30: hints from the gate's structure before the number's form. fla's
// shape: one sequence at T = 8192, 16384 (not cut: 1 part) and 24576 (cut
// into 3 parts by the library's planner, reported in meta.json); red only
// at 24576, the only value that is not a power of two. The hint names the
// partitioning, not tails and remainders.
ResultFacts fla_like() {
  ResultFacts f;
  f.experiment_id = 9;
  f.gate = "fla-intracard-cp";
  f.gate_verdict = "red";
  std::size_t i = 0;
  for (long T : {8192L, 16384L, 24576L}) {
    CaseFact c;
    c.index = i++;
    c.values = {{"T", T}, {"H", 4}};
    c.label = "T=" + std::to_string(T) + " H=4";
    const bool red = T == 24576;
    c.verdict = red ? "red" : "green";
    c.metrics = {over(red ? 9e-2 : 2e-3, 1.2e-2)};
    c.parts = T == 24576 ? 3 : 1;
    f.cases.push_back(c);
  }
  f.structure.partition = PartitionSpec{"", true};
  f.structure.states = {"final_state"};
  f.structure.declared = true;
  f.seed = "777";
  return f;
}

TEST(NarrowHints, TheOnlyRedCaseBeingTheOnlyPartitionedOneNamesPartitioningNotTheNumbersForm) {
  const auto steps = next_steps(fla_like());
  ASSERT_FALSE(steps.empty());
  const NextStep& s = steps[0];
  EXPECT_EQ(s.case_label, "T=24576 H=4");
  EXPECT_NE(s.why.find("red only where the work is partitioned (1 of 1 partitioned cases red, as the candidate reported its parts; "
                       "the fewest parts red: 3), every unpartitioned case green (2)"),
            std::string::npos)
      << s.why;
  EXPECT_NE(s.why.find("final_state"), std::string::npos) << s.why;
  for (const auto& step : steps) {
    EXPECT_EQ(step.why.find("power of two"), std::string::npos) << step.kind << ": " << step.why;
    EXPECT_EQ(step.why.find("tail"), std::string::npos) << step.kind << ": " << step.why;
  }
  // The same gate without a structure falls back on the numbers (red above
  // a value of T, or at the one that is not a power of two): what the
  // fresh-user trial on the H200 was told.
  auto plain = fla_like();
  plain.structure = GateStructure{};
  const auto old = next_steps(plain);
  ASSERT_FALSE(old.empty());
  EXPECT_EQ(old[0].why.find("partitioned"), std::string::npos) << old[0].why;
  EXPECT_TRUE(old[0].why.find("T > 8192") != std::string::npos || old[0].why.find("power of two") != std::string::npos) << old[0].why;
  // The second step is densefeed narrowing it itself.
  ASSERT_GE(steps.size(), 2u);
  EXPECT_EQ(steps[1].kind, "narrow");
  EXPECT_EQ(steps[1].command, (std::vector<std::string>{"densefeed", "narrow", "9", "--budget", "10m"}));
}

// With a declared precision param, the partitioned-only red cases get the
// precision swap on the case with the fewest parts.
TEST(NarrowHints, ADeclaredPrecisionParamIsSwappedOnTheFewestPartsRed) {
  auto f = cp_tf32();
  f.structure.partition = PartitionSpec{"shards", false};
  f.structure.precision = {"precision"};
  for (auto& c : f.cases) c.parts = c.values["shards"].get<std::int64_t>();
  const auto steps = next_steps(f);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps[0].kind, "isolate-precision");
  EXPECT_EQ(steps[0].set_params, J({{"precision", "ieee"}}));
  EXPECT_EQ(steps[0].case_label, "regime=long-memory T=8192 shards=2") << steps[0].why;
  EXPECT_NE(steps[0].why.find("parts counted by case key shards; the fewest parts red: 2"), std::string::npos) << steps[0].why;
}

// Red partitioned or not: the hint says it is not the partitioning.
TEST(NarrowHints, RedPartitionedOrNotSaysTheAlgorithmOrTheInputs) {
  auto f = cp_tf32();
  f.structure.partition = PartitionSpec{"shards", false};
  for (auto& c : f.cases) {
    c.parts = c.values["shards"].get<std::int64_t>();
    c.verdict = "red";
    c.metrics = {over(3e-2)};
  }
  const auto steps = next_steps(f);
  ASSERT_FALSE(steps.empty());
  EXPECT_NE(steps[0].suggestion.find("the algorithm or the inputs, not the partitioning"), std::string::npos) << steps[0].suggestion;
  EXPECT_NE(steps[0].why.find("red partitioned or not (6 partitioned, 2 unpartitioned case(s) red"), std::string::npos) << steps[0].why;
}

}  // namespace
}  // namespace densefeed
