// The ledger engineers review and the queue agents submit to, through the
// real CLI: real processes (killed with SIGKILL where the test says so), a
// real SQLite file, and plain SQL to check what was recorded.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <chrono>
#include <regex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sha256.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;
const std::string kWriter = LEDGER_WRITER_EXE;
// cheat_harness is the build's, named bare in the gate: on PATH for every
// densefeed this test starts.
const std::map<std::string, std::string> kEnv = testing::with_on_path(std::filesystem::path(kExe).parent_path());

// One case, no benchmark: the queue's tests run hundreds of experiments.
const char* kGate = R"(gate: quick
description: y_i = scale * sin(seed / 1000 + i), float32 against a float64 reference.
reference:
  command: [cheat_harness, --role, reference, --n, "{case.n}", --seed, "{seed}", --out, "{out}"]
candidate:
  command: [cheat_harness, --role, candidate, --mode, "{param.mode}", --n, "{case.n}",
            --slowdown, "{param.slowdown}", --seed, "{seed}", --out, "{out}"]
params:
  mode: {type: string, enum: [honest, zeros, hang, crash], default: honest}
  slowdown: {type: number, default: 1}
outputs:
  y:
    dtype: float32
    reference_dtype: float64
    shape: ["{case.n}"]
    tolerance: {rel_l2: 1.0e-5}
cases:
  grid:
    - {n: [64]}
profiles:
  quick: {}
  full: {}
timeout_s: 120
freezes: []
)";

// Runs `sql` on its own connection; returns the first column of each row.
std::vector<std::string> sql_rows(const std::filesystem::path& db_path, const std::string& sql, std::string* error = nullptr) {
  sqlite3* db = nullptr;
  sqlite3_open(db_path.c_str(), &db);
  sqlite3_busy_timeout(db, 30'000);
  std::vector<std::string> rows;
  char* message = nullptr;
  const int rc = sqlite3_exec(
      db, sql.c_str(),
      [](void* out, int, char** values, char**) {
        static_cast<std::vector<std::string>*>(out)->push_back(values[0] ? values[0] : "NULL");
        return 0;
      },
      &rows, &message);
  if (error) *error = rc == SQLITE_OK ? "" : (message ? message : "?");
  sqlite3_free(message);
  sqlite3_close(db);
  return rows;
}

std::string sql_one(const std::filesystem::path& db, const std::string& sql) {
  const auto rows = sql_rows(db, sql);
  return rows.empty() ? "" : rows[0];
}

// A process started in the background, killed and reaped by the test.
class Background {
 public:
  explicit Background(std::vector<std::string> argv, const std::filesystem::path& log) {
    // The environment with kEnv's PATH, made before fork (the child only execs).
    std::vector<std::string> env_text;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string_view(*e).rfind("PATH=", 0) != 0) env_text.emplace_back(*e);
    }
    env_text.push_back("PATH=" + kEnv.at("PATH"));
    std::vector<char*> envp;
    for (auto& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execve(args[0], args.data(), envp.data());
      _exit(127);
    }
  }
  ~Background() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  void kill9() {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = 0;
};

class LedgerEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    // A project in a plain folder (no git): its gates are trusted as they are.
    root_ = dir_ / "root";
    testing::write_project(root_);
    testing::write_file(root_ / "gates" / "quick.yaml", kGate);
    ASSERT_EQ(densefeed({"gate", "lock"}).exit_code, 0);
  }
  testing::CliResult densefeed(std::vector<std::string> args) {
    args.insert(args.begin(), {"--project", root_.string(), "--trust-worktree"});
    return testing::run_cli(kExe, args, dir_.path(), kEnv);
  }
  std::vector<std::string> argv(std::vector<std::string> args) {
    args.insert(args.begin(), {kExe, "--project", root_.string(), "--trust-worktree"});
    return args;
  }
  // Writes a manifest; `extra` is appended as YAML.
  std::filesystem::path manifest(const std::string& name, const std::string& mode, const std::string& extra = "") {
    const auto path = dir_ / (name + ".yaml");
    testing::write_file(path, "experiment: " + name + "\nhypothesis: h\npredicted_effect: p\ngate: quick\n" +
                                  "candidate: {revision: WORKTREE, params: {mode: " + mode + "}}\n" +
                                  "base: {revision: WORKTREE, params: {mode: honest, slowdown: 2}}\n" + extra);
    return path;
  }
  std::filesystem::path ledger() const { return dir_ / "ledger.db"; }
  std::string L() const { return ledger().string(); }
  // Polls until `sql` returns `want` (or 60 s pass).
  bool wait_for(const std::string& sql, const std::string& want) {
    for (int i = 0; i < 600; ++i) {
      if (std::filesystem::exists(ledger()) && sql_one(ledger(), sql) == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  std::string state(int id) { return sql_one(ledger(), "SELECT state FROM experiment_states WHERE experiment_id = " + std::to_string(id)); }
  std::string events(int id) {
    std::string out;
    for (const auto& e : sql_rows(ledger(), "SELECT event FROM experiment_events WHERE experiment_id = " + std::to_string(id) + " ORDER BY id")) {
      out += (out.empty() ? "" : ",") + e;
    }
    return out;
  }
  // True once no process has `text` in its command line (polls for 10 s).
  static bool no_process_mentions(const std::string& text) {
    for (int i = 0; i < 100; ++i) {
      if (testing::run_cli("/usr/bin/pgrep", {"-f", text}, "/").out.empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    testing::run_cli("/usr/bin/pkill", {"-9", "-f", text}, "/");
    return false;
  }
  testing::TempDir dir_;
  std::filesystem::path root_;
};

TEST_F(LedgerEndToEnd, SubmitQueuesAtOnceAndRefusesBadInputWithNothingQueued) {
  const auto good = manifest("good", "honest");
  const auto bad = dir_ / "bad.yaml";
  testing::write_file(bad, "experiment: bad\nhypothesis: h\npredicted_effect: p\ngate: quick\n"
                           "candidate: {revision: WORKTREE, params: {mode: sneaky}}\nbase: {revision: WORKTREE}\n");
  const auto refused = densefeed({"submit", good.string(), bad.string(), "--ledger", L(), "--json"});
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("bad.yaml:5"), std::string::npos) << refused.err;
  EXPECT_FALSE(std::filesystem::exists(ledger()));

  const auto ok = densefeed({"submit", good.string(), "--ledger", L(), "--json"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const auto doc = nlohmann::json::parse(ok.out);
  EXPECT_EQ(doc["experiment_id"], 1);
  EXPECT_EQ(doc["state"], "queued");
  EXPECT_EQ(state(1), "queued");
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM gate_runs"), "0");
  const auto status = densefeed({"status", "1", "--ledger", L(), "--json"});
  EXPECT_EQ(status.exit_code, 4) << status.out << status.err;  // not ended yet (experiment_summary.h kExitNotEnded)
  EXPECT_EQ(nlohmann::json::parse(status.out)["state"], "queued");
  // An operator's typo takes nothing from the queue.
  const auto typo = densefeed({"worker", "--profile", "nope", "--once", "--ledger", L()});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("has a profile named 'nope'"), std::string::npos) << typo.err;
  EXPECT_EQ(state(1), "queued");
}

TEST_F(LedgerEndToEnd, EightConcurrentSubmittersThenTwoWorkersRunEveryExperimentExactlyOnce) {
  std::vector<std::unique_ptr<Background>> submitters;
  for (int p = 0; p < 8; ++p) {
    std::vector<std::string> args = {"submit", "--ledger", L()};
    for (int k = 0; k < 50; ++k) args.push_back(manifest(fmt::format("s{}-{}", p, k), "honest").string());
    submitters.push_back(std::make_unique<Background>(argv(args), dir_ / fmt::format("submit-{}.log", p)));
  }
  for (int p = 0; p < 8; ++p) EXPECT_EQ(submitters[static_cast<std::size_t>(p)]->wait(), 0) << testing::read_file(dir_ / fmt::format("submit-{}.log", p));
  ASSERT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM experiments"), "400");
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(DISTINCT name) FROM experiments"), "400");

  Background a(argv({"worker", "--once", "--ledger", L(), "--jobs", "1"}), dir_ / "worker-a.log");
  Background b(argv({"worker", "--once", "--ledger", L(), "--jobs", "1"}), dir_ / "worker-b.log");
  EXPECT_EQ(a.wait(), 0) << testing::read_file(dir_ / "worker-a.log");
  EXPECT_EQ(b.wait(), 0) << testing::read_file(dir_ / "worker-b.log");
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM experiment_states WHERE state = 'finished'"), "400");
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM experiment_events WHERE event = 'started'"), "400");
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM gate_runs WHERE verdict = 'green'"), "400");
  // Both workers took a share (each takes the oldest queued one in turn).
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(DISTINCT owner_pid) FROM experiment_events WHERE event = 'started'"), "2");
  EXPECT_EQ(densefeed({"ledger", "verify", "--ledger", L()}).exit_code, 0);
}

TEST_F(LedgerEndToEnd, AKilledWorkersExperimentIsRequeuedOnceThenMarkedInterrupted) {
  ASSERT_EQ(densefeed({"submit", manifest("hangs", "hang").string(), "--ledger", L()}).exit_code, 0);
  {
    Background w(argv({"worker", "--ledger", L(), "--jobs", "1"}), dir_ / "w1.log");
    ASSERT_TRUE(wait_for("SELECT COUNT(*) FROM experiment_events WHERE event = 'started'", "1")) << testing::read_file(dir_ / "w1.log");
    w.kill9();
  }
  {
    Background w(argv({"worker", "--ledger", L(), "--jobs", "1"}), dir_ / "w2.log");
    ASSERT_TRUE(wait_for("SELECT COUNT(*) FROM experiment_events WHERE event = 'started'", "2")) << testing::read_file(dir_ / "w2.log");
    EXPECT_EQ(events(1), "queued,started,requeued,started");
    w.kill9();
  }
  const auto third = densefeed({"worker", "--once", "--ledger", L()});
  EXPECT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(events(1), "queued,started,requeued,started,interrupted");
  // No harness of the killed workers is left running: they die with their worker.
  EXPECT_TRUE(no_process_mentions(dir_.path().string()));
  EXPECT_EQ(densefeed({"ledger", "verify", "--ledger", L()}).exit_code, 0);
}

TEST_F(LedgerEndToEnd, ARunKilledInItsGateLeavesAnIntactLedgerAndIsInterruptedAtTheNextStart) {
  ASSERT_EQ(densefeed({"run", manifest("first", "honest").string(), "--ledger", L(), "--no-bench"}).exit_code, 0);
  const auto before = sql_rows(ledger(), "SELECT hash FROM record_chain ORDER BY seq");
  {
    Background run(argv({"run", manifest("killed", "hang").string(), "--ledger", L(), "--no-bench"}), dir_ / "run.log");
    ASSERT_TRUE(wait_for("SELECT state FROM experiment_states WHERE experiment_id = 2", "started"));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // inside the gate: the harness hangs
    run.kill9();
  }
  // SIGKILL cannot be caught, but the harness dies with its parent.
  EXPECT_TRUE(no_process_mentions(dir_.path().string()));
  EXPECT_EQ(state(2), "started");  // nobody has looked yet
  const auto list = densefeed({"ledger", "list", "--ledger", L(), "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  ASSERT_EQ(densefeed({"run", manifest("third", "honest").string(), "--ledger", L(), "--no-bench"}).exit_code, 0);
  EXPECT_EQ(state(2), "interrupted");
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM gate_runs WHERE experiment_id = 2"), "0");
  const auto after = sql_rows(ledger(), "SELECT hash FROM record_chain ORDER BY seq");
  ASSERT_GE(after.size(), before.size());
  EXPECT_TRUE(std::equal(before.begin(), before.end(), after.begin()));  // earlier rows intact
  EXPECT_EQ(densefeed({"ledger", "verify", "--ledger", L()}).exit_code, 0);
}

TEST_F(LedgerEndToEnd, CancelEndsAQueuedExperimentAtOnceAndStopsARunningOne) {
  ASSERT_EQ(densefeed({"submit", manifest("hangs", "hang").string(), manifest("later", "honest").string(), "--ledger", L()}).exit_code, 0);
  EXPECT_EQ(densefeed({"cancel", "2", "--ledger", L()}).exit_code, 0);
  EXPECT_EQ(state(2), "cancelled");
  Background w(argv({"worker", "--once", "--ledger", L(), "--jobs", "1"}), dir_ / "w.log");
  ASSERT_TRUE(wait_for("SELECT state FROM experiment_states WHERE experiment_id = 1", "started"));
  const auto c = densefeed({"cancel", "1", "--ledger", L(), "--json"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(nlohmann::json::parse(c.out)["state"], "cancel_requested");
  EXPECT_EQ(w.wait(), 0) << testing::read_file(dir_ / "w.log");  // --once: the queue is empty after the cancel
  EXPECT_EQ(state(1), "cancelled");
  const auto again = densefeed({"cancel", "1", "--ledger", L()});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("already ended (cancelled)"), std::string::npos) << again.err;
}

TEST_F(LedgerEndToEnd, PromotionNeedsGreenApprovedAndRunsThePreRegisteredAcceptance) {
  const std::string acceptance = "risk: [numerics, production]\nacceptance:\n  command: [metrics_harness, \"prefill=10,10.2,9.9\", "
                                 "\"prefill_kv=10.3,10.4,10.1,10.2\", ttft_p50_ms=180]\n  criteria: [\"prefill_kv <= 1.05 * prefill\", "
                                 "\"ttft_p50_ms <= 200\", \"p90(prefill) < 10.2\"]\n";
  ASSERT_EQ(densefeed({"run", manifest("accept", "honest", acceptance).string(), "--ledger", L(), "--no-bench"}).exit_code, 0);

  auto p = densefeed({"promote", "1", "--by", "carol", "--ledger", L(), "--json"});
  EXPECT_EQ(p.exit_code, 1);
  auto doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["promoted"], false);
  EXPECT_EQ(doc["reasons"].size(), 2u) << p.out;  // two categories not approved
  EXPECT_NE(doc["reasons"][0].get<std::string>().find("'numerics' is not approved (latest decision: none)"), std::string::npos);

  EXPECT_EQ(densefeed({"review", "approve", "1", "--by", "alice", "--category", "numerics", "--ledger", L()}).exit_code, 0);
  EXPECT_EQ(densefeed({"review", "reject", "1", "--by", "bob", "--category", "production", "--note", "not yet", "--ledger", L()}).exit_code, 0);
  EXPECT_EQ(densefeed({"promote", "1", "--by", "carol", "--ledger", L()}).exit_code, 1);
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM awaiting_review"), "1");
  EXPECT_EQ(densefeed({"review", "approve", "1", "--by", "bob", "--category", "production", "--ledger", L()}).exit_code, 0);
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM awaiting_review"), "0");
  const auto unknown = densefeed({"review", "approve", "1", "--by", "bob", "--category", "concurrency", "--ledger", L()});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("does not declare this risk category"), std::string::npos) << unknown.err;

  p = densefeed({"promote", "1", "--by", "carol", "--ledger", L(), "--json"});
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["acceptance"], "pass");
  ASSERT_EQ(doc["criteria"].size(), 3u);
  EXPECT_DOUBLE_EQ(doc["criteria"][0]["lhs"].get<double>(), 10.25);               // median of 4 samples
  EXPECT_DOUBLE_EQ(doc["criteria"][0]["rhs"].get<double>(), 1.05 * 10.0);        // 1.05 x median of 3
  EXPECT_EQ(doc["criteria"][1]["statistic"], "value");
  EXPECT_NEAR(doc["criteria"][2]["lhs"].get<double>(), 10.16, 1e-12);            // p90, linear interpolation
  EXPECT_EQ(sql_one(ledger(), "SELECT verdict FROM acceptance_runs"), "pass");
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM acceptance_criteria WHERE passed = 1"), "3");
  EXPECT_EQ(sql_one(ledger(), "SELECT acceptance_verdict FROM experiment_verdicts WHERE experiment_id = 1"), "pass");
  const auto twice = densefeed({"promote", "1", "--by", "carol", "--ledger", L()});
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_NE(twice.out.find("already promoted"), std::string::npos) << twice.out;
}

TEST_F(LedgerEndToEnd, AFailingCriterionOrACrashingAcceptanceCommandIsAFailWithItsReason) {
  const std::string slow = "acceptance:\n  command: [metrics_harness, \"prefill=10,10,10\", \"prefill_kv=12,12,12\"]\n"
                           "  criteria: [\"prefill_kv <= 1.05 * prefill\"]\n";
  const std::string crash = "acceptance:\n  command: [metrics_harness, --crash]\n  criteria: [\"x <= 1\"]\n";
  const std::string missing = "acceptance:\n  command: [metrics_harness, \"y=1\"]\n  criteria: [\"x <= 1\"]\n";
  ASSERT_EQ(densefeed({"run", manifest("slow", "honest", slow).string(), "--ledger", L(), "--no-bench"}).exit_code, 0);
  ASSERT_EQ(densefeed({"run", manifest("crash", "honest", crash).string(), "--ledger", L(), "--no-bench"}).exit_code, 0);
  ASSERT_EQ(densefeed({"run", manifest("missing", "honest", missing).string(), "--ledger", L(), "--no-bench"}).exit_code, 0);
  auto p = densefeed({"promote", "1", "--by", "carol", "--ledger", L()});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_NE(p.out.find("'prefill_kv <= 1.05 * prefill' does not hold: 12 vs 10.5"), std::string::npos) << p.out;
  p = densefeed({"promote", "2", "--by", "carol", "--ledger", L()});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_NE(p.out.find("was killed by signal 11 (SIGSEGV)"), std::string::npos) << p.out;
  p = densefeed({"promote", "3", "--by", "carol", "--ledger", L()});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_NE(p.out.find("metrics.json has no metric 'x'"), std::string::npos) << p.out;
  EXPECT_EQ(sql_one(ledger(), "SELECT group_concat(verdict) FROM acceptance_runs"), "fail,fail,fail");
}

TEST_F(LedgerEndToEnd, ARedGateCannotBeApprovedOrPromotedEvenThroughPlainSql) {
  ASSERT_EQ(densefeed({"run", manifest("red", "zeros", "risk: [numerics]\nacceptance:\n  command: [metrics_harness, x=1]\n  criteria: [\"x <= 1\"]\n").string(),
                       "--ledger", L(), "--no-bench"}).exit_code, 1);
  const auto r = densefeed({"review", "approve", "1", "--by", "alice", "--ledger", L()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("only an experiment with a green gate run can be approved"), std::string::npos) << r.err;
  const auto p = densefeed({"promote", "1", "--by", "carol", "--ledger", L()});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_NE(p.out.find("its gate is red"), std::string::npos) << p.out;
  std::string error;
  sql_rows(ledger(), "INSERT INTO promotions(experiment_id, promoted_by, promoted_at) VALUES (1, 'mallory', 'now')", &error);
  // (the approval trigger may speak first: the category is not approved either)
  EXPECT_EQ(error.rfind("promotions: ", 0), 0u) << error;
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM promotions"), "0");
  sql_rows(ledger(), "INSERT INTO acceptance_runs(experiment_id, promotion_id, verdict, wall_s, started_at, finished_at) VALUES (1, 1, 'pass', 1, 'a', 'b')", &error);
  EXPECT_EQ(error, "acceptance_runs: the experiment is not promoted or its gate is not green");
}

TEST_F(LedgerEndToEnd, AuditPassesACleanLedgerAndFailsOnTamperingWithJUnit) {
  ASSERT_EQ(densefeed({"run", manifest("a", "honest").string(), "--ledger", L(), "--no-bench"}).exit_code, 0);
  ASSERT_EQ(densefeed({"run", manifest("b", "zeros").string(), "--ledger", L(), "--no-bench"}).exit_code, 1);
  const auto xml = dir_ / "audit.xml";
  auto a = densefeed({"audit", "--ledger", L(), "--junit", xml.string()});
  EXPECT_EQ(a.exit_code, 0) << a.out << a.err;
  EXPECT_NE(testing::read_file(xml).find("failures=\"0\""), std::string::npos);

  // Someone with sqlite3 drops the guard and records a speedup for the red gate.
  std::string error;
  sql_rows(ledger(), "DROP TRIGGER bench_cases_require_green_gate; INSERT INTO bench_cases(experiment_id, gate_run_id, case_label, "
                     "case_json, unit, verdict, reason, base_median, base_relative_spread, candidate_median, candidate_relative_spread, "
                     "speedup, speedup_lo, speedup_hi, ci_confidence, p_value, rounds, threshold, rounds_json) VALUES (2, 2, 'n=64', "
                     "'{}', 'ms', 'faster', '', 2, 0, 1, 0, 2, 1.9, 2.1, 0.95, 0.001, 9, 0.01, '[]')", &error);
  ASSERT_EQ(error, "");
  a = densefeed({"audit", "--ledger", L(), "--junit", xml.string(), "--json"});
  EXPECT_EQ(a.exit_code, 1);
  const auto doc = nlohmann::json::parse(a.out);
  // Audit's checks (cli_ledger.cpp) begin with the schema inventory; the
  // three that see this tampering fail and every other check passes.
  ASSERT_TRUE(doc["checks"].is_array()) << a.out;
  EXPECT_EQ(doc["checks"][0]["check"], "schema objects (tables, views, triggers, indexes) are the SQL compiled into densefeed");
  std::map<std::string, nlohmann::json> failed;
  for (const auto& c : doc["checks"]) {
    if (!c["ok"].get<bool>()) failed[c["check"].get<std::string>()] = c["failures"];
  }
  ASSERT_EQ(failed.size(), 3u) << a.out;
  // The dropped guard is seen by the inventory, the row it let in by the result check...
  EXPECT_EQ(failed["schema objects (tables, views, triggers, indexes) are the SQL compiled into densefeed"],
            nlohmann::json::array({"trigger bench_cases_require_green_gate: missing (dropped)"}))
      << a.out;
  EXPECT_EQ(failed["no speedup, trace or acceptance result without a green gate"],
            nlohmann::json::array({"bench_cases row 1 (n=64) of experiment 2 has no green gate run"}))
      << a.out;
  // ...and the inserted row is not in the (keyed) chain either.
  ASSERT_EQ(failed["hash chain intact"].size(), 1u) << a.out;
  EXPECT_NE(failed["hash chain intact"][0].get<std::string>().find("bench_cases row 1: the row is not in the chain"), std::string::npos)
      << a.out;
  const auto junit = testing::read_file(xml);
  EXPECT_NE(junit.find(fmt::format("tests=\"{}\" failures=\"3\"", doc["checks"].size())), std::string::npos) << junit;
  EXPECT_NE(junit.find("<failure message=\"trigger bench_cases_require_green_gate: missing (dropped)"), std::string::npos) << junit;
  EXPECT_NE(junit.find("<failure message=\"bench_cases row 1"), std::string::npos) << junit;

  // An edited gate is an audit failure too.
  testing::write_file(root_ / "gates" / "quick.yaml", std::string(kGate) + "# edited\n");
  a = densefeed({"audit", "--ledger", L()});
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_NE(a.out.find("FAIL gate quick"), std::string::npos) << a.out;
}

TEST_F(LedgerEndToEnd, VerifyNamesTheFirstBrokenLink) {
  ASSERT_EQ(densefeed({"run", manifest("a", "honest").string(), "--ledger", L(), "--no-bench"}).exit_code, 0);
  ASSERT_EQ(densefeed({"run", manifest("b", "honest").string(), "--ledger", L(), "--no-bench"}).exit_code, 0);
  EXPECT_EQ(densefeed({"ledger", "verify", "--ledger", L()}).exit_code, 0);
  std::string error;
  sql_rows(ledger(), "DROP TRIGGER experiments_no_update; UPDATE experiments SET hypothesis = 'rewritten' WHERE id = 2", &error);
  ASSERT_EQ(error, "");
  auto v = densefeed({"ledger", "verify", "--ledger", L(), "--json"});
  EXPECT_EQ(v.exit_code, 1);
  auto doc = nlohmann::json::parse(v.out);
  EXPECT_EQ(doc["first_broken"]["table"], "experiments");
  EXPECT_EQ(doc["first_broken"]["row_id"], 2);
  EXPECT_EQ(doc["first_broken"]["problem"], "the row was changed after it was recorded");
  // Removing a link is seen at the next one.
  sql_rows(ledger(), "UPDATE experiments SET hypothesis = 'h' WHERE id = 2; DROP TRIGGER record_chain_no_delete; "
                     "DELETE FROM record_chain WHERE seq = 3", &error);
  ASSERT_EQ(error, "");
  v = densefeed({"ledger", "verify", "--ledger", L(), "--json"});
  EXPECT_EQ(v.exit_code, 1);
  doc = nlohmann::json::parse(v.out);
  EXPECT_EQ(doc["first_broken"]["seq"], 4);
  EXPECT_NE(doc["first_broken"]["problem"].get<std::string>().find("prev_hash"), std::string::npos);
}

TEST_F(LedgerEndToEnd, CorruptOrForeignFilesAreRefusedAndLeftUntouched) {
  const auto garbage = dir_ / "garbage.db";
  testing::write_file(garbage, std::string(8192, 'x'));
  const auto foreign = dir_ / "foreign.db";
  sql_rows(foreign, "CREATE TABLE notes(text TEXT); INSERT INTO notes VALUES ('mine')");
  ASSERT_EQ(densefeed({"run", manifest("a", "honest").string(), "--ledger", L(), "--no-bench"}).exit_code, 0);
  ASSERT_EQ(densefeed({"ledger", "list", "--ledger", L()}).exit_code, 0);  // checkpoints nothing new; the file is settled
  const auto damaged = dir_ / "damaged.db";
  std::filesystem::copy_file(ledger(), damaged);
  std::filesystem::resize_file(damaged, std::filesystem::file_size(damaged) / 2);
  for (const auto& [file, want] : {std::pair{garbage, "not an SQLite database"}, std::pair{foreign, "not a densefeed ledger"},
                                   std::pair{damaged, "damaged"}}) {
    const auto sha = sha256_file(file);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"ledger", "list", "--ledger", file.string()},
          std::vector<std::string>{"submit", manifest("s", "honest").string(), "--ledger", file.string()},
          std::vector<std::string>{"run", manifest("r", "honest").string(), "--ledger", file.string(), "--no-bench"}}) {
      const auto r = densefeed(args);
      EXPECT_EQ(r.exit_code, 2) << file << " " << args[0] << "\n" << r.out << r.err;
      EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
      EXPECT_EQ(sha256_file(file), sha) << file << " " << args[0];
    }
  }
}

TEST_F(LedgerEndToEnd, EightProcessesRecordingAHundredExperimentsEachLoseNothing) {
  std::vector<std::unique_ptr<Background>> writers;
  const auto m = kRoot / "experiments" / "cp-affine-chain-tf32.yaml";
  for (int p = 0; p < 8; ++p) {
    writers.push_back(std::make_unique<Background>(
        std::vector<std::string>{kWriter, L(), m.string(), kRoot.string(), "100", std::to_string(p)}, dir_ / fmt::format("writer-{}.log", p)));
  }
  for (int p = 0; p < 8; ++p) EXPECT_EQ(writers[static_cast<std::size_t>(p)]->wait(), 0) << testing::read_file(dir_ / fmt::format("writer-{}.log", p));
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM experiments"), "800");
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(DISTINCT candidate_params) FROM experiments"), "800");
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM gate_runs"), "800");
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM experiment_states WHERE state = 'finished'"), "800");
  EXPECT_EQ(densefeed({"ledger", "verify", "--ledger", L()}).exit_code, 0);
}

TEST_F(LedgerEndToEnd, AVersion1LedgerIsMigratedOnceWhenSeveralProcessesOpenItAtOnce) {
  // Build a version-1 file exactly as densefeed 1 did, with one experiment.
  std::string error;
  sql_rows(ledger(), testing::read_file(kRoot / "orchestrator" / "store" / "ledger_schema.sql") +
                         "INSERT INTO schema_info(version) VALUES (1);"
                         "INSERT INTO experiments(name, manifest_path, manifest_text, manifest_sha256, hypothesis, predicted_effect, gate, "
                         "candidate_revision, candidate_params, base_revision, base_params, submitted_at) VALUES ('old', 'm.yaml', 'x', '" +
                         std::string(64, '0') + "', 'h', 'p', 'quick', 'WORKTREE', '{}', 'WORKTREE', '{}', '2026-01-01T00:00:00Z');",
           &error);
  ASSERT_EQ(error, "");
  std::vector<std::unique_ptr<Background>> readers;
  for (int p = 0; p < 6; ++p) {
    readers.push_back(std::make_unique<Background>(argv({"ledger", "list", "--ledger", L()}), dir_ / fmt::format("open-{}.log", p)));
  }
  for (int p = 0; p < 6; ++p) EXPECT_EQ(readers[static_cast<std::size_t>(p)]->wait(), 0) << testing::read_file(dir_ / fmt::format("open-{}.log", p));
  // Migrated 1 -> 2 -> ... -> 7 in one open, by exactly one of the six.
  EXPECT_EQ(sql_one(ledger(), "SELECT group_concat(version) FROM schema_info"), "1,2,3,4,5,6,7,8,9,10,11,12");
  EXPECT_EQ(sql_one(ledger(), "SELECT state FROM experiment_states WHERE experiment_id = 1"), "recorded");
  // The old row, sealed with the key, then the key's own row.
  EXPECT_EQ(sql_one(ledger(), "SELECT group_concat(table_name || ':' || row_id) FROM (SELECT * FROM record_chain ORDER BY seq)"),
            "experiments:1,chain_keys:1");
  EXPECT_EQ(densefeed({"ledger", "verify", "--ledger", L()}).exit_code, 0);
  ASSERT_EQ(densefeed({"run", manifest("new", "honest").string(), "--ledger", L(), "--no-bench"}).exit_code, 0);
  EXPECT_EQ(densefeed({"ledger", "verify", "--ledger", L()}).exit_code, 0);
}

// Links row `id` of `table` into record_chain as densefeed 2 did
// (Ledger::link before version 3): content_sha256 over every column the
// table has now, each value typed as Statement::typed_bytes encodes it, and
// hash = sha256(prev_hash "\n" table "\n" id "\n" content_sha256), unkeyed.
void link_as_version_2(sqlite3* db, const std::string& table, std::int64_t id, std::int64_t experiment) {
  std::vector<std::string> columns;
  for (const auto& c : [&] {
         std::vector<std::string> out;
         sqlite3_stmt* s = nullptr;
         sqlite3_prepare_v2(db, ("SELECT name FROM pragma_table_info('" + table + "') ORDER BY cid").c_str(), -1, &s, nullptr);
         while (sqlite3_step(s) == SQLITE_ROW) out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
         sqlite3_finalize(s);
         return out;
       }()) {
    columns.push_back(c);
  }
  std::string select;
  for (const auto& c : columns) select += (select.empty() ? "\"" : ", \"") + c + "\"";
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, fmt::format("SELECT {} FROM \"{}\" WHERE id = {}", select, table, id).c_str(), -1, &s, nullptr);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW) << table << " " << id;
  std::string bytes;
  for (int i = 0; i < sqlite3_column_count(s); ++i) {
    switch (sqlite3_column_type(s, i)) {
      case SQLITE_INTEGER: bytes += fmt::format("i{};", sqlite3_column_int64(s, i)); break;
      case SQLITE_FLOAT: bytes += fmt::format("r{};", sqlite3_column_double(s, i)); break;
      case SQLITE_NULL: bytes += "n;"; break;
      default: {
        const auto n = static_cast<std::size_t>(sqlite3_column_bytes(s, i));
        const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
        bytes += fmt::format("t{}:", n) + std::string(p ? p : "", n) + ";";
      }
    }
  }
  sqlite3_finalize(s);
  const std::string content = sha256_hex(bytes);
  std::string prev;
  sqlite3_prepare_v2(db, "SELECT hash FROM record_chain ORDER BY seq DESC LIMIT 1", -1, &s, nullptr);
  if (sqlite3_step(s) == SQLITE_ROW) prev = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  const std::string hash = sha256_hex(fmt::format("{}\n{}\n{}\n{}", prev, table, id, content));
  const std::string columns_json = nlohmann::json(columns).dump();
  sqlite3_prepare_v2(db, "INSERT INTO record_chain(experiment_id, table_name, row_id, columns, content_sha256, prev_hash, hash) "
                         "VALUES (?,?,?,?,?,?,?)", -1, &s, nullptr);
  sqlite3_bind_int64(s, 1, experiment);
  sqlite3_bind_text(s, 2, table.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(s, 3, id);
  sqlite3_bind_text(s, 4, columns_json.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s, 5, content.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s, 6, prev.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s, 7, hash.c_str(), -1, SQLITE_TRANSIENT);
  ASSERT_EQ(sqlite3_step(s), SQLITE_DONE) << sqlite3_errmsg(db);
  sqlite3_finalize(s);
}

// A version-2 ledger as densefeed 2 recorded it: the version-1 schema and
// migration 2, then two experiments run by a worker (one green with a bench
// case, one red), every row linked as it was inserted.
void write_version_2_ledger(const std::filesystem::path& path, const std::filesystem::path& root) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const auto exec = [&](const std::string& sql) {
    char* message = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
    const std::string text = message ? message : "";
    sqlite3_free(message);
    EXPECT_EQ(rc, SQLITE_OK) << text << "\n" << sql.substr(0, 200);
    return sqlite3_last_insert_rowid(db);
  };
  exec(testing::read_file(root / "orchestrator" / "store" / "ledger_schema.sql"));
  exec("INSERT INTO schema_info(version) VALUES (1)");
  exec(testing::read_file(root / "orchestrator" / "store" / "ledger_migration_2.sql"));
  exec("INSERT INTO schema_info(version) VALUES (2)");
  for (const auto& [name, verdict] : {std::pair{"old-green", "green"}, std::pair{"old-red", "red"}}) {
    const bool green = std::string(verdict) == "green";
    const auto e = exec(fmt::format("INSERT INTO experiments(name, manifest_path, manifest_text, manifest_sha256, hypothesis, predicted_effect, "
                                    "gate, candidate_revision, candidate_params, base_revision, base_params, submitted_at) VALUES ('{}', "
                                    "'{}.yaml', 'experiment: {}', '{}', 'h', 'p', 'quick', 'WORKTREE', '{{\"mode\":\"{}\"}}', 'WORKTREE', "
                                    "'{{\"mode\":\"honest\"}}', '2026-02-01T10:00:00Z')",
                                    name, name, name, std::string(64, green ? 'a' : 'b'), green ? "honest" : "zeros"));
    link_as_version_2(db, "experiments", e, e);
    for (const auto& [event, owner] : {std::pair{"queued", "submit"}, std::pair{"started", "worker"}}) {
      link_as_version_2(db, "experiment_events",
                        exec(fmt::format("INSERT INTO experiment_events(experiment_id, event, owner, owner_host, owner_pid, owner_start, at) "
                                         "VALUES ({}, '{}', '{}', 'old-host', 77, '123', '2026-02-01T10:00:01Z')", e, event, owner)),
                        e);
    }
    const auto g = exec(fmt::format("INSERT INTO gate_runs(experiment_id, gate, gate_sha256, profile, seed, verdict, reason, wall_s, "
                                    "harness_wall_s, started_at, finished_at, sandbox) VALUES ({}, 'quick', '{}', 'quick', '7', '{}', '{}', "
                                    "1.25, 0.5, '2026-02-01T10:00:02Z', '2026-02-01T10:00:03Z', 'on')",
                                    e, std::string(64, 'c'), verdict, green ? "" : "1 of 1 case(s) not green"));
    link_as_version_2(db, "gate_runs", g, e);
    const auto c = exec(fmt::format("INSERT INTO gate_cases(gate_run_id, case_index, case_label, case_json, verdict, reason, reference_wall_s, "
                                    "candidate_wall_s) VALUES ({}, 0, 'n=64', '{{\"n\":64}}', '{}', '{}', 0.25, 0.125)",
                                    g, verdict, green ? "" : "rel_l2 1.000e+00 > bound 1.0e-05"));
    link_as_version_2(db, "gate_cases", c, e);
    link_as_version_2(db, "gate_metrics",
                      exec(fmt::format("INSERT INTO gate_metrics(gate_case_id, output, metric, value, bound, passed) VALUES ({}, 'y', 'rel_l2', "
                                       "{}, 1e-05, {})", c, green ? "3.1e-08" : "1.0", green ? 1 : 0)),
                      e);
    if (green) {
      link_as_version_2(db, "bench_cases",
                        exec(fmt::format("INSERT INTO bench_cases(experiment_id, gate_run_id, case_label, case_json, unit, verdict, reason, "
                                         "base_median, base_relative_spread, candidate_median, candidate_relative_spread, speedup, speedup_lo, "
                                         "speedup_hi, ci_confidence, p_value, rounds, threshold, rounds_json) VALUES ({}, {}, 'n=64', "
                                         "'{{\"n\":64}}', 'ms', 'faster', 'r', 2.0, 0.01, 1.0, 0.01, 2.0, 1.9, 2.1, 0.95, 0.001, 9, 0.01, "
                                         "'[]')", e, g)),
                        e);
      link_as_version_2(db, "environments",
                        exec(fmt::format("INSERT INTO environments(experiment_id, host, cpu_model, gpus, cuda_version, compiler, flags, "
                                         "candidate_sha, base_sha, worktree_dirty) VALUES ({}, 'old-host', 'cpu', '[]', '', 'g++', '-O2', '', "
                                         "'', 0)", e)),
                        e);
    }
    link_as_version_2(db, "experiment_events",
                      exec(fmt::format("INSERT INTO experiment_events(experiment_id, event, owner, owner_host, owner_pid, owner_start, at) "
                                       "VALUES ({}, 'finished', 'worker', 'old-host', 77, '123', '2026-02-01T10:00:04Z')", e)),
                      e);
  }
  sqlite3_close(db);
}

