// Issue 15, "faults lose nothing", through the real CLI, real processes and
// plain sqlite3/python3 holding the ledger's write lock:
// - another process holds the write lock for longer than the lock wait
//   (DENSEFEED_LEDGER_BUSY_S=1, held 6 s): the run exits 3 naming the file its
//   results are kept in, and `densefeed ledger recover` records every case;
//   with a lock wait longer than the hold, the run waits and records them itself;
// - a worker killed with SIGKILL mid-experiment: a second, already running
//   worker requeues the experiment and finishes it; on the same host by the
//   dead pid, from another host (a worker in a UTS namespace of its own,
//   hostname other-host) by its heartbeat standing still, and for a start
//   written with another host's name whose heartbeat never moves; a worker
//   of another host that beats is left alone;
// - promote killed during its acceptance run: audit names it interrupted, a
//   second promote while the first still runs is refused, a person promotes
//   again, the killed run is recorded interrupted and the new one passes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::string kExe = DENSEFEED_EXE;

// reference: sleeps --sleep s first (so that the test can take the lock while
// the gate runs), then y = z ~ N(0, 1) from the seed. candidate: the same
// without sleeping; mode off: y scaled by 1 + 1e-3. acceptance: waits while
// the file --hold exists (as its sandbox shows it), then writes metrics.json {x: 0.5}.
const char* kHarness = R"(import argparse, json, os, time
import numpy as np
p = argparse.ArgumentParser()
p.add_argument('--role'); p.add_argument('--mode', default='honest'); p.add_argument('--n', type=int, default=64)
p.add_argument('--sleep', type=float, default=0); p.add_argument('--hold', default='')
p.add_argument('--seed', type=int, default=0); p.add_argument('--out')
a = p.parse_args()
if a.role == 'acceptance':
    while a.hold and os.path.exists(a.hold):
        time.sleep(0.05)
    json.dump({'x': 0.5}, open(os.path.join(os.environ['DENSEFEED_OUT'], 'metrics.json'), 'w'))
    raise SystemExit(0)
if a.role == 'reference':
    time.sleep(a.sleep)
y = np.random.default_rng(a.seed).standard_normal(a.n)
if a.mode == 'off':
    y *= 1 + 1e-3
np.save(os.path.join(a.out, 'y.npy'), y)
)";

const char* kGate = R"(gate: slow
description: a reference that takes its time
reference:
  command: [python3, "{project}/h.py", --role, reference, --sleep, "{case.sleep}", --n, "{case.n}", --seed, "{seed}", --out, "{out}"]
candidate:
  command: [python3, "{project}/h.py", --role, candidate, --mode, "{param.mode}", --n, "{case.n}", --seed, "{seed}", --out, "{out}"]
params:
  mode: {type: string, enum: [honest, off], default: honest}
outputs:
  y:
    dtype: float64
    tolerance: {rel_l2: 1.0e-9}
cases:
  grid:
    - {n: [16, 32, 64], sleep: [1.5]}
profiles:
  quick: {}
  full: {}
timeout_s: 60
freezes: []
)";

class LedgerFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_ / "project";
    std::filesystem::create_directories(repo_);
    ASSERT_EQ(testing::locked_project(repo_, {{"h.py", kHarness}, {"gates/slow.yaml", kGate}}, kExe, env()), "");
    manifest_ = (dir_ / "m.yaml").string();
    testing::write_file(manifest_, "experiment: m\nhypothesis: h\npredicted_effect: p\ngate: slow\n"
                                   "candidate: {revision: WORKTREE, params: {mode: honest}}\n"
                                   "base: {revision: WORKTREE, params: {mode: off}}\n"
                                   "acceptance:\n  command: [python3, \"{project}/h.py\", --role, acceptance, --hold, \"{project}/hold\"]\n"
                                   "  criteria: ['x <= 1']\n");
  }
  std::map<std::string, std::string> env() const {
    return testing::project_env(dir_ / "home");
  }
  testing::CliResult df(std::vector<std::string> args) const { return testing::run_cli(kExe, args, repo_, env()); }
  std::string sh(const std::string& command) const {
    const auto r = testing::run_cli("/bin/sh", {"-c", command}, repo_, env());
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.out << r.err;
    return r.out + r.err;
  }
  std::string db() const { return (repo_ / ".densefeed" / "ledger.db").string(); }
  std::string q(const std::string& query) const {
    const auto r = testing::run_cli("/bin/sh", {"-c", "sqlite3 " + db() + " \"" + query + "\""}, repo_, env());
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }
  // A shell line that waits (at most `seconds`) until `query` prints `want`.
  std::string wait_for(const std::string& query, const std::string& want, int seconds = 60) const {
    return "i=0; until [ \"$(sqlite3 " + db() + " \"" + query + "\" 2>/dev/null)\" = \"" + want +
           "\" ]; do i=$((i+1)); [ $i -gt " + std::to_string(seconds * 20) + " ] && echo TIMEOUT && break; sleep 0.05; done; ";
  }
  // The command line of a densefeed on another host: a UTS namespace of its
  // own (bubblewrap) named other-host, the rest of the machine as it is, so
  // that its pid means nothing to a worker here and only its heartbeat can.
  std::string on_other_host() const {
    return "bwrap --dev-bind / / --unshare-uts --hostname other-host --chdir " + repo_.string() + " " + kExe;
  }
  // "" when on_other_host() can run here, else why not.
  std::string other_host_unavailable() const {
    const auto r = testing::run_cli("/bin/sh", {"-c", "bwrap --dev-bind / / --unshare-uts --hostname other-host hostname"}, repo_, env());
    return r.exit_code == 0 && r.out == "other-host\n" ? "" : "bubblewrap cannot make a UTS namespace here: " + r.out + r.err;
  }
  // python3 holding BEGIN IMMEDIATE on the ledger for `seconds`.
  std::string hold_lock(double seconds) const {
    return "python3 -c \"import sqlite3, time; c = sqlite3.connect('" + db() +
           "', isolation_level=None, timeout=30); c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(" +
           std::to_string(seconds) + "); c.execute('ROLLBACK')\"; ";
  }

  testing::TempDir dir_;
  std::filesystem::path repo_;
  std::string manifest_;
};

