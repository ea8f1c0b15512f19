// Issue 15, "the ledger tells the truth", through the real CLI and plain
// sqlite3 in a project of its own: a red benchmark is listed red, refused
// promotion by the database and caught by audit once the triggers are gone;
// failures are values the next steps read (crash, exit code, timeout from a
// real harness); an editor of the file who lacks the key cannot re-seal an
// edit, append a row, cut the last rows (against a head kept outside),
// redefine a view or drop a trigger without audit failing and readers
// refusing; bad input names the value.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::string kExe = DENSEFEED_EXE;
const std::string kCheat = CHEAT_HARNESS_EXE;

std::string gate_yaml() {
  return R"(gate: cheat
description: y_i = scale * sin(seed / 1000 + i), float32 against a float64 reference.
reference:
  command: [)" + kCheat + R"(, --role, reference, --n, "{case.n}", --scale, "1", --seed, "{seed}", --out, "{out}"]
candidate:
  command: [)" + kCheat + R"(, --role, candidate, --mode, "{param.mode}", --n, "{case.n}", --scale, "1", --seed, "{seed}", --out, "{out}"]
params:
  mode: {type: string, enum: [honest, crash, hang, exit-nonzero, bench-differs, zeros], default: honest}
outputs:
  y:
    dtype: float32
    reference_dtype: float64
    shape: ["{case.n}"]
    tolerance: {rel_l2: 1.0e-5, max_abs: 1.0e-5}
cases:
  grid:
    - {n: [64]}
profiles:
  quick: {}
  full: {}
timeout_s: 2
freezes: []
bench:
  warmup: 1
  iters: 3
  cases: [{n: 64}]
)";
}

class LedgerTruth : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_ / "project";
    std::filesystem::create_directories(repo_);
    ASSERT_EQ(testing::locked_project(repo_, {{"gates/cheat.yaml", gate_yaml()}}, kExe, env()), "");
  }
  std::map<std::string, std::string> env() const {
    return testing::project_env(dir_ / "home");
  }
  testing::CliResult df(std::vector<std::string> args) const { return testing::run_cli(kExe, args, repo_, env()); }
  // A shell command in the project (git, sqlite3): its stdout; fails the test on a non-zero exit.
  std::string sh(const std::string& command, bool must_succeed = true) const {
    const auto r = testing::run_cli("/bin/sh", {"-c", command}, repo_, env());
    if (must_succeed) EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.out << r.err;
    return r.out + r.err;
  }
  std::string db() const { return (repo_ / ".densefeed" / "ledger.db").string(); }
  std::string sql(const std::string& statements, bool must_succeed = true) const {
    testing::write_file(dir_ / "edit.sql", statements);
    return sh("sqlite3 " + db() + " < " + (dir_ / "edit.sql").string(), must_succeed);
  }
  // Runs a manifest with candidate `mode`; returns the exit code.
  int run(const std::string& mode, bool bench = false, const std::string& extra = "") {
    const auto m = dir_ / (mode + ".yaml");
    testing::write_file(m, "experiment: " + mode + "\nhypothesis: h\npredicted_effect: p\ngate: cheat\n"
                           "candidate: {revision: WORKTREE, params: {mode: " + mode + "}}\n"
                           "base: {revision: WORKTREE, params: {mode: " + (mode == "honest" ? "zeros" : "honest") + "}}\n" + extra);
    std::vector<std::string> args = {"run", m.string(), "--json"};
    if (!bench) args.push_back("--no-bench");
    const auto r = df(args);
    last_ = r.out + r.err;
    return r.exit_code;
  }
  J json(const std::vector<std::string>& args, int expected_exit) const {
    auto a = args;
    a.push_back("--json");
    const auto r = df(a);
    EXPECT_EQ(r.exit_code, expected_exit) << a.front() << "\n" << r.out << r.err;
    return J::parse(r.out, nullptr, false);
  }

  testing::TempDir dir_;
  std::filesystem::path repo_;
  std::string last_;
};