TEST_F(LedgerEndToEnd, AVersion2LedgerIsMigratedThroughToTheCurrentVersionIntactAndKeepsRecording) {
  write_version_2_ledger(ledger(), kRoot);
  if (HasFatalFailure()) return;
  const auto v2_links = sql_one(ledger(), "SELECT COUNT(*) FROM record_chain");
  ASSERT_EQ(v2_links, "16");
  // The same file edited while its chain was plain sha256 (a row changed,
  // its guard dropped): the migration checks the version-2 chain and refuses
  // to re-seal it with the key.
  const auto edited = dir_ / "edited.db";
  std::filesystem::copy_file(ledger(), edited);
  std::string error;
  sql_rows(edited, "DROP TRIGGER gate_runs_no_update; UPDATE gate_runs SET verdict = 'green', reason = '' WHERE experiment_id = 2", &error);
  ASSERT_EQ(error, "");
  const auto refused = densefeed({"ledger", "list", "--ledger", edited.string()});
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("its version-2 hash chain is broken at link 13 (gate_runs row 2)"), std::string::npos) << refused.err;
  EXPECT_EQ(sql_one(edited, "SELECT MAX(version) FROM schema_info"), "2");

  // The current densefeed opens it: migrated 2 -> 3 -> 4 once, the old links re-sealed with the key.
  const auto list = densefeed({"ledger", "list", "--ledger", L(), "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.out << list.err;
  EXPECT_EQ(sql_one(ledger(), "SELECT group_concat(version) FROM schema_info"), "1,2,3,4,5,6,7,8,9,10,11,12");
  // Who wrote an old experiment's base was never judged: unrecorded, which
  // promotion does not ask a person to accept.
  EXPECT_EQ(sql_one(ledger(), "SELECT group_concat(base_origin) FROM experiments"), "unrecorded,unrecorded");
  const auto items = nlohmann::json::parse(list.out);
  ASSERT_EQ(items.size(), 2u) << list.out;
  // Its red gate stays red; the green one's bench outcome was not kept by
  // version 2, so it is unknown, never green.
  EXPECT_EQ(items[0]["name"], "old-green");
  EXPECT_EQ(items[0]["verdict"], "unknown") << items[0].dump();
  EXPECT_EQ(items[0]["stages"]["gate"]["verdict"], "green") << items[0].dump();
  EXPECT_EQ(items[0]["stages"]["bench"]["verdict"], "unknown") << items[0].dump();
  EXPECT_EQ(items[1]["name"], "old-red");
  EXPECT_EQ(items[1]["verdict"], "red") << items[1].dump();
  EXPECT_EQ(sql_one(ledger(), "SELECT group_concat(table_name, ',') FROM (SELECT table_name FROM record_chain WHERE seq > 16 ORDER BY seq)"),
            "stage_outcomes,stage_outcomes,stage_outcomes,stage_outcomes,experiment_outcomes,experiment_outcomes,chain_keys");
  EXPECT_EQ(sql_one(ledger(), "SELECT COUNT(*) FROM heartbeats"), "0");  // nothing ran since
  const auto verify = densefeed({"ledger", "verify", "--ledger", L(), "--json"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_EQ(nlohmann::json::parse(verify.out)["links"], 23) << verify.out;
  const auto audit = densefeed({"audit", "--ledger", L()});
  EXPECT_EQ(audit.exit_code, 0) << audit.out << audit.err;

  // A new run records into it, with its heartbeat, and the ledger stays intact.
  ASSERT_EQ(densefeed({"run", manifest("new", "honest").string(), "--ledger", L(), "--no-bench"}).exit_code, 0);
  EXPECT_EQ(sql_one(ledger(), "SELECT verdict FROM experiment_outcomes WHERE experiment_id = 3"), "green");
  EXPECT_EQ(sql_one(ledger(), "SELECT owner || ':' || (beats >= 1) FROM heartbeats WHERE experiment_id = 3"), "run:1");
  EXPECT_EQ(densefeed({"ledger", "verify", "--ledger", L()}).exit_code, 0);
  const auto after = densefeed({"audit", "--ledger", L()});
  EXPECT_EQ(after.exit_code, 0) << after.out << after.err;
}

// Version 7 rebuilt bench_acceptances (its concern gained agent_base) and
// judged bases. A version-6 ledger written by densefeed before it
// (tests/data/ledger-v6/make.sh, run with a build of c2faf2b) holds a
// promotion with its two acceptances and an experiment not promoted: opened
// now, it is migrated once, every row and the chain's links kept (the head
// kept outside it still holds), its bases unrecorded; the experiment left
// can be promoted without --accept-agent-base (nobody judged its base), and
// the rebuilt table still refuses a concern it does not know.
TEST_F(LedgerEndToEnd, AVersion6LedgerWithBenchAcceptancesIsMigratedIntact) {
  const auto data = kRoot / "tests" / "data" / "ledger-v6";
  std::filesystem::copy_file(data / "ledger.db", ledger());
  // Its key where densefeed looks for this ledger's (ledger_key.h).
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const std::filesystem::path config = xdg && *xdg ? std::filesystem::path(xdg) : std::filesystem::path(std::getenv("HOME")) / ".config";
  const auto key = config / "densefeed" / "keys" / (sha256_hex(std::filesystem::canonical(ledger()).string()).substr(0, 16) + ".key");
  std::filesystem::create_directories(key.parent_path());
  std::filesystem::copy_file(data / "ledger.key", key, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  struct RemoveKey {
    std::filesystem::path p;
    ~RemoveKey() { std::filesystem::remove(p); }
  } remove_key{key};
  std::string head = testing::read_file(data / "head.txt");
  head.erase(head.find_last_not_of("\n") + 1);
  ASSERT_EQ(sql_one(ledger(), "SELECT group_concat(version) FROM schema_info"), "1,2,3,4,5,6");
  const std::string acceptances = "SELECT group_concat(id || ':' || experiment_id || ':' || concern || ':' || accepted_by || ':' || accepted_at) "
                                  "FROM (SELECT * FROM bench_acceptances ORDER BY id)";
  const auto before = sql_one(ledger(), acceptances);
  ASSERT_NE(before.find("1:1:candidate_timing:carol:"), std::string::npos) << before;
  ASSERT_NE(before.find(",2:1:speedup_beyond_bound:carol:"), std::string::npos) << before;

  const auto audit = densefeed({"audit", "--ledger", L(), "--expect-head", head});
  ASSERT_EQ(audit.exit_code, 0) << audit.out << audit.err;
  EXPECT_EQ(sql_one(ledger(), "SELECT group_concat(version) FROM schema_info"), "1,2,3,4,5,6,7,8,9,10,11,12");
  EXPECT_EQ(sql_one(ledger(), acceptances), before);
  EXPECT_EQ(sql_one(ledger(), "SELECT group_concat(experiment_id || ':' || promoted_by) FROM promotions"), "1:carol");
  EXPECT_EQ(sql_one(ledger(), "SELECT group_concat(base_origin) FROM experiments"), "unrecorded,unrecorded");
  const auto shown = densefeed({"ledger", "show", "1", "--ledger", L(), "--json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(nlohmann::json::parse(shown.out)["record"]["base_origin"]["kind"], "unrecorded") << shown.out.substr(0, 2000);
  std::string error;
  const auto copy = dir_ / "copy.db";
  std::filesystem::copy_file(ledger(), copy);
  sql_rows(copy, "INSERT INTO bench_acceptances(experiment_id, concern, accepted_by, accepted_at) VALUES (2, 'a_concern', 'x', 'now')", &error);
  EXPECT_NE(error.find("CHECK constraint failed"), std::string::npos) << error;

  const auto promote = densefeed({"promote", "2", "--by", "dave", "--ledger", L(), "--accept-candidate-timing", "--accept-speedup-beyond-bound"});
  EXPECT_EQ(promote.exit_code, 0) << promote.out << promote.err;
  EXPECT_EQ(sql_one(ledger(), "SELECT group_concat(experiment_id || ':' || promoted_by) FROM promotions"), "1:carol,2:dave");
  const auto after = densefeed({"audit", "--ledger", L(), "--expect-head", head});
  EXPECT_EQ(after.exit_code, 0) << after.out << after.err;
}

TEST_F(LedgerEndToEnd, TextTablesLeaveOutMetricsTheGateDoesNotBound) {
  // The gate bounds y by rel_l2 only: no max_abs (or other) column, and no
  // "nan" standing in for a metric nobody bounds, green or red.
  const auto nan_word = [](const std::string& text) {
    static const std::regex word("(^|[^A-Za-z])nan([^A-Za-z]|$)", std::regex::icase);  // not "provenance"
    return std::regex_search(text, word);
  };
  const auto green = densefeed({"run", manifest("a", "honest").string(), "--ledger", L(), "--no-bench"});
  ASSERT_EQ(green.exit_code, 0) << green.out << green.err;
  const auto red = densefeed({"run", manifest("b", "zeros").string(), "--ledger", L(), "--no-bench"});
  ASSERT_EQ(red.exit_code, 1) << red.out << red.err;
  for (const auto* r : {&green, &red}) {
    const auto header = r->out.find("  case");
    ASSERT_NE(header, std::string::npos) << r->out;
    const auto line = r->out.substr(header, r->out.find('\n', header) - header);
    EXPECT_NE(line.find("rel_l2"), std::string::npos) << line;
    EXPECT_EQ(line.find("max_abs"), std::string::npos) << line;
    EXPECT_FALSE(nan_word(r->out)) << r->out;
  }
  // The red case's row: its value and bound, nothing else.
  EXPECT_NE(red.out.find("red     y               1.00e+00  1.00e-05\n"), std::string::npos) << red.out;
  for (const char* id : {"1", "2"}) {
    for (const std::vector<std::string>& verb : {std::vector<std::string>{"ledger", "show", id}, std::vector<std::string>{"status", id}}) {
      std::vector<std::string> args = verb;
      args.insert(args.end(), {"--ledger", L()});
      const auto out = densefeed(args);
      EXPECT_FALSE(nan_word(out.out)) << verb[0] << " " << id << "\n" << out.out;
    }
  }
}

TEST_F(LedgerEndToEnd, ListFiltersCompareShowsOnlyDifferencesAndExportWritesCsvAndJson) {
  ASSERT_EQ(densefeed({"run", manifest("a", "honest").string(), "--ledger", L(), "--no-bench", "--seed", "7"}).exit_code, 0);
  ASSERT_EQ(densefeed({"run", manifest("b", "zeros").string(), "--ledger", L(), "--no-bench", "--seed", "7"}).exit_code, 1);
  auto list = nlohmann::json::parse(densefeed({"ledger", "list", "--verdict", "red", "--ledger", L(), "--json"}).out);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["name"], "b");
  // Each item is the experiment's typed record (schemas/experiment-summary.schema.json).
  EXPECT_EQ(list[0]["verdict"], "red") << list.dump();
  EXPECT_EQ(list[0]["verdict_stage"], "gate") << list.dump();
  EXPECT_EQ(list[0]["stages"]["gate"]["failure"]["kind"], "tolerance") << list.dump();
  list = nlohmann::json::parse(densefeed({"ledger", "list", "--gate", "quick", "--since", "2000-01-01", "--ledger", L(), "--json"}).out);
  EXPECT_EQ(list.size(), 2u);
  // --since is checked (YYYY-MM-DD[THH:MM[:SS]]): a bare year is bad input, not a filter.
  const auto future = densefeed({"ledger", "list", "--since", "2999-01-01", "--ledger", L(), "--json"});
  ASSERT_EQ(future.exit_code, 0) << future.out << future.err;
  list = nlohmann::json::parse(future.out);
  EXPECT_EQ(list.size(), 0u);
  EXPECT_EQ(densefeed({"ledger", "list", "--since", "yesterday", "--ledger", L()}).exit_code, 2);
  EXPECT_EQ(densefeed({"ledger", "list", "--since", "2999", "--ledger", L()}).exit_code, 2);

  const auto cmp = densefeed({"ledger", "compare", "1", "2", "--ledger", L(), "--json"});
  ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
  std::map<std::string, nlohmann::json> diff;
  const auto cmp_doc = nlohmann::json::parse(cmp.out);
  for (const auto& d : cmp_doc["differences"]) diff[d["field"].get<std::string>()] = d;
  EXPECT_EQ(diff.count("gate.seed"), 0u);  // the same seed: not shown
  EXPECT_EQ(diff["experiment.candidate_params.mode"]["b"], "zeros") << cmp.out;
  EXPECT_EQ(diff["gate.verdict"]["a"], "green");
  EXPECT_EQ(diff["gate.cases.n=64.y.rel_l2"]["b"], 1.0);
  EXPECT_TRUE(diff["gate.cases.n=64.y.rel_l2"].contains("delta"));

  const auto csv = densefeed({"ledger", "export", "--format", "csv", "--ledger", L()});
  ASSERT_EQ(csv.exit_code, 0);
  EXPECT_EQ(csv.out.substr(0, csv.out.find("\r\n")),
            "experiment_id,name,gate,author,submitted_at,state,verdict,verdict_stage,gate_verdict,reason,profile,seed,bench_verdict,"
            "trace_verdict,bench_cases,bench_faster,bench_slower,trace_failed,trace_checks,acceptance_verdict,promoted");
  EXPECT_NE(csv.out.find(",b,quick,"), std::string::npos);
  EXPECT_EQ(densefeed({"ledger", "export", "--format", "csv", "--table", "nope", "--ledger", L()}).exit_code, 2);
  const auto json = nlohmann::json::parse(densefeed({"ledger", "export", "--ledger", L()}).out);
  EXPECT_EQ(json["experiments"].size(), 2u);
  EXPECT_EQ(json["schema_info"].size(), 12u);  // versions 1 to 12
}

}  // namespace
}  // namespace densefeed