TEST_F(LedgerFaults, AWriteLockHeldPastTheWaitLosesNoCase) {
  // The run records the experiment, runs the gate (the reference sleeps
  // 1.5 s), then finds the lock held for 6 s against a wait of 1 s.
  const auto out = sh("DENSEFEED_LEDGER_BUSY_S=1 " + kExe + " run " + manifest_ + " --no-bench > run.out 2> run.err & pid=$!; " +
                      wait_for("SELECT COUNT(*) FROM experiments", "1") + hold_lock(6) + "wait $pid; echo rc=$?");
  EXPECT_NE(out.find("held"), std::string::npos) << out;
  EXPECT_NE(out.find("rc=3"), std::string::npos) << out << testing::read_file(repo_ / "run.out") << testing::read_file(repo_ / "run.err");
  const auto err = testing::read_file(repo_ / "run.err");
  EXPECT_NE(err.find("the write lock stayed held"), std::string::npos) << err;
  EXPECT_NE(err.find("pending-gate-run.json"), std::string::npos) << err;
  EXPECT_NE(err.find("densefeed ledger recover"), std::string::npos) << err;
  EXPECT_EQ(q("SELECT COUNT(*) FROM gate_cases"), "0") << "the lock was not held when the gate was recorded";
  const auto pending = repo_ / ".densefeed" / "ledger-runs" / "1" / "pending-gate-run.json";
  ASSERT_TRUE(std::filesystem::is_regular_file(pending));
  // A writer that holds the lock is still refused by recover (exit 3), and the file stays.
  const auto busy = sh("python3 -c \"import sqlite3, time; c = sqlite3.connect('" + db() +
                       "', isolation_level=None); c.execute('BEGIN IMMEDIATE'); time.sleep(4)\" & h=$!; sleep 1; "
                       "DENSEFEED_LEDGER_BUSY_S=0.5 " + kExe + " ledger recover; echo rc=$?; wait $h");
  EXPECT_NE(busy.find("rc=3"), std::string::npos) << busy;
  ASSERT_TRUE(std::filesystem::is_regular_file(pending));
  // The lock is free: recover records every case, once.
  const auto rec = df({"ledger", "recover", "--json"});
  ASSERT_EQ(rec.exit_code, 0) << rec.out << rec.err;
  const J r = J::parse(rec.out);
  ASSERT_EQ(r["recovered"].size(), 1u) << r.dump();
  EXPECT_EQ(r["recovered"][0]["outcome"], "recorded");
  EXPECT_EQ(r["recovered"][0]["cases"], 3);
  EXPECT_EQ(r["recovered"][0]["verdict"], "green");
  EXPECT_EQ(q("SELECT COUNT(*) FROM gate_cases WHERE verdict = 'green'"), "3");
  EXPECT_EQ(q("SELECT COUNT(*) FROM gate_metrics"), "3");
  EXPECT_EQ(q("SELECT verdict FROM experiment_outcomes WHERE experiment_id = 1"), "green");
  EXPECT_FALSE(std::filesystem::exists(pending));
  EXPECT_EQ(J::parse(df({"ledger", "recover", "--json"}).out)["recovered"].size(), 0u);
  const auto audit = df({"audit"});
  EXPECT_EQ(audit.exit_code, 0) << audit.out << audit.err;
  // With a wait longer than the hold, the run waits and records every case itself.
  const auto waited = sh("DENSEFEED_LEDGER_BUSY_S=30 " + kExe + " run " + manifest_ + " --no-bench > run2.out 2> run2.err & pid=$!; " +
                         wait_for("SELECT COUNT(*) FROM experiments", "2") + hold_lock(4) + "wait $pid; echo rc=$?");
  EXPECT_NE(waited.find("rc=0"), std::string::npos) << waited << testing::read_file(repo_ / "run2.err");
  EXPECT_EQ(q("SELECT COUNT(*) FROM gate_cases c JOIN gate_runs g ON g.id = c.gate_run_id WHERE g.experiment_id = 2"), "3");
  EXPECT_FALSE(std::filesystem::exists(repo_ / ".densefeed" / "ledger-runs" / "2" / "pending-gate-run.json"));
}

TEST_F(LedgerFaults, AKilledWorkersExperimentIsRequeuedAndFinishedByAnotherWorker) {
  ASSERT_EQ(df({"submit", manifest_}).exit_code, 0);
  // Worker A takes it; worker B is running (idle) when A is killed.
  const auto out = sh(kExe + " worker > a.out 2>&1 & a=$!; " +
                      wait_for("SELECT event FROM experiment_events ORDER BY id DESC LIMIT 1", "started") + kExe +
                      " worker > b.out 2>&1 & b=$!; "
                      // B is past its start-up recovery before A dies: only its running check can requeue.
                      "until grep -q '^worker:' b.out; do sleep 0.05; done; kill -9 $a; " +
                      wait_for("SELECT event FROM experiment_events ORDER BY id DESC LIMIT 1", "finished") +
                      "kill -TERM $b; wait $b; echo done");
  EXPECT_EQ(out.find("TIMEOUT"), std::string::npos) << out << testing::read_file(repo_ / "b.out");
  EXPECT_EQ(q("SELECT group_concat(event, ',') FROM (SELECT event FROM experiment_events WHERE experiment_id = 1 ORDER BY id)"),
            "queued,started,requeued,started,finished");
  EXPECT_NE(testing::read_file(repo_ / "b.out").find("experiment 1: its owner died; requeued"), std::string::npos)
      << testing::read_file(repo_ / "b.out");
  EXPECT_EQ(q("SELECT verdict FROM experiment_outcomes WHERE experiment_id = 1"), "green");
  EXPECT_EQ(q("SELECT COUNT(*) FROM gate_runs WHERE experiment_id = 1"), "1");
}

