// One test per concern of the ledger (store/ledger_*.cpp: open, chain,
// queue, results, review, audit, export), through its public interface on a
// real SQLite file; plain SQL plays whoever edits the file outside densefeed.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "error.h"
#include "gate_store.h"
#include "ledger.h"
#include "manifest.h"
#include "project.h"
#include "test_support.h"
#include "plain_sql.h"

namespace densefeed {
namespace {

using testing::plain_sql;
using testing::sql_one_value;

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;


// What the constructor of a Ledger at `path` in `mode` throws as InputError ("" when it opens).
std::string open_refusal(const std::filesystem::path& path, Ledger::Mode mode) {
  try {
    Ledger ledger(path, mode);
  } catch (const InputError& e) {
    return e.message();
  }
  return "";
}

class LedgerConcerns : public ::testing::Test {
 protected:
  void SetUp() override {
    const Project project = load_project(kRoot);
    manifest_ = load_manifest(kRoot / "experiments" / "cp-affine-chain-tf32.yaml", worktree_store(project), project);
  }
  std::filesystem::path db_path() const { return dir_ / "ledger.db"; }
  std::int64_t submit(Ledger& ledger, const std::string& precision,
                      ExperimentEvent first = ExperimentEvent::queued) const {
    return ledger.record_experiment({&manifest_, {{"precision", precision}}, {{"precision", "ieee"}}}, first,
                                    first == ExperimentEvent::queued ? "submit" : "run");
  }
  // A gate run of `verdict` with no case, as `sandbox` ran it.
  std::int64_t gate_run(Ledger& ledger, std::int64_t experiment, Verdict verdict, const std::string& sandbox = "on",
                        const std::string& provenance = "{}") const {
    GateResult r;
    r.verdict = verdict;
    GateRunRecord record{"cp-affine-chain", std::string(64, 'f'), {}, "quick", 1, utc_now(), &r};
    record.sandbox = sandbox;
    record.provenance_json = provenance;
    return ledger.record_gate_run(experiment, record);
  }
  testing::TempDir dir_;
  Manifest manifest_;
};

// ledger_open.cpp: a schema object added outside densefeed is refused by a
// writer and a reader, and listed by audit's open.
TEST_F(LedgerConcerns, OpenRefusesASchemaEditedOutsideDensefeedAndAuditListsIt) {
  { Ledger ledger(db_path()); }
  EXPECT_EQ(open_refusal(db_path(), Ledger::Mode::read_write), "");
  ASSERT_EQ(plain_sql(db_path(), "CREATE VIEW extra AS SELECT 1"), "");
  const std::string writer = open_refusal(db_path(), Ledger::Mode::read_write);
  EXPECT_NE(writer.find("(view extra: not densefeed's (added));"), std::string::npos) << writer;
  EXPECT_NE(writer.find("so densefeed will not write to it"), std::string::npos) << writer;
  const std::string reader = open_refusal(db_path(), Ledger::Mode::read_only);
  EXPECT_NE(reader.find("so densefeed will not read it"), std::string::npos) << reader;
  Ledger audit(db_path(), Ledger::Mode::audit);
  EXPECT_EQ(audit.schema_differences(), std::vector<std::string>{"view extra: not densefeed's (added)"});

  // Not a ledger at all: refused before anything is written.
  const auto text = dir_ / "notes.db";
  std::ofstream(text) << "not a database, just some text that is long enough to have a header's size......................";
  EXPECT_EQ(open_refusal(text, Ledger::Mode::read_write), "not an SQLite database, so not a densefeed ledger");
  EXPECT_EQ(open_refusal(dir_ / "absent.db", Ledger::Mode::read_only),
            "no ledger here (it is created by the first 'densefeed run' or 'submit')");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "absent.db"));
}

// ledger_open.cpp: a reader that opens the ledger while another process is
// creating it (the file exists, empty, until the writer commits its schema)
// waits and reads the finished ledger; an empty file nobody fills is refused
// as one, after the wait (CI's service test read the empty file its worker
// was creating and called it another program's database).
TEST_F(LedgerConcerns, OpenWaitsForALedgerAnotherWriterIsCreating) {
  std::ofstream(db_path()).close();  // what sqlite3_open_v2 leaves before the schema's commit
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    Ledger ledger(db_path());
    submit(ledger, "tf32");
  });
  std::string refusal;
  try {
    Ledger reader(db_path(), Ledger::Mode::read_only);
    EXPECT_GT(reader.head().seq, 0);
  } catch (const InputError& e) {
    refusal = e.message();
  }
  writer.join();
  EXPECT_EQ(refusal, "");

  const auto empty = dir_ / "empty.db";
  std::ofstream(empty).close();
  EXPECT_EQ(open_refusal(empty, Ledger::Mode::read_only),
            "an empty SQLite file, not yet a densefeed ledger (waited 5 s for a run or submit creating it to finish)");
  EXPECT_EQ(std::filesystem::file_size(empty), 0u);  // the reader wrote nothing
}

