// Issue 25, what densefeed keeps between runs: the export of the trusted ref
// (the gate store), cached revision builds and the results a run keeps for
// `ledger recover`. Each test is the attack of one who can write the
// workspace (the agent's user) but lacks the ledger's key: a write into the
// cached export, a binary replaced in a cached build, a forged, an unsigned
// and a transplanted pending file. Each must be detected (a tamper event,
// audit failing until a person acknowledges it) or refused (the file kept).
#include <gtest/gtest.h>
#include <thread>
#include <atomic>

#include <nlohmann/json.hpp>

#include "ledger_identity.h"
#include "ledger_key.h"
#include "pending_results.h"
#include "sha256.h"
#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::string kExe = DENSEFEED_EXE;

// y = arange(4); param m: b adds 0.5 (wrong by 0.5 everywhere).
const std::string kWriter =
    "import os, sys, numpy as np\n"
    "y = np.arange(4.0) + (0.5 if len(sys.argv) > 1 and sys.argv[1] == 'b' else 0.0)\n"
    "np.save(os.path.join(os.environ['DENSEFEED_OUT'], 'y.npy'), y)\n";

std::string gate_yaml(const std::string& reference, const std::string& extra = "") {
  return "gate: g\ndescription: d\nreference:\n  command: " + reference +
         "\ncandidate:\n  command: [python3, \"{project}/c.py\", \"{param.m}\"]\n"
         "params:\n  m: {type: string, enum: [a, b], default: a}\n"
         "outputs:\n  y: {dtype: float64, tolerance: {max_abs: 0}}\n"
         "cases:\n  grid:\n    - {n: [1]}\nprofiles: {quick: {}, full: {}}\nfreezes: [c.py]\n" +
         extra;
}

class TrustedGround : public ::testing::Test {
 protected:
  std::string make(const std::map<std::string, std::string>& files) { return testing::locked_project(repo_, files, kExe, env_); }
  void manifest(const std::string& m, const std::string& base = "a") {
    testing::write_file(dir_ / "m.yaml", "experiment: m\nhypothesis: h\npredicted_effect: p\ngate: g\n"
                                         "candidate: {revision: WORKTREE, params: {m: " + m + "}}\nbase: {revision: HEAD, params: {m: " + base + "}}\n");
  }
  testing::CliResult df(std::vector<std::string> args) const { return testing::run_cli(kExe, args, repo_, env_); }
  testing::CliResult run() const { return df({"run", (dir_ / "m.yaml").string(), "--json", "--no-bench"}); }
  std::filesystem::path ledger() const { return repo_ / ".densefeed" / "ledger.db"; }
  std::filesystem::path exports() const { return repo_ / ".densefeed" / "ledger-exports"; }
  std::filesystem::path runs() const { return repo_ / ".densefeed" / "ledger-runs"; }
  std::string q(const std::string& query) const {
    const auto r = testing::run_cli("/bin/sh", {"-c", "sqlite3 " + ledger().string() + " \"" + query + "\""}, repo_, env_);
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }
  // The export of the trusted ref as it is now (main's commit).
  std::filesystem::path only_export() const {
    auto sha = testing::git(repo_, {"rev-parse", "main"}).out;
    while (!sha.empty() && sha.back() == '\n') sha.pop_back();
    return exports() / sha;
  }
  // The chain still verifies: densefeed's own rows (tamper events too) are sealed.
  void expect_chain_intact() const {
    const auto v = df({"ledger", "verify"});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  }

  testing::TempDir dir_;
  std::filesystem::path repo_ = dir_ / "project";
  std::map<std::string, std::string> env_ = testing::project_env(dir_ / "home");
};