TEST_F(LedgerTruth, ARedBenchmarkIsListedRedRefusedPromotionAndCaughtByAudit) {
  ASSERT_EQ(run("bench-differs", true, "acceptance: {command: [\"true\"], criteria: ['x <= 1']}\n"), 1) << last_;
  const J list = json({"ledger", "list"}, 0);
  ASSERT_EQ(list.size(), 1u) << list.dump();
  EXPECT_EQ(list[0]["state"], "finished");
  EXPECT_EQ(list[0]["verdict"], "red") << "a red benchmark was listed as green";
  EXPECT_EQ(list[0]["verdict_stage"], "bench");
  EXPECT_EQ(list[0]["stages"]["gate"]["verdict"], "green");
  EXPECT_EQ(list[0]["stages"]["bench"]["verdict"], "red");
  EXPECT_EQ(list[0]["stages"]["bench"]["failure"]["who"], "candidate");
  EXPECT_EQ(list[0]["speedups"], J::array()) << "a speedup of a failed benchmark was printed";
  // status agrees with list: the same record, and exit 1.
  const J status = json({"status", "1"}, 1);
  EXPECT_EQ(status["verdict"], "red");
  EXPECT_EQ(status["record"], list[0]);
  EXPECT_EQ(status["stages"]["bench"]["status"], "red");
  // The verb refuses, and so does the database for anyone who skips the verb.
  const auto promote = df({"promote", "1", "--by", "someone"});
  EXPECT_EQ(promote.exit_code, 1) << promote.out << promote.err;
  EXPECT_NE(promote.out.find("bench stage"), std::string::npos) << promote.out;
  const auto direct = sql("INSERT INTO promotions(experiment_id, promoted_by, promoted_at) VALUES (1, 'x', 'now');", false);
  EXPECT_NE(direct.find("promotions: the experiment has no green overall verdict"), std::string::npos) << direct;
  EXPECT_EQ(df({"audit"}).exit_code, 0) << df({"audit"}).out;
  // Each trigger holds on its own: without the overall-verdict one, the
  // bench stage's still refuses.
  const auto second = sql("DROP TRIGGER promotions_need_green_outcome;"
                          "INSERT INTO promotions(experiment_id, promoted_by, promoted_at) VALUES (1, 'x', 'now');", false);
  EXPECT_NE(second.find("bench stage is not green"), std::string::npos) << second;
  // An editor drops the triggers and promotes: audit fails on the promotion
  // and on the missing triggers, and readers refuse the file.
  sql("DROP TRIGGER promotions_need_green_bench_stage;"
      "INSERT INTO promotions(experiment_id, promoted_by, promoted_at) VALUES (1, 'x', 'now');");
  const auto audit = df({"audit"});
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;
  EXPECT_NE(audit.out.find("promotion 1 of experiment 1: its overall verdict is red"), std::string::npos) << audit.out;
  EXPECT_NE(audit.out.find("trigger promotions_need_green_bench_stage: missing"), std::string::npos) << audit.out;
  const auto list_after = df({"ledger", "list"});
  EXPECT_EQ(list_after.exit_code, 2) << list_after.out << list_after.err;
  EXPECT_NE(list_after.err.find("promotions_need_green"), std::string::npos) << list_after.err;
}

TEST_F(LedgerTruth, CrashExitAndTimeoutAreValuesTheNextStepsRead) {
  struct Want {
    std::string mode, kind, next;
  };
  const std::vector<Want> wants = {{"crash", "crash", "under a debugger or with sanitizers (the candidate was killed by signal 11 (SIGSEGV))"},
                                   {"exit-nonzero", "exit_code", "read the candidate's stderr for case n=64"},
                                   {"hang", "timeout", "without the gate's 2 s limit"}};
  std::int64_t id = 0;
  for (const auto& w : wants) {
    ASSERT_EQ(run(w.mode), 1) << w.mode << last_;
    ++id;
    const J show = json({"ledger", "show", std::to_string(id)}, 0);
    const auto& c = show["gate_run"]["cases"][0];
    EXPECT_EQ(c["failure_kind"], w.kind) << w.mode << c.dump();
    EXPECT_EQ(c["failure_who"], "candidate") << w.mode;
    if (w.kind == "crash") EXPECT_EQ(c["failure_signal"], 11);
    if (w.kind == "exit_code") EXPECT_EQ(c["failure_exit_code"], 7);
    EXPECT_EQ(show["record"]["stages"]["gate"]["failure"]["kind"], w.kind) << w.mode;
    const J status = json({"status", std::to_string(id)}, 1);
    bool found = false;
    for (const auto& s : status["next"]) found = found || s["suggestion"].get<std::string>().find(w.next) != std::string::npos;
    EXPECT_TRUE(found) << w.mode << ": " << status["next"].dump(1);
  }
}