// ledger_chain.cpp: verify finds a row edited by someone who set the
// append-only trigger aside and put it back; the head recorded earlier is
// extended by later links and not by a rewritten one.
TEST_F(LedgerConcerns, ChainVerifyFindsAnEditedRowAndExtendsTellsARewrittenHistory) {
  std::int64_t first = 0;
  ChainHead before;
  {
    Ledger ledger(db_path());
    first = submit(ledger, "tf32");
    before = ledger.head();
    submit(ledger, "tf32x3");
    const ChainCheck clean = ledger.verify();
    EXPECT_TRUE(clean.ok) << clean.problem;
    EXPECT_EQ(clean.links, ledger.head().seq);
    EXPECT_EQ(clean.head, ledger.head().hash);
    EXPECT_GT(ledger.head().seq, before.seq);
    EXPECT_EQ(ledger.extends(before), "");
    EXPECT_EQ(ChainHead::parse(before.text(), "test").hash, before.hash);
    ChainHead forged = before;
    forged.hash = std::string(64, '0');
    EXPECT_NE(ledger.extends(forged).find("the history was rewritten"), std::string::npos) << ledger.extends(forged);
    ChainHead beyond{ledger.head().seq + 5, std::string(64, 'a')};
    EXPECT_NE(ledger.extends(beyond).find("rows recorded after the expected head were deleted"), std::string::npos);
  }
  const std::string trigger = sql_one_value(db_path(), "SELECT sql FROM sqlite_schema WHERE name = 'experiments_no_update'");
  ASSERT_FALSE(trigger.empty());
  ASSERT_EQ(plain_sql(db_path(), "DROP TRIGGER experiments_no_update; UPDATE experiments SET author = 'mallory' WHERE id = " +
                                     std::to_string(first) + "; " + trigger),
            "");
  Ledger ledger(db_path(), Ledger::Mode::read_only);  // the schema is densefeed's again: it opens
  const ChainCheck edited = ledger.verify();
  EXPECT_FALSE(edited.ok);
  EXPECT_EQ(edited.table, "experiments");
  EXPECT_EQ(edited.row_id, first);
  EXPECT_EQ(edited.experiment_id, first);
  EXPECT_EQ(edited.problem, "the row was changed after it was recorded");
}

// ledger_queue.cpp: claim_next skips a cancelled experiment, takes the
// oldest queued one with its heartbeat and nonce, and never takes one twice.
TEST_F(LedgerConcerns, ClaimNextSkipsACancelledExperimentAndTakesTheOldestQueuedOnce) {
  Ledger ledger(db_path());
  const auto a = submit(ledger, "tf32");
  const auto b = submit(ledger, "tf32x3");
  const auto c = submit(ledger, "tf32-rn");
  EXPECT_EQ(ledger.state(a), ExperimentState::queued);
  EXPECT_EQ(ledger.cancel(a), ExperimentState::cancelled);
  EXPECT_THROW(ledger.cancel(a), InputError);  // already ended
  const auto claimed = ledger.claim_next("worker");
  ASSERT_TRUE(claimed);
  EXPECT_EQ(claimed->id, b);
  EXPECT_EQ(claimed->manifest_sha256, manifest_.sha256);
  EXPECT_EQ(claimed->manifest_text, manifest_.doc.text);
  EXPECT_EQ(ledger.state(b), ExperimentState::started);
  EXPECT_NE(claimed->heartbeat_id, 0);
  EXPECT_EQ(ledger.heartbeat_of(b), claimed->heartbeat_id);
  EXPECT_EQ(ledger.heartbeat_of(a), 0);
  const std::string nonce = ledger.run_nonce(b);
  EXPECT_EQ(nonce.size(), 32u);
  EXPECT_TRUE(ledger.nonce_issued(b, nonce));
  EXPECT_FALSE(ledger.nonce_issued(c, nonce));
  EXPECT_EQ(ledger.run_nonce(a), "");
  // A started one is asked to stop, not cancelled at once.
  EXPECT_EQ(ledger.cancel(b), ExperimentState::cancel_requested);
  const auto next = ledger.claim_next("worker");
  ASSERT_TRUE(next);
  EXPECT_EQ(next->id, c);
  EXPECT_FALSE(ledger.claim_next("worker"));
  EXPECT_EQ(ledger.state(a), ExperimentState::cancelled);
  EXPECT_TRUE(ledger.verify().ok);
}