// The attack of issue 25: loosen a tolerance in the cached export of the
// trusted ref and re-hash its gates.lock, so that every later run judges by
// the loosened gate and `gate verify` still says ok.
TEST_F(TrustedGround, AWriteIntoTheCachedExportIsDetectedReExportedAndAuditFailsUntilAcknowledged) {
  ASSERT_EQ(make({{"c.py", kWriter}, {"ref.py", kWriter}, {"gates/g.yaml", gate_yaml("[python3, \"{project}/ref.py\"]")}}), "");
  manifest("b");  // wrong by 0.5: red under max_abs 0
  const auto first = run();
  ASSERT_EQ(first.exit_code, 1) << first.out << first.err;
  const auto exp = only_export();
  const auto gate = exp / "gates" / "g.yaml";
  std::string text = testing::read_file(gate);
  const auto at = text.find("max_abs: 0");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string("max_abs: 0").size(), "max_abs: 1000");
  testing::write_file(gate, text);
  std::string lock = testing::read_file(exp / "gates" / "gates.lock");
  std::string relocked;
  std::istringstream lines(lock);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > 66 && line.substr(66) == "gates/g.yaml") line = sha256_hex(text) + "  gates/g.yaml";
    relocked += line + "\n";
  }
  ASSERT_NE(relocked, lock) << "the forged lock names the gate";
  testing::write_file(exp / "gates" / "gates.lock", relocked);

  // The next run finds it, exports afresh and judges by the true gate: red.
  const auto second = run();
  EXPECT_EQ(second.exit_code, 1) << second.out << second.err;
  EXPECT_NE(second.err.find("tamper event 1"), std::string::npos) << second.err;
  EXPECT_EQ(J::parse(second.out)["stages"]["gate"]["verdict"], "red") << second.out;
  EXPECT_NE(testing::read_file(only_export() / "gates" / "g.yaml").find("max_abs: 0"), std::string::npos) << "not re-exported";
  EXPECT_EQ(q("SELECT kind || ' ' || substr(path, -12) FROM tamper_events ORDER BY id"), "export_changed gates/g.yaml\n"
                                                                                         "export_changed s/gates.lock");
  expect_chain_intact();

  // audit fails naming the event until a person acknowledges it.
  auto audit = df({"audit"});
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;
  EXPECT_NE(audit.out.find("tamper event 1 (export_changed"), std::string::npos) << audit.out;
  EXPECT_NE(audit.out.find("gates/g.yaml"), std::string::npos) << audit.out;
  const auto ack1 = df({"audit", "acknowledge", "1", "--by", "alice", "--note", "the agent's sandbox escape, fixed"});
  EXPECT_EQ(ack1.exit_code, 0) << ack1.out << ack1.err;
  audit = df({"audit"});
  EXPECT_EQ(audit.exit_code, 1) << "event 2 is not acknowledged: " << audit.out;
  EXPECT_NE(audit.out.find("tamper event 2"), std::string::npos) << audit.out;
  EXPECT_EQ(df({"audit", "acknowledge", "1", "--by", "bob", "--note", "again"}).exit_code, 2) << "acknowledged twice";
  EXPECT_EQ(df({"audit", "acknowledge", "9", "--by", "bob", "--note", "none"}).exit_code, 2) << "no such event";
  EXPECT_EQ(df({"audit", "acknowledge", "2", "--by", "alice", "--note", "same"}).exit_code, 0);
  audit = df({"audit"});
  EXPECT_EQ(audit.exit_code, 0) << audit.out << audit.err;
  expect_chain_intact();

  // A file planted in the export, and a file swapped for a link: `gate
  // verify` reports each (exit 1), and the export is replaced again.
  testing::write_file(only_export() / "sitecustomize.py", "import os\n");
  auto verify = df({"gate", "verify"});
  EXPECT_EQ(verify.exit_code, 1) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("TAMPERED (export_extra)"), std::string::npos) << verify.out;
  EXPECT_FALSE(std::filesystem::exists(only_export() / "sitecustomize.py"));
  std::filesystem::remove(only_export() / "c.py");
  std::filesystem::create_symlink(repo_ / "c.py", only_export() / "c.py");
  verify = df({"gate", "verify", "--json"});
  EXPECT_EQ(verify.exit_code, 1) << verify.out << verify.err;
  EXPECT_NE(J::parse(verify.out)["trusted ref export"].dump().find("export_link"), std::string::npos) << verify.out;
  EXPECT_EQ(df({"gate", "verify"}).exit_code, 0) << "the fresh export verifies";
  EXPECT_EQ(q("SELECT COUNT(*) FROM tamper_events"), "4");
  EXPECT_EQ(df({"audit"}).exit_code, 1);
}

