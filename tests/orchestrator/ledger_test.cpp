// The ledger's invariants are the database's: each test tries to break one
// through plain SQL, as anyone with sqlite3 could.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "error.h"
#include "ledger.h"
#include "gate_store.h"
#include "manifest.h"
#include "project.h"
#include "test_support.h"
#include "plain_sql.h"

namespace densefeed {
namespace {

using testing::plain_sql;
using testing::sql_one_value;

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;


class LedgerInvariants : public ::testing::Test {
 protected:
  void SetUp() override {
    const Project project = load_project(kRoot);
    manifest_ = load_manifest(kRoot / "experiments" / "cp-affine-chain-tf32.yaml", worktree_store(project), project);
    Ledger ledger(db_path());
    experiment_ = ledger.record_experiment({&manifest_, {{"precision", "tf32"}}, {{"precision", "ieee"}}});
    red_.verdict = Verdict::red;
    red_.reason = "1 of 1 case(s) not green";
    CaseResult c;
    c.gate_case.label = "T=8192 shards=2";
    c.gate_case.values = {{"T", 8192}, {"shards", 2}};
    c.verdict = Verdict::red;
    Comparison cmp;
    cmp.checks.push_back({"rel_l2", 3.6e-2, 1e-5, false});
    cmp.worst_index = {0, 0, 3, 7};
    c.outputs.push_back({"final_state", cmp});
    red_.cases.push_back(c);
    gate_run_ = ledger.record_gate_run(experiment_, {"cp-affine-chain", std::string(64, 'f'), {}, "quick", 42, utc_now(), &red_});
  }
  std::filesystem::path db_path() const { return dir_ / "ledger.db"; }
  // A bench case row; `timing` is who took its samples (driver | candidate).
  std::string bench_insert(std::int64_t experiment, std::int64_t gate_run, const std::string& timing = "driver") const {
    return "INSERT INTO bench_cases(experiment_id, gate_run_id, case_label, case_json, unit, verdict, reason, base_median, "
           "base_relative_spread, candidate_median, candidate_relative_spread, speedup, speedup_lo, speedup_hi, "
           "ci_confidence, p_value, rounds, threshold, rounds_json, timing) VALUES (" +
           std::to_string(experiment) + ", " + std::to_string(gate_run) +
           ", 'c', '{}', 'ms', 'faster', 'r', 2, 0, 1, 0, 2, 1.9, 2.1, 0.98, 0.001, 9, 0.01, '[]', '" + timing + "')";
  }
  testing::TempDir dir_;
  Manifest manifest_;
  GateResult red_;
  std::int64_t experiment_ = 0;
  std::int64_t gate_run_ = 0;
};

TEST_F(LedgerInvariants, NoSpeedupOnARedGateThroughPlainSql) {
  const auto e = plain_sql(db_path(), bench_insert(experiment_, gate_run_));
  EXPECT_EQ(e, "bench_cases: the experiment has no green gate run; a speedup is never recorded on a red gate");
}

TEST_F(LedgerInvariants, NoSpeedupOnARedGateThroughTheApi) {
  Ledger ledger(db_path());
  BenchResult bench;
  bench.cases.push_back(BenchCaseResult{});
  bench.cases[0].decision.speedup = 2.0;
  EXPECT_THROW(ledger.record_bench(experiment_, gate_run_, bench, Environment{}, "", "", false), InfraError);
  EXPECT_EQ(ledger.show(experiment_)["bench_cases"].size(), 0u);
}

// Issue 29: a run stopped (SIGTERM, a timeout) after a case's first round
// has a speedup but no interval, and before it not even that; recording it
// failed on NOT NULL and left the experiment 'started'. Now its NaNs are
// NULLs, read back as none, and the chain still verifies.
TEST_F(LedgerInvariants, ACaseStoppedBeforeTwoRoundsIsRecordedWithoutAnInterval) {
  Ledger ledger(db_path());
  const auto second = ledger.record_experiment({&manifest_, {{"precision", "tf32x3"}}, {{"precision", "tf32"}}});
  GateResult green;
  const auto green_run = ledger.record_gate_run(second, {"cp-affine-chain", std::string(64, 'f'), {}, "quick", 1, utc_now(), &green});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  BenchResult bench;
  BenchCaseResult one;  // one round: a ratio, no interval, no p
  one.bench_case.label = "T=8192";
  one.base.push_back(ArmRound{});
  one.base[0].samples_ms = {2.0, 2.1};
  one.candidate.push_back(ArmRound{});
  one.candidate[0].samples_ms = {1.0, 1.1};
  one.decision.verdict = BenchVerdict::inconclusive;
  one.decision.speedup = 2.0;
  one.decision.speedup_ci = {nan, nan};
  one.decision.p_value = nan;
  BenchCaseResult none = one;  // stopped before its first round
  none.bench_case.label = "T=16384";
  none.base.clear();
  none.candidate.clear();
  none.decision.speedup = none.decision.base_median_ms = none.decision.candidate_median_ms = nan;
  none.decision.base_relative_spread = none.decision.candidate_relative_spread = nan;
  bench.cases = {one, none};
  ASSERT_NO_THROW(ledger.record_bench(second, green_run, bench, Environment{}, "", "", false));
  EXPECT_EQ(sql_one_value(db_path(), "SELECT COUNT(*) FROM bench_cases WHERE speedup_lo IS NULL AND speedup_hi IS NULL AND p_value IS NULL"), "2");
  EXPECT_EQ(sql_one_value(db_path(), "SELECT COUNT(*) FROM bench_cases WHERE speedup IS NULL AND base_median IS NULL"), "1");
  const auto record = ledger.record(second);
  ASSERT_EQ(record.bench_cases.size(), 2u);
  EXPECT_DOUBLE_EQ(record.bench_cases[0].speedup, 2.0);
  EXPECT_TRUE(std::isnan(record.bench_cases[0].lo) && std::isnan(record.bench_cases[0].hi));
  EXPECT_TRUE(std::isnan(record.bench_cases[1].speedup));
  EXPECT_EQ(record.bench_cases[0].rounds, 1);
  const auto chain = ledger.verify();
  EXPECT_TRUE(chain.ok) << chain.problem;
  // Still append-only after migration 10 made the table again.
  EXPECT_EQ(plain_sql(db_path(), "UPDATE bench_cases SET speedup = 9"), "bench_cases is append-only");
  EXPECT_EQ(plain_sql(db_path(), "DELETE FROM bench_cases"), "bench_cases is append-only");
  EXPECT_NE(plain_sql(db_path(), bench_insert(experiment_, green_run)), "");  // and the red-gate trigger is back
}

TEST_F(LedgerInvariants, SpeedupNeedsTheGreenRunOfTheSameExperiment) {
  Ledger ledger(db_path());
  const auto second = ledger.record_experiment({&manifest_, {{"precision", "tf32x3"}}, {{"precision", "tf32"}}});
  GateResult green;
  const auto green_run = ledger.record_gate_run(second, {"cp-affine-chain", std::string(64, 'f'), {}, "quick", 1, utc_now(), &green});
  // A green run of another experiment does not license a speedup here.
  EXPECT_NE(plain_sql(db_path(), bench_insert(experiment_, green_run)), "");
  EXPECT_EQ(plain_sql(db_path(), bench_insert(second, green_run)), "");
}

TEST_F(LedgerInvariants, NoEnvironmentRowWithoutAGreenGate) {
  EXPECT_EQ(plain_sql(db_path(), "INSERT INTO environments(experiment_id, host, cpu_model, gpus, cuda_version, compiler, "
                                 "flags, candidate_sha, base_sha, worktree_dirty) VALUES (" +
                                     std::to_string(experiment_) + ", 'h', 'c', '[]', '', 'g', '', 'a', 'b', 0)"),
            "environments: recorded only with a benchmark, which needs a green gate run");
}

TEST_F(LedgerInvariants, ResultsAreAppendOnly) {
  EXPECT_EQ(plain_sql(db_path(), "UPDATE gate_runs SET verdict = 'green'"), "gate_runs is append-only");
  EXPECT_EQ(plain_sql(db_path(), "DELETE FROM gate_runs"), "gate_runs is append-only");
  EXPECT_EQ(plain_sql(db_path(), "UPDATE gate_metrics SET value = 0"), "gate_metrics is append-only");
  EXPECT_EQ(plain_sql(db_path(), "DELETE FROM gate_cases"), "gate_cases is append-only");
  EXPECT_EQ(plain_sql(db_path(), "UPDATE experiments SET hypothesis = 'x'"), "experiments is append-only");
  EXPECT_EQ(plain_sql(db_path(), "DELETE FROM experiments"), "experiments is append-only");
}

TEST_F(LedgerInvariants, InsertOrReplaceCannotRewriteARecordedResult) {
  // REPLACE deletes the conflicting row without firing delete triggers.
  EXPECT_EQ(plain_sql(db_path(), "INSERT OR REPLACE INTO gate_runs(id, experiment_id, gate, gate_sha256, profile, seed, "
                                 "verdict, wall_s, harness_wall_s, started_at, finished_at) VALUES (" +
                                     std::to_string(gate_run_) + ", " + std::to_string(experiment_) +
                                     ", 'g', 'h', 'quick', '1', 'green', 0, 0, 'a', 'b')"),
            "gate_runs is append-only: this experiment already has a gate run");
  EXPECT_EQ(plain_sql(db_path(), "REPLACE INTO gate_cases(gate_run_id, case_index, case_label, case_json, verdict, "
                                 "reference_wall_s, candidate_wall_s) VALUES (" +
                                     std::to_string(gate_run_) + ", 0, 'x', '{}', 'green', 0, 0)"),
            "gate_cases is append-only: this case is recorded");
  EXPECT_EQ(plain_sql(db_path(), "INSERT OR REPLACE INTO gate_metrics(id, gate_case_id, output, metric, value, bound, passed) "
                                 "SELECT id, gate_case_id, output, metric, 0, bound, 1 FROM gate_metrics"),
            "gate_metrics is append-only: a row with this id exists");
  EXPECT_EQ(plain_sql(db_path(), "INSERT OR REPLACE INTO experiments SELECT * FROM experiments"),
            "experiments is append-only: a row with this id exists");
  Ledger ledger(db_path());
  EXPECT_EQ(ledger.show(experiment_)["gate_run"]["verdict"], "red");
}

TEST_F(LedgerInvariants, CalibrationsAndTheSchemaVersionCannotBeRewritten) {
  Ledger ledger(db_path());
  ledger.record_calibration({"g", std::string(64, 'a'), "n=1", "host", {{"p", 1}}, 20, 0.004, 0.0, nlohmann::json::array()});
  EXPECT_EQ(plain_sql(db_path(), "INSERT OR REPLACE INTO calibrations(id, gate, gate_sha256, case_label, host, params, "
                                 "comparisons, noise_floor, false_verdict_rate, verdicts, created_at) "
                                 "SELECT id, gate, gate_sha256, case_label, host, params, comparisons, 0.9, 0, verdicts, "
                                 "created_at FROM calibrations"),
            "calibrations is append-only: a row with this id exists");
  EXPECT_EQ(plain_sql(db_path(), "UPDATE calibrations SET noise_floor = 0.9"), "calibrations is append-only");
  EXPECT_DOUBLE_EQ(ledger.noise_floors("g", "host").at("n=1"), 0.004);
  EXPECT_EQ(plain_sql(db_path(), "DELETE FROM schema_info"), "schema_info changes only through densefeed migrations");
  EXPECT_EQ(plain_sql(db_path(), "UPDATE schema_info SET version = 99"), "schema_info changes only through densefeed migrations");
}

TEST_F(LedgerInvariants, EveryRowIsLinkedToAnExperiment) {
  EXPECT_EQ(plain_sql(db_path(), "INSERT INTO gate_runs(experiment_id, gate, gate_sha256, profile, seed, verdict, wall_s, "
                                 "harness_wall_s, started_at, finished_at) VALUES (999, 'g', 'h', 'q', '1', 'green', 0, 0, 'a', 'b')"),
            "gate_runs: no such experiment");
  EXPECT_EQ(plain_sql(db_path(), "INSERT INTO gate_metrics(gate_case_id, output, metric, value, bound, passed) "
                                 "VALUES (999, 'y', 'rel_l2', 0, 1, 1)"),
            "gate_metrics: no such gate case");
}

TEST_F(LedgerInvariants, VerdictsAreConstrained) {
  EXPECT_NE(plain_sql(db_path(),
                      "INSERT INTO experiments(name, manifest_path, manifest_text, manifest_sha256, hypothesis, "
                      "predicted_effect, gate, candidate_revision, candidate_params, base_revision, base_params, "
                      "submitted_at) VALUES ('x','p','t','short','h','p','g','W','{}','W','{}','now')"),
            "");
  EXPECT_NE(plain_sql(db_path(),
                      "INSERT INTO gate_runs(experiment_id, gate, gate_sha256, profile, seed, verdict, wall_s, "
                      "harness_wall_s, started_at, finished_at) VALUES (" +
                          std::to_string(experiment_) + ", 'g', 'h', 'quick', '1', 'greenish', 0, 0, 'a', 'b')"),
            "");
}

TEST_F(LedgerInvariants, ShowReturnsWhatWasRecorded) {
  Ledger ledger(db_path());
  const auto e = ledger.show(experiment_);
  EXPECT_EQ(e["name"], "cp-affine-chain-tf32");
  EXPECT_EQ(e["manifest_sha256"], manifest_.sha256);
  EXPECT_EQ(e["manifest_text"], manifest_.doc.text);
  EXPECT_EQ(e["gate_run"]["verdict"], "red");
  EXPECT_EQ(e["gate_run"]["seed"], "42");
  ASSERT_EQ(e["gate_run"]["cases"].size(), 1u);
  EXPECT_DOUBLE_EQ(e["gate_run"]["cases"][0]["metrics"][0]["value"].get<double>(), 3.6e-2);
  EXPECT_EQ(e["gate_run"]["cases"][0]["metrics"][0]["worst_index"], nlohmann::json({0, 0, 3, 7}));
  EXPECT_THROW(ledger.show(999), InputError);
  const auto list = ledger.list();
  ASSERT_EQ(list.size(), 1u);
  // The overall verdict is recorded with `finished`: until then the list
  // says pending, and the gate stage says red.
  EXPECT_EQ(list[0]["verdict"], "pending");
  EXPECT_EQ(list[0]["stages"]["gate"]["verdict"], "red") << list[0].dump();
  ledger.record_finished(experiment_, "run");
  EXPECT_EQ(ledger.list()[0]["verdict"], "red");
}

TEST_F(LedgerInvariants, ReopeningKeepsEverything) {
  { Ledger again(db_path()); }
  Ledger ledger(db_path());
  EXPECT_EQ(ledger.list().size(), 1u);
}

TEST_F(LedgerInvariants, NoTraceFindingOrAcceptanceOnARedGateThroughPlainSql) {
  EXPECT_EQ(plain_sql(db_path(), "INSERT INTO trace_findings(experiment_id, gate_run_id, arm, check_index, kind, check_json, passed) "
                                 "VALUES (" + std::to_string(experiment_) + ", " + std::to_string(gate_run_) + ", 'candidate', 0, 'overlap', '{}', 1)"),
            "trace_findings: the experiment has no green gate run");
  EXPECT_EQ(plain_sql(db_path(), "INSERT INTO acceptance_runs(experiment_id, promotion_id, verdict, wall_s, started_at, finished_at) "
                                 "VALUES (" + std::to_string(experiment_) + ", 1, 'pass', 1, 'a', 'b')"),
            "acceptance_runs: the experiment is not promoted or its gate is not green");
  EXPECT_EQ(plain_sql(db_path(), "INSERT INTO acceptance_criteria(acceptance_run_id, criterion_index, criterion, statistic, passed) "
                                 "VALUES (99, 0, 'x <= 1', 'median', 1)"),
            "acceptance_criteria: no such acceptance run");
}

TEST_F(LedgerInvariants, PromotionNeedsEveryDeclaredCategoryApprovedAndNoSlowerCase) {
  Ledger ledger(db_path());
  const auto green_id = ledger.record_experiment({&manifest_, {{"precision", "tf32x3"}}, {{"precision", "ieee"}}});
  GateResult green;
  const auto run = ledger.record_gate_run(green_id, {"cp-affine-chain", std::string(64, 'f'), {}, "quick", 1, utc_now(), &green});
  const std::string promote = "INSERT INTO promotions(experiment_id, promoted_by, promoted_at) VALUES (" + std::to_string(green_id) + ", 'x', 'now')";
  EXPECT_EQ(plain_sql(db_path(), promote), "promotions: the experiment has no green overall verdict (not finished, or a stage is not green)");
  ledger.record_finished(green_id, "run");  // green overall: now the other rules decide
  EXPECT_EQ(plain_sql(db_path(), promote), "promotions: a declared risk category has no approval");  // the manifest declares numerics
  EXPECT_EQ(plain_sql(db_path(), "INSERT INTO reviews(experiment_id, category, decision, reviewer, reviewed_at) VALUES (" +
                                     std::to_string(green_id) + ", 'production', 'approve', 'a', 'now')"),
            "reviews: the experiment does not exist or does not declare this risk category");
  EXPECT_EQ(plain_sql(db_path(), "INSERT INTO reviews(experiment_id, category, decision, reviewer, reviewed_at) VALUES (" +
                                     std::to_string(green_id) + ", 'numerics', 'approve', '', 'now')"),
            "CHECK constraint failed: length(reviewer) > 0");
  ledger.record_review(green_id, "numerics", "approve", "alice", "");
  ledger.record_review(green_id, "numerics", "reject", "bob", "on second thought");
  EXPECT_EQ(plain_sql(db_path(), promote), "promotions: a declared risk category has no approval");  // the latest decision counts
  ledger.record_review(green_id, "numerics", "approve", "bob", "");
  EXPECT_EQ(plain_sql(db_path(), bench_insert(green_id, run).replace(bench_insert(green_id, run).find("'faster'"), 8, "'slower'")), "");
  EXPECT_EQ(plain_sql(db_path(), promote), "promotions: a bench case of the experiment is slower");
  EXPECT_THROW(ledger.record_promotion(green_id, "carol"), InputError);
}

TEST_F(LedgerInvariants, PromotionOfACandidateTimedBenchmarkNeedsAPersonsAcceptance) {
  Ledger ledger(db_path());
  const auto id = ledger.record_experiment({&manifest_, {{"precision", "tf32x3"}}, {{"precision", "ieee"}}});
  GateResult green;
  const auto run = ledger.record_gate_run(id, {"cp-affine-chain", std::string(64, 'f'), {}, "quick", 1, utc_now(), &green});
  ledger.record_finished(id, "run");
  ledger.record_review(id, "numerics", "approve", "alice", "");
  EXPECT_EQ(plain_sql(db_path(), bench_insert(id, run, "candidate")), "");
  EXPECT_EQ(plain_sql(db_path(), bench_insert(id, run, "self")), "CHECK constraint failed: timing IN ('driver', 'candidate')");
  const std::string promote = "INSERT INTO promotions(experiment_id, promoted_by, promoted_at) VALUES (" + std::to_string(id) + ", 'x', 'now')";
  EXPECT_EQ(plain_sql(db_path(), promote),
            "promotions: the benchmark was timed by the candidate and no one accepted that (promote --accept-candidate-timing)");
  EXPECT_THROW(ledger.record_promotion(id, "carol"), InputError);
  EXPECT_EQ(plain_sql(db_path(), "INSERT INTO bench_acceptances(experiment_id, concern, accepted_by, accepted_at) VALUES (" +
                                     std::to_string(id) + ", 'anything', 'carol', 'now')"),
            "CHECK constraint failed: concern IN ('candidate_timing', 'speedup_beyond_bound', 'agent_base')");
  // Accepted in the same transaction as the promotion: recorded, linked, promoted.
  EXPECT_GT(ledger.record_promotion(id, "carol", {"candidate_timing"}), 0);
  EXPECT_EQ(plain_sql(db_path(), "DELETE FROM bench_acceptances"), "bench_acceptances is append-only");
}

TEST_F(LedgerInvariants, NewTablesAreAppendOnlyAndTheChainOnlyGrowsFromItsEnd) {
  Ledger ledger(db_path());
  // One row in each (row triggers do not fire on an empty table).
  const auto id = ledger.record_experiment({&manifest_, {{"precision", "tf32x3"}}, {{"precision", "ieee"}}});
  GateResult green;
  const auto run = ledger.record_gate_run(id, {"cp-affine-chain", std::string(64, 'f'), {}, "quick", 1, utc_now(), &green});
  ledger.record_trace_findings(id, run, {TraceFindingRecord{"candidate", 0, "overlap", {{"overlap", {}}}, true, 0.9, 0.5, {}, "t.json"}},
                               StageOutcome{"trace", StageVerdict::green, {}, "", 0.1, ""});
  ledger.record_stage(id, StageOutcome{"bench", StageVerdict::skipped, {}, "--no-bench", std::nullopt, ""});
  ledger.record_finished(id, "run");  // promotion needs the overall verdict (green here)
  ledger.record_review(id, "numerics", "approve", "alice", "");
  const auto promotion = ledger.record_promotion(id, "carol");
  ledger.record_acceptance(id, promotion, {"pass", "", {{"x", 1}}, 0.1, utc_now(), {{"x <= 1", "value", 1.0, 1.0, true}}});
  for (const char* table : {"experiment_events", "reviews", "promotions", "trace_findings", "acceptance_runs", "acceptance_criteria", "record_chain"}) {
    EXPECT_EQ(plain_sql(db_path(), std::string("DELETE FROM ") + table), std::string(table) + " is append-only") << table;
    EXPECT_EQ(plain_sql(db_path(), std::string("UPDATE ") + table + " SET rowid = rowid"), std::string(table) + " is append-only") << table;
  }
  EXPECT_EQ(plain_sql(db_path(), "INSERT INTO record_chain(experiment_id, table_name, row_id, columns, content_sha256, prev_hash, hash) "
                                 "VALUES (1, 'experiments', 999, '[]', '" + std::string(64, 'a') + "', 'forged', '" + std::string(64, 'b') + "')"),
            "record_chain: prev_hash must be the hash of the last link");
  EXPECT_EQ(plain_sql(db_path(), "INSERT INTO experiment_events(experiment_id, event, at) VALUES (999, 'queued', 'now')"),
            "experiment_events: no such experiment");
  EXPECT_TRUE(ledger.verify().ok);
}

TEST_F(LedgerInvariants, AnEventFromADeadOwnerIsRecoveredAccordingToWhoOwnedIt) {
  Ledger ledger(db_path());
  // experiment_ was recorded `started` by this (living) process: untouched.
  EXPECT_TRUE(ledger.recover_dead_owners().empty());
  EXPECT_EQ(to_string(ledger.state(experiment_)), std::string("started"));
  // A worker and a run that died: pid 1 is not this host's densefeed (its start time differs).
  const auto w = ledger.record_experiment({&manifest_, {{"precision", "tf32x3"}}, {{"precision", "ieee"}}}, ExperimentEvent::queued, "submit");
  const auto r = ledger.record_experiment({&manifest_, {{"precision", "tf32-rn"}}, {{"precision", "ieee"}}}, ExperimentEvent::queued, "submit");
  const auto host = current_process().host;
  for (const auto& [id, owner] : {std::pair{w, "worker"}, std::pair{r, "run"}}) {
    EXPECT_EQ(plain_sql(db_path(), "INSERT INTO experiment_events(experiment_id, event, owner, owner_host, owner_pid, owner_start, at) VALUES (" +
                                       std::to_string(id) + ", 'started', '" + owner + "', '" + host + "', 1, 'not-a-start-time', 'now')"),
              "");
  }
  // (rows inserted by plain SQL are not in the chain: verify says so)
  EXPECT_FALSE(ledger.verify().ok);
  const auto recovered = ledger.recover_dead_owners();
  ASSERT_EQ(recovered.size(), 2u);
  EXPECT_EQ(to_string(ledger.state(w)), std::string("requeued"));
  EXPECT_EQ(to_string(ledger.state(r)), std::string("interrupted"));
  EXPECT_EQ(to_string(ledger.state(experiment_)), std::string("started"));
}

TEST_F(LedgerInvariants, AHeartbeatBeatsOnlyWhileItsOwnerStillHoldsTheExperiment) {
  Ledger ledger(db_path());
  // experiment_ was recorded `started` by this process: its heartbeat came with it.
  const auto id = ledger.heartbeat_of(experiment_);
  ASSERT_NE(id, 0);
  const auto beats = [&] { return sql_one_value(db_path(), "SELECT beats FROM heartbeats WHERE id = " + std::to_string(id)); };
  EXPECT_EQ(beats(), "1");
  EXPECT_TRUE(ledger.beat(id));
  EXPECT_TRUE(ledger.beat(id));
  EXPECT_EQ(beats(), "3");
  // A beat moves its count and time, nothing else, and no row goes away.
  EXPECT_EQ(plain_sql(db_path(), "UPDATE heartbeats SET host = 'elsewhere' WHERE id = " + std::to_string(id)),
            "heartbeats: a beat only counts up and moves last_beat_at");
  EXPECT_EQ(plain_sql(db_path(), "UPDATE heartbeats SET beats = 1 WHERE id = " + std::to_string(id)),
            "heartbeats: a beat only counts up and moves last_beat_at");
  EXPECT_EQ(plain_sql(db_path(), "DELETE FROM heartbeats"), "heartbeats: rows are kept");
  EXPECT_EQ(plain_sql(db_path(), "INSERT INTO heartbeats(experiment_id, owner, started_event_id, host, pid, interval_s, first_beat_at, "
                                 "last_beat_at) VALUES (999, 'worker', 1, 'h', 1, 1, 'a', 'b')"),
            "heartbeats: no such started experiment or acceptance run");
  // Someone else took it for dead: the next beat says so and writes nothing.
  ledger.record_event(experiment_, ExperimentEvent::requeued, "worker", "judged dead elsewhere");
  EXPECT_FALSE(ledger.beat(id));
  EXPECT_EQ(beats(), "3");
  EXPECT_TRUE(ledger.verify().ok);  // heartbeats are not chained: beats do not break the chain
}

// A state is a value from the ledger to the printers: its text is the
// ledger's column value, JSON carries the name (never the enum's number),
// and any other text is no state.
TEST(ExperimentStates, EveryStateRoundTripsByNameAndOnlyTheQueueIsRunning) {
  int running = 0;
  for (int i = 0; i <= static_cast<int>(ExperimentState::recorded); ++i) {
    const auto s = static_cast<ExperimentState>(i);
    EXPECT_EQ(experiment_state_from(to_string(s)), s) << to_string(s);
    EXPECT_EQ(nlohmann::json(s), to_string(s));
    running += is_running(s);
  }
  EXPECT_EQ(running, 4);  // queued, requeued, started, cancel_requested
  EXPECT_TRUE(has_ended(ExperimentState::recorded));
  EXPECT_EQ(experiment_state_from("Started"), std::nullopt);
  EXPECT_EQ(experiment_state_from("finished (green)"), std::nullopt);
  EXPECT_EQ(to_string(state_after(ExperimentEvent::cancel_requested)), std::string("cancel_requested"));
}

}  // namespace
}  // namespace densefeed