// ledger_results.cpp: the overall verdict is the worst recorded stage
// (skipped ones do not count), and one without a gate stage is an error.
TEST_F(LedgerConcerns, TheOverallVerdictIsTheWorstRecordedStage) {
  Ledger ledger(db_path());
  const auto red = submit(ledger, "tf32", ExperimentEvent::started);
  gate_run(ledger, red, Verdict::green);
  ledger.record_stage(red, StageOutcome{"trace", StageVerdict::skipped, {}, "no trace", std::nullopt, ""});
  ledger.record_stage(red, StageOutcome{"bench", StageVerdict::red, {}, "a case is slower", 2.5, ""});
  try {
    ledger.record_stage(red, StageOutcome{"bench", StageVerdict::green, {}, "", std::nullopt, ""});
    ADD_FAILURE() << "a stage was recorded twice";
  } catch (const InputError& e) {
    EXPECT_EQ(e.message(), "stage_outcomes: this stage of the experiment is recorded");
  }
  EXPECT_EQ(ledger.summary(red).verdict, "pending");
  EXPECT_EQ(ledger.record_finished(red, "run"), "red");
  const ExperimentSummary s = ledger.summary(red);
  EXPECT_EQ(s.verdict, "red");
  EXPECT_EQ(s.verdict_stage, "bench");
  EXPECT_EQ(s.reason, "a case is slower");
  EXPECT_EQ(s.stage("gate").verdict, StageVerdict::green);
  EXPECT_EQ(s.stage("trace").verdict, StageVerdict::skipped);
  EXPECT_EQ(s.stage("bench").wall_s, std::optional<double>(2.5));
  EXPECT_EQ(ledger.state(red), ExperimentState::finished);

  const auto green = submit(ledger, "tf32x3", ExperimentEvent::started);
  gate_run(ledger, green, Verdict::green);
  ledger.record_stage(green, StageOutcome{"bench", StageVerdict::skipped, {}, "--no-bench", std::nullopt, ""});
  EXPECT_EQ(ledger.record_finished(green, "run"), "green");
  EXPECT_EQ(ledger.summary(green).reason, "");

  const auto no_gate = submit(ledger, "tf32-rn", ExperimentEvent::started);
  EXPECT_EQ(ledger.record_finished(no_gate, "run"), "error");
  EXPECT_EQ(ledger.summary(no_gate).verdict_stage, "gate");
  EXPECT_EQ(ledger.summary(no_gate).reason, "no gate stage was recorded");
}

// ledger_review.cpp: an acceptance run is started once while its promote
// lives, and its end is the acceptance stage; review_state shows it all.
TEST_F(LedgerConcerns, AnAcceptanceRunStartsOnceWhileItsPromoteLivesAndEndsAsItsStage) {
  Ledger ledger(db_path());
  const auto id = submit(ledger, "tf32", ExperimentEvent::started);
  gate_run(ledger, id, Verdict::green);
  ledger.record_finished(id, "run");
  EXPECT_THROW(ledger.record_promotion(id, "carol"), InputError);  // numerics is declared and not approved
  ledger.record_review(id, "numerics", "approve", "alice", "checked the error trend");
  const auto promotion = ledger.record_promotion(id, "carol");
  EXPECT_EQ(ledger.acceptance_stage(id), "");
  EXPECT_NE(ledger.record_acceptance_start(id), 0);
  EXPECT_EQ(ledger.acceptance_stage(id), "started");
  const auto running = ledger.running_acceptances(id);
  ASSERT_EQ(running.size(), 1u);
  EXPECT_TRUE(running[0].alive) << running[0].owner;
  try {
    ledger.record_acceptance_start(id);
    ADD_FAILURE() << "a second acceptance run started while the first one's promote lives";
  } catch (const InputError& e) {
    EXPECT_NE(e.message().find("is still running"), std::string::npos) << e.message();
  }
  ledger.record_acceptance(id, promotion, {"pass", "", {{"x", 1}}, 0.1, utc_now(), {{"x <= 1", "value", 1.0, 1.0, true}}});
  EXPECT_EQ(ledger.acceptance_stage(id), "green");
  EXPECT_TRUE(ledger.running_acceptances(id).empty());
  const auto review = ledger.review_state(id);
  EXPECT_EQ(review["categories"]["numerics"], "approve");
  EXPECT_EQ(review["reviews"].size(), 1u);
  EXPECT_EQ(review["promotion"]["promoted_by"], "carol");
  ASSERT_EQ(review["acceptance_runs"].size(), 1u);
  EXPECT_EQ(review["acceptance_runs"][0]["verdict"], "pass");
  EXPECT_EQ(review["acceptance_runs"][0]["criteria"][0]["passed"], true);
}