// A cached build of the trusted ref (the reference is its build) whose
// binary is replaced between runs: rebuilt before use, a tamper event.
TEST_F(TrustedGround, ATamperedCachedRevisionBuildIsRebuiltAndRecorded) {
  ASSERT_EQ(make({{"c.py", kWriter},
                  {"ref.py", "#!/usr/bin/env python3\n" + kWriter},
                  {"gates/g.yaml", gate_yaml("[ref]", "build:\n  commands:\n    - [install, -D, -m, \"755\", \"{src}/ref.py\", \"{build}/ref\"]\n"
                                                      "  bin: \"{build}\"\n")}}),
            "");
  manifest("a", "b");
  const auto first = run();
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  std::vector<std::filesystem::path> built;
  for (const auto& e : std::filesystem::recursive_directory_iterator(repo_ / ".densefeed" / "ledger-builds")) {
    if (e.path().filename() == "ref" && e.path().parent_path().filename() == "build") built.push_back(e.path());
  }
  ASSERT_FALSE(built.empty());
  const auto marker = dir_ / "planted-reference-ran";
  for (const auto& b : built) {
    testing::write_file(b, "#!/bin/sh\ntouch '" + marker.string() + "'\nexit 1\n");
    std::filesystem::permissions(b, std::filesystem::perms::owner_all);
  }
  const auto second = run();
  EXPECT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the replaced binary ran";
  EXPECT_EQ(q("SELECT DISTINCT kind || ' ' || substr(path, -9) FROM tamper_events"), "build_seal build/ref");
  const auto events = q("SELECT COUNT(*) FROM tamper_events");
  EXPECT_NE(testing::read_file(built.front()).find("python"), std::string::npos) << "rebuilt";
  // Untouched, the rebuilt cache is reused with no new event.
  EXPECT_EQ(run().exit_code, 0);
  EXPECT_EQ(q("SELECT COUNT(*) FROM tamper_events"), events);
  EXPECT_EQ(df({"audit"}).exit_code, 1);
  expect_chain_intact();
}