TEST_F(LedgerFaults, APromoteKilledDuringAcceptanceIsInterruptedAndAPersonMayRunItAgain) {
  ASSERT_EQ(df({"run", manifest_, "--no-bench"}).exit_code, 0);
  // In the project: the acceptance command's sandbox shows it (not the test's /tmp).
  testing::write_file(repo_ / "hold", "");
  // While the first promote runs its acceptance, a second one is refused
  // (exit 2) and leaves it running; then the first is killed.
  const auto out = sh(kExe + " promote 1 --by someone > p1.out 2>&1 & p=$!; " +
                      wait_for("SELECT verdict FROM stage_outcomes WHERE stage = 'acceptance' ORDER BY id DESC LIMIT 1", "started") +
                      kExe + " promote 1 --by another > p2.out 2>&1; echo second=$?; "
                      "kill -9 $p; wait $p; echo rc=$?");
  EXPECT_NE(out.find("second=2"), std::string::npos) << out << testing::read_file(repo_ / "p2.out");
  EXPECT_NE(testing::read_file(repo_ / "p2.out").find("is still running (its promote on"), std::string::npos)
      << testing::read_file(repo_ / "p2.out");
  EXPECT_NE(out.find("rc=137"), std::string::npos) << out;
  std::filesystem::remove(repo_ / "hold");  // the orphaned acceptance command ends
  EXPECT_EQ(q("SELECT COUNT(*) FROM acceptance_runs"), "0");
  EXPECT_EQ(q("SELECT group_concat(verdict, ',') FROM (SELECT verdict FROM stage_outcomes WHERE stage = 'acceptance' ORDER BY id)"),
            "started");
  // Audit does not pass it silently: the killed acceptance is named interrupted, with the command that re-runs it.
  const auto audit = df({"audit", "--json"});
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;
  const J doc = J::parse(audit.out);
  std::map<std::string, J> failed;
  for (const auto& c : doc["checks"]) {
    if (!c["ok"].get<bool>()) failed[c["check"].get<std::string>()] = c["failures"];
  }
  ASSERT_EQ(failed.size(), 1u) << audit.out;
  const auto& f = failed["no acceptance run left started by a promote that no longer runs (interrupted)"];
  ASSERT_EQ(f.size(), 1u) << audit.out;
  EXPECT_EQ(f[0].get<std::string>().rfind("experiment 1: its acceptance run started at ", 0), 0u) << f[0];
  EXPECT_NE(f[0].get<std::string>().find("was interrupted: its promote on"), std::string::npos) << f[0];
  EXPECT_NE(f[0].get<std::string>().find("no longer running; 'densefeed promote 1' runs it again"), std::string::npos) << f[0];
  const auto text = df({"audit"});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find("FAIL no acceptance run left started by a promote that no longer runs (interrupted)"), std::string::npos)
      << text.out;
  const auto again = df({"promote", "1", "--by", "someone"});
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_EQ(q("SELECT group_concat(verdict, ',') FROM (SELECT verdict FROM stage_outcomes WHERE stage = 'acceptance' ORDER BY id)"),
            "started,interrupted,started,green");
  EXPECT_EQ(q("SELECT verdict FROM acceptance_runs WHERE experiment_id = 1"), "pass");
  // Once it has passed, it is not run a third time.
  EXPECT_NE(df({"promote", "1", "--by", "someone"}).exit_code, 0);
  // Re-run, it is no longer an audit failure.
  const auto after = df({"audit"});
  EXPECT_EQ(after.exit_code, 0) << after.out << after.err;
}