// ledger_audit.cpp: a green gate run without the sandbox or from another
// ref is named; a tamper event is acknowledged once, by someone.
TEST_F(LedgerConcerns, AuditNamesUnsandboxedAndUntrustedGreenRunsAndTamperIsAcknowledgedOnce) {
  Ledger ledger(db_path());
  const auto a = submit(ledger, "tf32", ExperimentEvent::started);
  const auto b = submit(ledger, "tf32x3", ExperimentEvent::started);
  const auto unsandboxed = gate_run(ledger, a, Verdict::green, "off: --no-sandbox");
  const auto other_ref = gate_run(ledger, b, Verdict::green, "on", R"({"trusted_ref": "feature"})");
  EXPECT_TRUE(ledger.results_without_green_gate().empty());
  EXPECT_TRUE(ledger.promotion_violations().empty());
  EXPECT_EQ(ledger.unsandboxed_green_results(),
            std::vector<std::string>{fmt::format("gate run {} of experiment {} is green without the sandbox (off: --no-sandbox); 0 "
                                                 "bench case(s), 0 trace finding(s), 0 acceptance run(s) rest on it",
                                                 unsandboxed, a)});
  EXPECT_EQ(ledger.green_results_not_from("main"),
            std::vector<std::string>{fmt::format("gate run {} of experiment {} is green with gates from the ref 'feature', not the "
                                                 "trusted ref 'main'", other_ref, b)});
  EXPECT_TRUE(ledger.green_results_not_from("feature").empty());

  const auto event = ledger.record_tamper({TamperKind::export_changed, "/x/kernel.cu", "bytes differ", std::string(40, 'c')});
  ASSERT_EQ(ledger.tamper_events(true).size(), 1u);
  EXPECT_THROW(ledger.acknowledge_tamper(event, "", "no one"), InputError);
  EXPECT_THROW(ledger.acknowledge_tamper(event + 1, "dora", ""), InputError);
  ledger.acknowledge_tamper(event, "dora", "rebuilt the export");
  EXPECT_TRUE(ledger.tamper_events(true).empty());
  const auto all = ledger.tamper_events();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].kind, "export_changed");
  EXPECT_EQ(all[0].acknowledged_by, "dora");
  EXPECT_TRUE(all[0].acknowledged());
  EXPECT_THROW(ledger.acknowledge_tamper(event, "erin", ""), InputError);  // once
  EXPECT_TRUE(ledger.verify().ok);
}

// ledger_export.cpp: list filters by verdict and state, rows and columns
// read a table or view and refuse any other name, export holds every table.
TEST_F(LedgerConcerns, ExportListsFiltersAndReadsOnlyTablesAndViews) {
  Ledger ledger(db_path());
  const auto red = submit(ledger, "tf32", ExperimentEvent::started);
  gate_run(ledger, red, Verdict::red);
  ledger.record_finished(red, "run");
  const auto queued = submit(ledger, "tf32x3");
  ASSERT_EQ(ledger.list().size(), 2u);
  const auto reds = ledger.list({"", "red", ""});
  ASSERT_EQ(reds.size(), 1u);
  EXPECT_EQ(reds[0]["id"], red);
  const auto waiting = ledger.list({"", "queued", ""});
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0]["id"], queued);
  EXPECT_TRUE(ledger.list({"another-gate", "", ""}).empty());
  EXPECT_THROW(ledger.summary(queued + 1), InputError);

  EXPECT_EQ(ledger.columns("experiments").front(), "id");
  EXPECT_EQ(ledger.rows("experiments").size(), 2u);
  EXPECT_EQ(ledger.rows("experiment_events").size(), 3u);  // started, finished; queued
  try {
    ledger.rows("experiments; DROP TABLE experiments");
    ADD_FAILURE() << "rows read a name that is no table or view";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--table");
  }
  const auto all = ledger.export_tables();
  EXPECT_EQ(all["experiments"].size(), 2u);
  EXPECT_EQ(static_cast<std::int64_t>(all["record_chain"].size()), ledger.head().seq);
  const auto shown = ledger.show(red);
  EXPECT_EQ(shown["state"], "finished");
  EXPECT_EQ(shown["gate_run"]["verdict"], "red");
  EXPECT_EQ(shown["record"]["verdict"], "red");
}

}  // namespace
}  // namespace densefeed