// Pending results: an honest one (kept by a run that found the write lock
// held) is recorded; forged, unsigned and transplanted ones are refused,
// kept, named, and nothing of them is recorded.
TEST_F(TrustedGround, ForgedUnsignedAndTransplantedPendingResultsAreRefusedAndTheHonestOneRecorded) {
  ASSERT_EQ(make({{"c.py", kWriter}, {"ref.py", "import time; time.sleep(1.5)\n" + kWriter},
                  {"gates/g.yaml", gate_yaml("[python3, \"{project}/ref.py\"]", "timeout_s: 60\n")}}),
            "");
  manifest("b");  // red
  const std::string db = ledger().string();
  const std::string wait = "i=0; until [ \"$(sqlite3 " + db + " 'SELECT COUNT(*) FROM experiments' 2>/dev/null)\" = 1 ]; do "
                           "i=$((i+1)); [ $i -gt 1200 ] && break; sleep 0.05; done; ";
  const std::string hold = "python3 -c \"import sqlite3, time; c = sqlite3.connect('" + db +
                           "', isolation_level=None, timeout=30); c.execute('BEGIN IMMEDIATE'); time.sleep(6); c.execute('ROLLBACK')\"; ";
  const auto held = testing::run_cli("/bin/sh", {"-c", "DENSEFEED_LEDGER_BUSY_S=1 " + kExe + " run " + (dir_ / "m.yaml").string() +
                                                       " --no-bench >/dev/null 2>&1 & pid=$!; " + wait + hold + "wait $pid; echo rc=$?"},
                                     repo_, env_);
  ASSERT_NE(held.out.find("rc=3"), std::string::npos) << held.out << held.err;
  const auto file_a = runs() / "1" / kPendingGateRunFile;
  ASSERT_TRUE(std::filesystem::is_regular_file(file_a));
  const J honest = J::parse(testing::read_file(file_a));
  ASSERT_EQ(honest["verdict"], "red");
  ASSERT_TRUE(honest.contains("signature") && honest.contains("nonce")) << honest.dump();
  // B: submitted, never started.
  testing::write_file(dir_ / "b.yaml", "experiment: b\nhypothesis: h\npredicted_effect: p\ngate: g\n"
                                       "candidate: {revision: WORKTREE, params: {m: a}}\nbase: {revision: HEAD, params: {m: b}}\n");
  ASSERT_EQ(df({"submit", (dir_ / "b.yaml").string()}).exit_code, 0);
  const auto file_b = runs() / "2" / kPendingGateRunFile;

  const auto refused = [&](const std::filesystem::path& file, const J& doc, const std::string& refusal) {
    SCOPED_TRACE(refusal);
    testing::write_file(file, doc.dump(1));
    const auto r = df({"ledger", "recover", "--json"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    const J out = J::parse(r.out);
    ASSERT_EQ(out["recovered"].size(), 1u) << r.out;
    EXPECT_EQ(out["recovered"][0]["outcome"], "refused") << r.out;
    EXPECT_EQ(out["recovered"][0]["refusal"], refusal) << r.out;
    EXPECT_TRUE(std::filesystem::is_regular_file(file)) << "a refused file is kept";
    const auto text = df({"ledger", "recover"});
    EXPECT_NE(text.out.find("REFUSED (" + refusal + ")"), std::string::npos) << text.out;
    EXPECT_EQ(q("SELECT COUNT(*) FROM gate_runs"), "0") << "nothing of a refused file is recorded";
    std::filesystem::remove(file);
  };
  // Forged: the verdict flipped to green, the signature kept.
  J forged = honest;
  forged["verdict"] = "green";
  for (auto& c : forged["cases"]) c["verdict"] = "green";
  std::filesystem::remove(file_a);
  refused(file_a, forged, "altered");
  J bare = honest;
  bare.erase("signature");
  refused(file_a, bare, "unsigned");
  // A's file moved into B's run folder, as it is.
  refused(file_b, honest, "transplanted");
  // Even re-signed by one who holds the key, B was never started: no nonce of its own.
  J for_b = honest;
  for_b["experiment_id"] = 2;
  for (const auto& [k, v] : env_) ::setenv(k.c_str(), v.c_str(), 1);  // where densefeed keeps the key for this ledger
  const auto key = find_ledger_key(ledger(), ledger_key_fingerprint(ledger()), false);
  for_b["signature"] = hmac_sha256_hex(key.bytes, pending_signed_message(for_b));
  refused(file_b, for_b, "never started");

  // The honest file: recorded, red as it was.
  testing::write_file(file_a, honest.dump(1));
  const auto r = df({"ledger", "recover", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const J out = J::parse(r.out);
  ASSERT_EQ(out["recovered"].size(), 1u) << r.out;
  EXPECT_EQ(out["recovered"][0]["outcome"], "recorded");
  EXPECT_EQ(out["recovered"][0]["verdict"], "red");
  EXPECT_FALSE(std::filesystem::exists(file_a));
  expect_chain_intact();
}

// The hostile trial's race: the agent's shell changes the export after the
// run checked it, while the reference runs from it (here: a file planted in
// it once the reference's run folder appears). Checked again once the gate
// ran: a tamper event, and the gate stage an error, never green.
TEST_F(TrustedGround, AnExportChangedWhileTheGateRunsMakesTheGateAnErrorAndATamperEvent) {
  ASSERT_EQ(make({{"c.py", kWriter}, {"ref.py", kWriter}, {"gates/g.yaml", gate_yaml("[python3, \"{project}/ref.py\"]")}}), "");
  manifest("a", "b");  // the candidate right: green under the true gate
  const auto first = run();
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  ASSERT_EQ(q("SELECT COUNT(*) FROM tamper_events"), "0");
  const auto exp = only_export();
  std::atomic<bool> planted{false}, stop{false};
  std::thread watcher([&] {
    for (int i = 0; i < 60000 && !stop; ++i) {
      std::error_code ec;
      if (std::filesystem::exists(runs() / "2" / "reference-000", ec)) {
        testing::write_file(exp / "planted.py", "print('planted')\n");
        planted = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  const auto second = run();
  stop = true;
  watcher.join();
  ASSERT_TRUE(planted) << "the reference of the second run never started";
  EXPECT_NE(second.exit_code, 0) << second.out << second.err;
  const J doc = J::parse(second.out, nullptr, false);
  EXPECT_EQ(doc["stages"]["gate"]["verdict"], "error") << doc["stages"]["gate"].dump(1).substr(0, 2000);
  EXPECT_NE(doc["stages"]["gate"].value("reason", "").find("changed while the gate ran"), std::string::npos)
      << doc["stages"]["gate"].dump(1).substr(0, 2000);
  EXPECT_EQ(q("SELECT kind FROM tamper_events ORDER BY id LIMIT 1"), "export_extra");
  EXPECT_EQ(df({"audit"}).exit_code, 1);
  expect_chain_intact();
}

}  // namespace
}  // namespace densefeed