TEST_F(LedgerTruth, AnEditorWithoutTheKeyIsDetected) {
  ASSERT_EQ(run("honest"), 0) << last_;
  ASSERT_EQ(run("crash"), 1) << last_;
  const auto head = df({"ledger", "head"});
  ASSERT_EQ(head.exit_code, 0) << head.err;
  const std::string h = head.out.substr(0, head.out.find('\n'));
  ASSERT_EQ(df({"audit", "--expect-head", h}).exit_code, 0);
  testing::write_file(dir_ / "head", h + "\n");
  const auto key_dir = dir_ / "home" / ".config" / "densefeed" / "keys";
  ASSERT_TRUE(std::filesystem::is_directory(key_dir)) << "the key is not outside the ledger's folder";
  for (const auto& k : std::filesystem::directory_iterator(key_dir)) {
    EXPECT_EQ(std::filesystem::status(k).permissions() & std::filesystem::perms::group_all, std::filesystem::perms::none);
  }
  // Back up first: each attack starts from the intact ledger.
  ASSERT_EQ(df({"ledger", "backup", (dir_ / "clean.db").string()}).exit_code, 0);
  const auto restore = [&] {
    std::filesystem::remove(db() + "-wal");
    std::filesystem::remove(db() + "-shm");
    std::filesystem::copy_file(dir_ / "clean.db", db(), std::filesystem::copy_options::overwrite_existing);
    ASSERT_EQ(df({"audit", "--expect-head", h}).exit_code, 0) << "the backup is not the ledger";
  };
  // 1. The last rows cut off, every trigger put back as it was: the chain
  //    that is left verifies, the head kept outside does not.
  const std::string keep = sh("sqlite3 " + db() + " \"SELECT sql || ';' FROM sqlite_schema WHERE type = 'trigger' AND name IN "
                              "('experiment_events_no_delete', 'record_chain_no_delete')\"");
  sql("DROP TRIGGER experiment_events_no_delete; DROP TRIGGER record_chain_no_delete;"
      "DELETE FROM experiment_events WHERE id = (SELECT MAX(id) FROM experiment_events);"
      "DELETE FROM record_chain WHERE seq = (SELECT MAX(seq) FROM record_chain);" + keep);
  EXPECT_EQ(df({"ledger", "verify"}).exit_code, 0) << "the cut is only visible against the head";
  auto a = df({"audit", "--expect-head", h});
  EXPECT_EQ(a.exit_code, 1) << a.out;
  EXPECT_NE(a.out.find("rows recorded after the expected head were deleted"), std::string::npos) << a.out;
  EXPECT_EQ(df({"audit", "--head-file", (dir_ / "head").string()}).exit_code, 1);
  restore();
  // 2. A row appended with a link computed as version 2 did (unkeyed sha256).
  sql("DROP TRIGGER experiment_events_no_replace;"
      "INSERT INTO experiment_events(experiment_id, event, at) VALUES (2, 'finished', 'now');"
      "INSERT INTO record_chain(experiment_id, table_name, row_id, columns, content_sha256, prev_hash, hash) "
      "SELECT 2, 'experiment_events', (SELECT MAX(id) FROM experiment_events), '[\"id\"]', printf('%064d', 0), hash, printf('%064d', 1) "
      "FROM record_chain ORDER BY seq DESC LIMIT 1;");
  a = df({"audit"});
  EXPECT_EQ(a.exit_code, 1) << a.out;
  EXPECT_EQ(df({"ledger", "show", "2"}).exit_code, 2);
  restore();
  // 3. A view redefined to show red as green: no row changes, the schema does.
  sql("DROP VIEW experiment_verdicts; CREATE VIEW experiment_verdicts AS SELECT e.id AS experiment_id, "
      "CASE WHEN 1 THEN 'green' END AS verdict FROM experiments e;");
  const auto listed = df({"ledger", "list", "--json"});
  EXPECT_EQ(listed.exit_code, 2) << listed.out;
  EXPECT_NE(listed.err.find("view experiment_verdicts: redefined"), std::string::npos) << listed.err;
  a = df({"audit"});
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_NE(a.out.find("view experiment_verdicts: redefined"), std::string::npos) << a.out;
  restore();
  // 4. A redefined experiment_states view cannot make a worker loop: it is refused.
  sql("DROP VIEW experiment_states; CREATE VIEW experiment_states AS SELECT id AS experiment_id, 'queued' AS state FROM experiments;");
  const auto worker = df({"worker", "--once", "--gpus", "none"});
  EXPECT_EQ(worker.exit_code, 2) << worker.out << worker.err;
  EXPECT_EQ(std::stoi(sh("sqlite3 " + db() + " \"SELECT COUNT(*) FROM experiment_events WHERE event = 'started'\"")), 2);
  restore();
  // 5. A dropped trigger alone.
  sql("DROP TRIGGER bench_cases_require_green_gate;");
  a = df({"audit"});
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_NE(a.out.find("trigger bench_cases_require_green_gate: missing"), std::string::npos) << a.out;
  EXPECT_EQ(df({"promote", "1"}).exit_code, 2);
  restore();
  // 6. A row edited, its content hash and every link recomputed as version 2
  //    did (sha256, no key), the triggers put back: only the key tells.
  testing::write_file(dir_ / "reseal.py", R"py(import sqlite3, hashlib, json, sys
db = sqlite3.connect(sys.argv[1])
keep = [r[0] for r in db.execute("SELECT sql FROM sqlite_schema WHERE name IN ('record_chain_no_update', 'experiments_no_update')")]
db.execute("DROP TRIGGER record_chain_no_update"); db.execute("DROP TRIGGER experiments_no_update")
db.execute("UPDATE experiments SET hypothesis = 'edited' WHERE id = 2")
def typed(v):
    if v is None: return b'n;'
    if isinstance(v, int): return b'i%d;' % v
    if isinstance(v, float): return ('r%s;' % repr(v)).encode()
    b = v.encode(); return b't%d:' % len(b) + b + b';'
prev = ''
for seq, t, row, cols, content in db.execute("SELECT seq, table_name, row_id, columns, content_sha256 FROM record_chain ORDER BY seq").fetchall():
    if t == 'experiments' and row == 2:
        cs = json.loads(cols)
        r = db.execute('SELECT %s FROM "%s" WHERE id = ?' % (','.join('"%s"' % c for c in cs), t), (row,)).fetchone()
        content = hashlib.sha256(b''.join(typed(x) for x in r)).hexdigest()
    h = hashlib.sha256(('%s\n%s\n%d\n%s' % (prev, t, row, content)).encode()).hexdigest()
    db.execute("UPDATE record_chain SET content_sha256 = ?, prev_hash = ?, hash = ? WHERE seq = ?", (content, prev, h, seq))
    prev = h
for k in keep: db.execute(k)
db.commit()
)py");
  sh("python3 " + (dir_ / "reseal.py").string() + " " + db());
  a = df({"audit"});
  EXPECT_EQ(a.exit_code, 1) << a.out;
  EXPECT_NE(a.out.find("ok   schema objects"), std::string::npos) << "the attack left the schema as it was: " << a.out;
  EXPECT_NE(a.out.find("the link's hash does not match its content"), std::string::npos) << a.out;
  EXPECT_EQ(df({"ledger", "show", "2"}).exit_code, 2);
  restore();
}

TEST_F(LedgerTruth, BadInputNamesTheValueAndStatusHasAnExitOfItsOwnWhileQueued) {
  ASSERT_EQ(run("honest"), 0) << last_;
  auto r = df({"ledger", "list", "--since", "2026-13-45"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("2026-13-45"), std::string::npos) << r.err;
  EXPECT_EQ(df({"ledger", "list", "--since", "2026-02-30"}).exit_code, 2);
  EXPECT_EQ(df({"ledger", "list", "--since", "2026-11-29T20:00"}).exit_code, 0);
  r = df({"ledger", "list", "--verdict", "purple"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'purple'"), std::string::npos) << r.err;
  EXPECT_EQ(json({"ledger", "list", "--verdict", "green"}, 0).size(), 1u);
  EXPECT_EQ(json({"ledger", "list", "--verdict", "red"}, 0).size(), 0u);
  const auto m = dir_ / "honest.yaml";
  const auto submit = df({"submit", m.string()});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  EXPECT_EQ(df({"status", "2"}).exit_code, 4) << "a queued experiment exits like a verdict";
}

}  // namespace
}  // namespace densefeed