// Heartbeats every 0.5 s: stale after 3 of them (1.5 s) standing still; a
// worker looks every 2 s, so one that saw the last beat requeues within
// 1.5 s + 2 rounds = 5.5 s of it (cli_queue.cpp).
const char* kFastBeats = "DENSEFEED_HEARTBEAT_S=0.5 ";
constexpr double kStatedRequeueS = 3 * 0.5 + 2 * 2;

TEST_F(LedgerFaults, AWorkerKilledOnAnotherHostIsRequeuedByItsStaleHeartbeatAndFinished) {
  if (const auto why = other_host_unavailable(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(df({"submit", manifest_}).exit_code, 0);
  // Worker A, on other-host, takes it (without the sandbox: it is killed
  // inside its gate anyway); worker B, here, is idle when A is killed.
  const auto out = sh(std::string(kFastBeats) + on_other_host() + " worker --no-sandbox > a.out 2>&1 & " +
                      wait_for("SELECT COUNT(*) FROM heartbeats WHERE host = 'other-host' AND beats >= 2", "1") + kFastBeats + kExe +
                      " worker > b.out 2>&1 & b=$!; until grep -q '^worker:' b.out; do sleep 0.05; done; "
                      "a=$(sqlite3 " + db() + " \"SELECT pid FROM heartbeats WHERE host = 'other-host'\"); kill -9 $a; "
                      "t0=$(date +%s.%N); " +
                      wait_for("SELECT COUNT(*) FROM experiment_events WHERE event = 'requeued'", "1") +
                      "echo requeued_after=$(awk \"BEGIN { print $(date +%s.%N) - $t0 }\"); " +
                      wait_for("SELECT event FROM experiment_events ORDER BY id DESC LIMIT 1", "finished") +
                      "kill -TERM $b; wait $b; echo done");
  EXPECT_EQ(out.find("TIMEOUT"), std::string::npos) << out << testing::read_file(repo_ / "a.out") << testing::read_file(repo_ / "b.out");
  const auto here = q("SELECT owner_host FROM experiment_events WHERE id = 1");
  ASSERT_NE(here, "other-host");
  EXPECT_EQ(q("SELECT group_concat(event || '@' || owner_host, ',') FROM (SELECT event, owner_host FROM experiment_events "
              "WHERE experiment_id = 1 ORDER BY id)"),
            "queued@" + here + ",started@other-host,requeued@,started@" + here + ",finished@" + here);
  // Requeued by its heartbeat (the pid of another host says nothing here), within the stated time.
  const auto detail = q("SELECT detail FROM experiment_events WHERE event = 'requeued'");
  EXPECT_EQ(detail.rfind("its worker on other-host (pid ", 0), 0u) << detail;
  EXPECT_NE(detail.find("has not beaten for"), std::string::npos) << detail;
  EXPECT_NE(detail.find("3 of its 0.5 s heartbeat intervals"), std::string::npos) << detail;
  const auto at = out.find("requeued_after=");
  ASSERT_NE(at, std::string::npos) << out;
  const double requeued_after = std::stod(out.substr(at + 15));
  // The stated time, and 10 s more for a machine shared with other builds.
  EXPECT_LT(requeued_after, kStatedRequeueS + 10) << out;
  EXPECT_NE(testing::read_file(repo_ / "b.out").find("experiment 1: its owner died; requeued (its worker on other-host"), std::string::npos)
      << testing::read_file(repo_ / "b.out");
  EXPECT_EQ(q("SELECT verdict FROM experiment_outcomes WHERE experiment_id = 1"), "green");
  EXPECT_EQ(q("SELECT COUNT(*) FROM gate_runs WHERE experiment_id = 1"), "1");
  // B's own run of it had its heartbeat too.
  EXPECT_EQ(q("SELECT COUNT(*) FROM heartbeats WHERE experiment_id = 1 AND owner = 'worker'"), "2");
  EXPECT_EQ(df({"ledger", "verify"}).exit_code, 0);
}

TEST_F(LedgerFaults, AWorkerOnAnotherHostThatKeepsBeatingIsLeftAlone) {
  if (const auto why = other_host_unavailable(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(df({"submit", manifest_}).exit_code, 0);
  // A's gate takes about 4.5 s (three cases whose reference sleeps 1.5 s, one
  // at a time): three times the staleness, with B watching all along.
  const auto out = sh(std::string(kFastBeats) + on_other_host() + " worker --no-sandbox --once --jobs 1 > a.out 2>&1 & a=$!; " +
                      wait_for("SELECT COUNT(*) FROM heartbeats WHERE host = 'other-host'", "1") + kFastBeats + kExe +
                      " worker > b.out 2>&1 & b=$!; wait $a; echo a=$?; kill -TERM $b; wait $b; echo done");
  EXPECT_NE(out.find("a=0"), std::string::npos) << out << testing::read_file(repo_ / "a.out");
  EXPECT_EQ(q("SELECT group_concat(event, ',') FROM (SELECT event FROM experiment_events WHERE experiment_id = 1 ORDER BY id)"),
            "queued,started,finished")
      << testing::read_file(repo_ / "b.out");
  EXPECT_EQ(testing::read_file(repo_ / "b.out").find("owner died"), std::string::npos) << testing::read_file(repo_ / "b.out");
  // It beat all along: at least one beat per interval of its gate (the reference slept 4.5 s in all).
  EXPECT_GE(std::stoi(q("SELECT beats FROM heartbeats WHERE experiment_id = 1")), 1 + 4) << q("SELECT * FROM heartbeats");
}

TEST_F(LedgerFaults, AStartWrittenByAnotherHostWhoseHeartbeatStandsStillIsRequeuedByAnIdleWorker) {
  ASSERT_EQ(df({"submit", manifest_}).exit_code, 0);
  // What a worker of another host writes when it takes the experiment, as
  // plain SQL: its `started` event and its heartbeat, which then never moves
  // (these rows are not densefeed's, so the chain is broken by them; the
  // worker requeues by the heartbeat all the same).
  sh("sqlite3 " + db() + " \"INSERT INTO experiment_events(experiment_id, event, owner, owner_host, owner_pid, owner_start, at) "
     "VALUES (1, 'started', 'worker', 'far-host', 4242, '1', '2026-01-01T00:00:00Z'); "
     "INSERT INTO heartbeats(experiment_id, owner, started_event_id, host, pid, interval_s, beats, first_beat_at, last_beat_at) "
     "VALUES (1, 'worker', last_insert_rowid(), 'far-host', 4242, 0.5, 7, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:03.000Z')\"");
  const auto out = sh(std::string(kFastBeats) + kExe + " worker > b.out 2>&1 & b=$!; " +
                      wait_for("SELECT event FROM experiment_events ORDER BY id DESC LIMIT 1", "finished") +
                      "kill -TERM $b; wait $b; echo done");
  EXPECT_EQ(out.find("TIMEOUT"), std::string::npos) << out << testing::read_file(repo_ / "b.out");
  EXPECT_EQ(q("SELECT group_concat(event, ',') FROM (SELECT event FROM experiment_events WHERE experiment_id = 1 ORDER BY id)"),
            "queued,started,requeued,started,finished");
  EXPECT_EQ(q("SELECT detail FROM experiment_events WHERE event = 'requeued'").rfind(
                "its worker on far-host (pid 4242) has not beaten for ", 0),
            0u)
      << q("SELECT detail FROM experiment_events WHERE event = 'requeued'");
  EXPECT_NE(q("SELECT detail FROM experiment_events WHERE event = 'requeued'").find("(last beat at 2026-01-01T00:00:03.000Z)"),
            std::string::npos);
  EXPECT_EQ(q("SELECT verdict FROM experiment_outcomes WHERE experiment_id = 1"), "green");
}

}  // namespace
}  // namespace densefeed
