// The two example experiments through the CLI, and the ways a run must refuse
// or go red before any case: checked by exit code, JSON report and ledger rows.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <span>

#include "npy_writer.h"
#include "schema_validator.h"
#include "sha256.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;
// The build's harnesses (affine_chain, affine_chain_reference), named bare in
// the gates: on PATH, so that a copy of the checkout, which has no build/bin
// of its own, finds them too.
const std::map<std::string, std::string> kEnv = testing::with_on_path(std::filesystem::path(kExe).parent_path());

// First column of the first row of `sql`, as text ("" if none).
std::string query(const std::filesystem::path& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* stmt = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
    const auto* text = sqlite3_column_text(stmt, 0);
    out = text ? reinterpret_cast<const char*>(text) : "NULL";
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

class CliEndToEnd : public ::testing::Test {
 protected:
  // densefeed's own project, its gates as checked out (--trust-worktree: a
  // test of this checkout must not depend on what its main branch holds, or
  // on there being one).
  testing::CliResult densefeed(std::vector<std::string> args) {
    args.insert(args.begin(), {"--project", kRoot.string(), "--trust-worktree"});
    return testing::run_cli(kExe, args, dir_.path(), kEnv);
  }
  // densefeed with exactly these arguments (no project given: found from the
  // temp folder upwards, or not at all).
  testing::CliResult densefeed_bare(std::vector<std::string> args) { return testing::run_cli(kExe, args, dir_.path(), kEnv); }
  std::filesystem::path ledger() const { return dir_ / "ledger.db"; }
  testing::TempDir dir_;
};

TEST_F(CliEndToEnd, Tf32IsRedWithATableOfErrorAgainstShardsAndTf32x3IsGreenWithASpeedup) {
  const auto red = densefeed({"run", (kRoot / "experiments" / "cp-affine-chain-tf32.yaml").string(), "--ledger",
                              ledger().string(), "--json", "--jobs", "2"});
  ASSERT_EQ(red.exit_code, 1) << red.out << red.err;
  const auto r = nlohmann::json::parse(red.out);
  const SchemaValidator report_schema(kRoot / "schemas" / "run-report.schema.json");
  EXPECT_EQ(report_schema.errors(r), std::vector<std::string>{});
  EXPECT_EQ(r["verdict"], "red");
  EXPECT_EQ(r["stages"]["gate"]["verdict"], "red");
  EXPECT_EQ(r["stages"]["bench"]["status"], "skipped");
  EXPECT_NE(r["stages"]["bench"]["reason"].get<std::string>().find("never measured on a red gate"), std::string::npos);
  std::size_t red_cases = 0;
  for (const auto& c : r["stages"]["gate"]["cases"]) {
    const auto& v = c["values"];
    const bool one_shard = v["shards"] == 1;
    const bool fast = v["regime"] == "fast-decay";
    // With 2 shards of 5120 tokens, the varlen layout's second sequence starts
    // inside shard 0, so its transition is zero and no TF32 product reaches
    // any final state.
    const bool no_chained_product = v["seq_lens"] == "3000,4000,3240" && v["shards"] == 2;
    // Only a grid over shard counts with long-memory inputs sees the bug.
    if (one_shard || fast || no_chained_product) EXPECT_EQ(c["verdict"], "green") << c.dump();
    if (!one_shard && !fast && !no_chained_product) {
      EXPECT_EQ(c["verdict"], "red") << c.dump();
      const auto& m = c["outputs"][0];
      EXPECT_EQ(m["metrics"][0]["metric"], "rel_l2");
      EXPECT_GT(m["metrics"][0]["value"].get<double>(), m["metrics"][0]["bound"].get<double>());
      EXPECT_EQ(m["worst_index"].size(), 4u);
      ++red_cases;
    }
  }
  EXPECT_EQ(red_cases, 5u + 5u + 2u);  // shards 2..64 at T=8000 and 8192, and the varlen layout on 4 and 8 shards
  bool long_memory_table = false;
  for (const auto& t : r["stages"]["gate"]["trend_tables"]) {
    if (t["metric"] == "rel_l2" && t["group"] == "regime=long-memory") {
      long_memory_table = true;
      EXPECT_EQ(t["columns"], nlohmann::json({1, 2, 4, 8, 16, 64}));
      EXPECT_FALSE(t["trends"].empty());
    }
  }
  EXPECT_TRUE(long_memory_table);

  const auto green = densefeed({"run", (kRoot / "experiments" / "cp-affine-chain-tf32x3.yaml").string(), "--ledger",
                                ledger().string(), "--json", "--jobs", "2"});
  ASSERT_EQ(green.exit_code, 0) << green.out << green.err;
  const auto g = nlohmann::json::parse(green.out);
  EXPECT_EQ(report_schema.errors(g), std::vector<std::string>{});
  EXPECT_EQ(g["verdict"], "green");
  for (const auto& c : g["stages"]["gate"]["cases"]) EXPECT_EQ(c["verdict"], "green") << c.dump();
  ASSERT_EQ(g["stages"]["bench"]["cases"].size(), 1u);
  const auto& b = g["stages"]["bench"]["cases"][0];
  EXPECT_GT(b["speedup"].get<double>(), 0);
  EXPECT_LE(b["speedup_ci"][0].get<double>(), b["speedup"].get<double>());
  EXPECT_GE(b["speedup_ci"][1].get<double>(), b["speedup"].get<double>());
  EXPECT_GE(b["rounds"].get<int>(), 4);  // the first look
  // tf32x3 does three products where tf32 does one: on the CPU path it is
  // about half as fast. Timing is not asserted here (tests/perf measures the
  // decision); only that a loaded machine can at worst make it inconclusive,
  // never turn it around.
  EXPECT_TRUE(b["verdict"] == "slower" || b["verdict"] == "inconclusive") << b.dump();
  EXPECT_NEAR(b["prediction_error"].get<double>(), b["speedup"].get<double>() / 0.5 - 1, 1e-12);

  // The ledger holds both, and a speedup only for the green one.
  const auto red_id = std::to_string(r["experiment_id"].get<int>());
  const auto green_id = std::to_string(g["experiment_id"].get<int>());
  EXPECT_EQ(query(ledger(), "SELECT COUNT(*) FROM experiments"), "2");
  EXPECT_EQ(query(ledger(), "SELECT verdict FROM gate_runs WHERE experiment_id = " + red_id), "red");
  EXPECT_EQ(query(ledger(), "SELECT verdict FROM gate_runs WHERE experiment_id = " + green_id), "green");
  EXPECT_EQ(query(ledger(), "SELECT COUNT(*) FROM bench_cases WHERE experiment_id = " + red_id), "0");
  EXPECT_EQ(query(ledger(), "SELECT COUNT(*) FROM bench_cases WHERE experiment_id = " + green_id), "1");
  EXPECT_EQ(query(ledger(), "SELECT verdict FROM bench_cases WHERE experiment_id = " + green_id), b["verdict"].get<std::string>());
  EXPECT_EQ(query(ledger(), "SELECT COUNT(*) FROM environments WHERE experiment_id = " + green_id), "1");
  EXPECT_EQ(query(ledger(), "SELECT COUNT(*) FROM environments WHERE experiment_id = " + red_id), "0");
  EXPECT_EQ(query(ledger(), "SELECT COUNT(*) FROM gate_cases c JOIN gate_runs g ON c.gate_run_id = g.id WHERE g.experiment_id = " + red_id),
            "29");
  EXPECT_EQ(query(ledger(), "SELECT manifest_sha256 FROM experiments WHERE id = " + red_id),
            sha256_file(kRoot / "experiments" / "cp-affine-chain-tf32.yaml"));
  EXPECT_EQ(query(ledger(), "SELECT seed FROM gate_runs WHERE experiment_id = " + red_id), r["seed"].get<std::string>());
  EXPECT_EQ(query(ledger(), "SELECT COUNT(*) FROM gate_metrics m JOIN gate_cases c ON m.gate_case_id = c.id "
                            "JOIN gate_runs g ON c.gate_run_id = g.id WHERE g.experiment_id = " + red_id + " AND m.passed = 0"),
            "24");  // rel_l2 and max_abs of the 12 red cases

  const auto list = densefeed({"ledger", "list", "--ledger", ledger().string()});
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_NE(list.out.find("cp-affine-chain-tf32x3"), std::string::npos) << list.out;
  const auto show = densefeed({"ledger", "show", red_id, "--ledger", ledger().string()});
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_NE(show.out.find("regime=long-memory T=8192 shards=64"), std::string::npos) << show.out;
  EXPECT_EQ(densefeed({"ledger", "show", "999", "--ledger", ledger().string()}).exit_code, 2);
}

TEST_F(CliEndToEnd, TextReportIsAttributable) {
  const auto red = densefeed({"run", (kRoot / "experiments" / "cp-affine-chain-tf32.yaml").string(), "--ledger",
                              ledger().string(), "--jobs", "2", "--seed", "7"});
  ASSERT_EQ(red.exit_code, 1) << red.err;
  for (const char* needle : {"gate: red", "seed 7", "regime=long-memory T=8192 shards=2", "final_state", "rel_l2",
                             "> bound 1.0e-05", "worst element [", "by T (rows) and shards (columns), regime=long-memory",
                             "trend: T=8192: partitioned: no power law in shards", "largest step x", "unpartitioned to partitioned: x", "bench: not run (the gate is not green"}) {
    EXPECT_NE(red.out.find(needle), std::string::npos) << needle << "\n" << red.out;
  }
}

TEST_F(CliEndToEnd, BadManifestExits2AndLeavesTheLedgerAsItWas) {
  // A first run creates the ledger; every bad manifest after it must leave
  // the file byte for byte as it was.
  const auto seed_run = densefeed({"run", (kRoot / "experiments" / "cp-affine-chain-tf32.yaml").string(), "--ledger",
                                   ledger().string(), "--no-bench", "--jobs", "2"});
  ASSERT_EQ(seed_run.exit_code, 1);
  const std::string before = sha256_file(ledger());
  const std::string good = testing::read_file(kRoot / "experiments" / "cp-affine-chain-tf32x3.yaml");
  struct Bad {
    std::string name, text, expect;
  };
  std::vector<Bad> bad = {
      {"not-yaml", "experiment: [oops\n", "not valid YAML"},
      {"unknown-key", good + "shortcut: true\n", "field 'shortcut': unknown key"},
      {"wrong-type", [&] {
         std::string t = good;
         t.replace(t.find("risk: [numerics]"), 16, "risk: numerics");
         return t;
       }(),
       "field 'risk': Value type not permitted by 'type' constraint.; expected type array"},
      {"missing", good.substr(good.find("author:")), "field 'experiment': missing required field"},
      {"duplicate", good + "gate: cp-affine-chain\n", "duplicate key 'gate'"},
      {"undeclared-param", [&] {
         std::string t = good;
         t.replace(t.find("{precision: tf32x3}"), 19, "{precision: tf32x3, shards: 1}");
         return t;
       }(),
       "gate 'cp-affine-chain' declares no parameter 'shards'"},
      {"no-gate", [&] {
         std::string t = good;
         t.replace(t.find("gate: cp-affine-chain"), 21, "gate: fast-and-wrong");
         return t;
       }(),
       "no gate named 'fast-and-wrong'"},
      {"alias-bomb",
       "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
       "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
       "g: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n",
       "more than 100000 values"},
      {"self-alias", "experiment: &a [*a]\n", "nested deeper than 128 levels (a self-referencing alias?)"},
      {"not-utf8", "experiment: ok\nhypothesis: \xff\xfe\n", ":2:13: byte 0xFF is not valid UTF-8"},
      {"merge-key", "base: &b {revision: WORKTREE}\ncandidate:\n  <<: *b\n", "YAML merge keys (<<) are not supported"},
      {"tabs", "experiment: x\ncandidate:\n\trevision: WORKTREE\n", "YAML indents with spaces only"},
      {"too-big", good + "# " + std::string(2 << 20, 'x') + "\n", "more than the 1048576 a YAML file here may have"},
  };
  for (const auto& b : bad) {
    const auto path = dir_ / (b.name + ".yaml");
    testing::write_file(path, b.text);
    const auto res = densefeed({"run", path.string(), "--ledger", ledger().string()});
    EXPECT_EQ(res.exit_code, 2) << b.name << ": " << res.err;
    EXPECT_NE(res.err.find(path.string() + ":"), std::string::npos) << b.name << ": " << res.err;
    EXPECT_NE(res.err.find(b.expect), std::string::npos) << b.name << ": " << res.err;
    EXPECT_EQ(sha256_file(ledger()), before) << b.name;
  }
  // Not a regular file: a device would never end.
  std::filesystem::create_symlink("/dev/zero", dir_ / "zero.yaml");
  const auto zero = densefeed({"run", (dir_ / "zero.yaml").string(), "--ledger", ledger().string()});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("not a regular file"), std::string::npos) << zero.err;
  const auto dir = densefeed({"run", dir_.path().string(), "--ledger", ledger().string()});
  EXPECT_NE(dir.err.find("is a directory, expected a YAML file"), std::string::npos) << dir.err;
  // Seeds and ids are parsed strictly: no sign, no wrap-around.
  const auto manifest = (kRoot / "experiments" / "cp-affine-chain-tf32x3.yaml").string();
  for (const char* seed : {"-1", "18446744073709551616", "12abc", "+5"}) {
    const auto res = densefeed({"run", manifest, "--ledger", ledger().string(), "--seed", seed});
    EXPECT_EQ(res.exit_code, 2) << seed;
    EXPECT_NE(res.err.find("field '--seed': expected an integer from 0 to 18446744073709551615"), std::string::npos) << res.err;
  }
  EXPECT_EQ(densefeed({"ledger", "show", "99999999999999999999", "--ledger", ledger().string()}).exit_code, 2);
  EXPECT_EQ(sha256_file(ledger()), before);
  // A database that is not a ledger is neither read nor written.
  const auto foreign = dir_ / "other.sqlite";
  {
    sqlite3* db = nullptr;
    sqlite3_open(foreign.c_str(), &db);
    sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  const std::string foreign_before = sha256_file(foreign);
  const auto list_foreign = densefeed({"ledger", "list", "--ledger", foreign.string()});
  EXPECT_EQ(list_foreign.exit_code, 2);
  EXPECT_NE(list_foreign.err.find(foreign.string() + ": an SQLite database but not a densefeed ledger"), std::string::npos)
      << list_foreign.err;
  EXPECT_EQ(densefeed({"run", manifest, "--ledger", foreign.string()}).exit_code, 2);
  EXPECT_EQ(sha256_file(foreign), foreign_before);
  testing::write_file(dir_ / "junk.db", "this is not sqlite at all, just text that is long enough........\n");
  const auto junk = densefeed({"ledger", "list", "--ledger", (dir_ / "junk.db").string()});
  EXPECT_EQ(junk.exit_code, 2);
  EXPECT_NE(junk.err.find("junk.db: not an SQLite database"), std::string::npos) << junk.err;

  // With --json the error is a document an agent can read.
  const auto res = densefeed({"run", (dir_ / "duplicate.yaml").string(), "--ledger", ledger().string(), "--json"});
  const auto doc = nlohmann::json::parse(res.out);
  EXPECT_EQ(doc["verdict"], "bad-input");
  EXPECT_EQ(doc["details"]["field"], "gate");
  EXPECT_GT(doc["details"]["line"].get<int>(), 1);
  // A bad manifest never creates a ledger either.
  const auto fresh = dir_ / "fresh" / "ledger.db";
  EXPECT_EQ(densefeed({"run", (dir_ / "not-yaml.yaml").string(), "--ledger", fresh.string()}).exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(fresh));
}

// A copy of densefeed's project (its gates, experiments and kernels) in a git
// repository of its own, everything committed on main, to tamper with.
class TamperedRoot : public CliEndToEnd {
 protected:
  void SetUp() override {
    root_ = dir_ / "root";
    for (const char* sub : {"gates", "experiments", "kernels"}) {
      std::filesystem::create_directories(root_ / sub);
      std::filesystem::copy(kRoot / sub, root_ / sub, std::filesystem::copy_options::recursive);
    }
    std::filesystem::copy_file(kRoot / "densefeed.yaml", root_ / "densefeed.yaml");
    ASSERT_EQ(testing::git_init_main(root_), "");
  }
  // densefeed on the copy: its gates from main, or with `trust_worktree` from
  // the copy's folder as it is.
  testing::CliResult df(std::vector<std::string> args, bool trust_worktree) {
    if (trust_worktree) args.insert(args.begin(), "--trust-worktree");
    args.insert(args.begin(), {"--project", root_.string()});
    return densefeed_bare(args);
  }
  nlohmann::json run_json(int expected_exit, bool trust_worktree = true) {
    const auto res = df({"run", (root_ / "experiments" / "cp-affine-chain-tf32x3.yaml").string(), "--ledger", ledger().string(),
                         "--json"}, trust_worktree);
    EXPECT_EQ(res.exit_code, expected_exit) << res.out << res.err;
    return nlohmann::json::parse(res.out);
  }
  std::string head() { return testing::git(root_, {"rev-parse", "HEAD"}).out.substr(0, 40); }
  std::filesystem::path root_;
};

TEST_F(TamperedRoot, ModifiedGateIsRedBeforeAnyCaseRuns) {
  auto gate = root_ / "gates" / "cp-affine-chain.yaml";
  std::string text = testing::read_file(gate);
  text.replace(text.find("rel_l2: 1.0e-5"), 14, "rel_l2: 1.0e+0");
  testing::write_file(gate, text);
  // Trusting the folder as it is, the edited gate fails its lock.
  const auto r = run_json(1);
  EXPECT_EQ(r["verdict"], "red");
  EXPECT_TRUE(r["stages"]["gate"]["cases"].empty());
  ASSERT_EQ(r["stages"]["gate"]["lock_problems"].size(), 1u);
  EXPECT_EQ(r["stages"]["gate"]["lock_problems"][0].get<std::string>().rfind("gates/cp-affine-chain.yaml: modified since the lock", 0), 0u);
  EXPECT_EQ(query(ledger(), "SELECT verdict FROM gate_runs"), "red");
  EXPECT_EQ(query(ledger(), "SELECT COUNT(*) FROM gate_cases"), "0");
  EXPECT_NE(query(ledger(), "SELECT lock_problems FROM gate_runs").find("modified since the lock"), std::string::npos);
  // With the gates from main, main's gate is the one that counts, and a
  // WORKTREE candidate that runs beside an edited copy of it is red.
  const auto m = run_json(1, /*trust_worktree=*/false);
  EXPECT_EQ(m["verdict"], "red");
  EXPECT_TRUE(m["stages"]["gate"]["cases"].empty());
  EXPECT_TRUE(m["stages"]["gate"]["lock_problems"].empty());
  EXPECT_NE(m["stages"]["gate"]["reason"].get<std::string>().find(
                "the WORKTREE candidate edits frozen files: gates/cp-affine-chain.yaml differ from the gate store (main at " +
                head().substr(0, 12) + "); no case ran"),
            std::string::npos)
      << m["stages"]["gate"]["reason"];
  EXPECT_EQ(query(ledger(), "SELECT COUNT(*) FROM gate_cases"), "0");
}

TEST_F(TamperedRoot, ModifiedFrozenFileIsRedAndNamed) {
  auto frozen = root_ / "kernels" / "affine_chain" / "inputs.cpp";
  testing::write_file(frozen, testing::read_file(frozen) + "\n// tuned\n");
  const auto r = run_json(1);
  EXPECT_TRUE(r["stages"]["gate"]["cases"].empty());
  EXPECT_EQ(r["stages"]["gate"]["lock_problems"][0].get<std::string>().rfind("kernels/affine_chain/inputs.cpp: modified since the lock", 0), 0u);
  const auto m = run_json(1, /*trust_worktree=*/false);
  EXPECT_TRUE(m["stages"]["gate"]["cases"].empty());
  EXPECT_NE(m["stages"]["gate"]["reason"].get<std::string>().find(
                "the WORKTREE candidate edits frozen files: kernels/affine_chain/inputs.cpp differ from the gate store"),
            std::string::npos)
      << m["stages"]["gate"]["reason"];
}

TEST_F(TamperedRoot, DeletedFrozenFileIsRedAndNamed) {
  std::filesystem::remove(root_ / "kernels" / "affine_chain" / "reference.cpp");
  const auto r = run_json(1);
  EXPECT_TRUE(r["stages"]["gate"]["cases"].empty());
  EXPECT_EQ(r["stages"]["gate"]["lock_problems"][0], "kernels/affine_chain/reference.cpp: locked but missing");
}

TEST_F(TamperedRoot, AnEditedCopyIsNeverTheGateStoreUnlessAPersonSaysSo) {
  // Re-locking an edited copy passes the lock check. The new model: `gate
  // lock` refuses what is not committed on main; the runs read main's gates,
  // so the edited copy is not what they trust; only --trust-worktree makes it
  // so, and provenance tells a reviewer.
  auto gate = root_ / "gates" / "cp-affine-chain.yaml";
  std::string text = testing::read_file(gate);
  text.replace(text.find("rel_l2: 1.0e-5"), 14, "rel_l2: 1.0e+0");
  testing::write_file(gate, text);
  const auto refused = df({"gate", "lock"}, false);
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("not locking: gates/cp-affine-chain.yaml is not committed on the trusted ref (main at " +
                             head().substr(0, 12) + ")"),
            std::string::npos)
      << refused.err;
  ASSERT_EQ(df({"gate", "lock"}, true).exit_code, 0);
  const auto manifest = (root_ / "experiments" / "cp-affine-chain-tf32.yaml").string();

  // Gates from main: the copy's gate and lock are not main's, so nothing runs.
  const auto from_main = df({"run", manifest, "--ledger", ledger().string(), "--json", "--no-bench"}, false);
  EXPECT_EQ(from_main.exit_code, 1) << from_main.out << from_main.err;
  const auto m = nlohmann::json::parse(from_main.out);
  EXPECT_TRUE(m["stages"]["gate"]["cases"].empty());
  EXPECT_NE(m["stages"]["gate"]["reason"].get<std::string>().find(
                "gates/cp-affine-chain.yaml, gates/gates.lock differ from the gate store (main at " + head().substr(0, 12) + ")"),
            std::string::npos)
      << m["stages"]["gate"]["reason"];
  const auto& mp = m["stages"]["gate"]["provenance"];
  EXPECT_FALSE(mp["clean"].get<bool>());
  EXPECT_TRUE(mp["dirty"].get<bool>());
  EXPECT_FALSE(mp["trust_worktree"].get<bool>());
  EXPECT_EQ(mp["trusted_commit"], head());
  EXPECT_EQ(mp["notes"][0], "uncommitted changes to tracked files (gates/cp-affine-chain.yaml, gates/gates.lock)");
  EXPECT_NE(mp["notes"].back().get<std::string>().find("the worktree's copies of gates/cp-affine-chain.yaml, gates/gates.lock "
                                                       "differ from the gate store (main at "),
            std::string::npos)
      << mp.dump(1);

  // --trust-worktree: the re-locked copy passes the lock check and runs,
  // flagged in provenance.
  const auto res = df({"run", manifest, "--ledger", ledger().string(), "--json", "--no-bench"}, true);
  const auto r = nlohmann::json::parse(res.out);
  EXPECT_FALSE(r["stages"]["gate"]["cases"].empty());
  const auto& p = r["stages"]["gate"]["provenance"];
  EXPECT_FALSE(p["clean"].get<bool>());
  EXPECT_TRUE(p["trust_worktree"].get<bool>());
  EXPECT_EQ(p["project"], root_.string());
  EXPECT_EQ(p["commit"], head());
  EXPECT_EQ(p["notes"], nlohmann::json({"uncommitted changes to tracked files (gates/cp-affine-chain.yaml, gates/gates.lock)",
                                        "the gate store is the worktree (--trust-worktree), not the trusted ref"}));
  EXPECT_NE(query(ledger(), "SELECT provenance FROM gate_runs ORDER BY id DESC").find("\"clean\":false"), std::string::npos);
  const auto text_run = df({"run", manifest, "--ledger", ledger().string(), "--no-bench"}, true);
  EXPECT_NE(text_run.out.find("provenance: WARNING (" + root_.string() + "; gates from the worktree of " + root_.string() +
                              " (--trust-worktree)): uncommitted changes to tracked files"),
            std::string::npos)
      << text_run.out;
}

TEST_F(TamperedRoot, AFolderOutsideGitNeedsTrustWorktree) {
  std::filesystem::remove_all(root_ / ".git");
  const auto res = df({"run", (root_ / "experiments" / "cp-affine-chain-tf32x3.yaml").string(), "--ledger", ledger().string(),
                       "--json"}, false);
  EXPECT_EQ(res.exit_code, 2) << res.out << res.err;
  EXPECT_NE(res.out.find("is in no git repository, so there is no trusted ref to read its gates from"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("--trust-worktree"), std::string::npos) << res.out;
  EXPECT_FALSE(std::filesystem::exists(ledger()));
  // Trusted as it is, a folder outside git runs, and provenance says both
  // (recorded before any case: here no case runs, as no gate is locked).
  std::filesystem::remove(root_ / "gates" / "gates.lock");
  const auto unlocked = run_json(1);
  EXPECT_EQ(unlocked["stages"]["gate"]["provenance"]["notes"],
            nlohmann::json({"not a git repository", "the gate store is the worktree (--trust-worktree), not the trusted ref"}));
  EXPECT_EQ(unlocked["stages"]["gate"]["provenance"]["commit"], "");
  EXPECT_EQ(unlocked["next"][0]["kind"], "ask-to-lock") << unlocked["next"].dump(1);
}

TEST_F(CliEndToEnd, CompareTwoTensorFiles) {
  std::vector<double> ref(1000);
  std::vector<float> good(1000), bad(1000);
  for (std::size_t i = 0; i < ref.size(); ++i) {
    ref[i] = std::sin(0.1 * static_cast<double>(i));
    good[i] = static_cast<float>(ref[i]);
    bad[i] = good[i];
  }
  bad[123] += 0.5f;
  const std::vector<std::size_t> shape = {10, 100};
  write_npy(dir_ / "ref.npy", std::span<const double>(ref), shape);
  write_npy(dir_ / "good.npy", std::span<const float>(good), shape);
  write_npy(dir_ / "bad.npy", std::span<const float>(bad), shape);

  const auto ok = densefeed({"compare", (dir_ / "ref.npy").string(), (dir_ / "good.npy").string()});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;  // float32's default bound, rel_l2 1e-5
  const auto red = densefeed({"compare", (dir_ / "ref.npy").string(), (dir_ / "bad.npy").string(), "--max-abs", "1e-4",
                              "--json"});
  EXPECT_EQ(red.exit_code, 1);
  const auto doc = nlohmann::json::parse(red.out);
  EXPECT_EQ(doc["verdict"], "red");
  EXPECT_EQ(doc["worst_index"], nlohmann::json({1, 23}));
  EXPECT_EQ(doc["metrics"][0]["metric"], "max_abs");
  EXPECT_EQ(doc["metrics"][0]["violations"], 1);
  const auto text = densefeed({"compare", (dir_ / "ref.npy").string(), (dir_ / "bad.npy").string(), "--rtol", "1e-5",
                               "--atol", "1e-6", "--partition-axis", "0"});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find("violated by 1 of 1000 element(s)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("first failing slice along axis 0: 1 (positions 1..1)"), std::string::npos) << text.out;
  // An unreadable candidate or a mismatched bound is bad input (exit 2), naming the file.
  testing::write_file(dir_ / "junk.npy", "junk");
  const auto junk = densefeed({"compare", (dir_ / "ref.npy").string(), (dir_ / "junk.npy").string()});
  EXPECT_EQ(junk.exit_code, 2);
  EXPECT_NE(junk.err.find("junk.npy"), std::string::npos) << junk.err;
  const auto negative = densefeed({"compare", (dir_ / "ref.npy").string(), (dir_ / "good.npy").string(), "--rel-l2", "-1"});
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.err.find("field '--rel-l2': expected a finite bound >= 0"), std::string::npos) << negative.err;
  const auto axis = densefeed({"compare", (dir_ / "ref.npy").string(), (dir_ / "good.npy").string(), "--partition-axis", "7"});
  EXPECT_EQ(axis.exit_code, 2);
  EXPECT_NE(axis.err.find("the tensors have 2 dimension(s)"), std::string::npos) << axis.err;
  EXPECT_EQ(junk.err.find((dir_ / "junk.npy").string() + ": " + (dir_ / "junk.npy").string()), std::string::npos) << junk.err;
  const auto ulp = densefeed({"compare", (dir_ / "good.npy").string(), (dir_ / "ref.npy").string(), "--ulp", "1"});
  EXPECT_EQ(ulp.exit_code, 2);
  EXPECT_NE(ulp.err.find("--ulp applies to float32, float16 and bfloat16 candidates, not float64"), std::string::npos) << ulp.err;
}

TEST_F(CliEndToEnd, CompareCallsABrokenReferenceAnErrorAsTheGateDoes) {
  std::vector<double> ref(100), with_nan(100);
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = with_nan[i] = std::cos(0.3 * static_cast<double>(i));
  with_nan[17] = std::nan("");
  const std::vector<std::size_t> shape = {100};
  write_npy(dir_ / "cand.npy", std::span<const double>(ref), shape);
  write_npy(dir_ / "nan.npy", std::span<const double>(with_nan), shape);
  testing::write_file(dir_ / "junk.npy", "junk");
  // Header intact, data cut short.
  const auto whole = testing::read_file(dir_ / "cand.npy");
  testing::write_file(dir_ / "cut.npy", whole.substr(0, whole.size() - 80));
  // The gate's rule: the reference's defects are errors (verdict error, exit
  // 3 as the README's table says), with a message naming the reference.
  for (const auto& [name, why] : {std::pair{"junk.npy", "cannot be read as a tensor: bad magic"},
                                  std::pair{"cut.npy", "cannot be read as a tensor: data truncated"}}) {
    const auto reference = (dir_ / name).string();
    const auto json = densefeed({"compare", reference, (dir_ / "cand.npy").string(), "--json"});
    EXPECT_EQ(json.exit_code, 3) << name << "\n" << json.out << json.err;
    const auto doc = nlohmann::json::parse(json.out);
    EXPECT_EQ(doc["verdict"], "error") << json.out;
    EXPECT_EQ(doc["reference"], reference);
    EXPECT_EQ(doc["reason"].get<std::string>().rfind("the reference " + reference + " " + why, 0), 0u) << json.out;
    EXPECT_EQ(doc["metrics"], nlohmann::json::array());
    const auto text = densefeed({"compare", reference, (dir_ / "cand.npy").string()});
    EXPECT_EQ(text.exit_code, 3) << text.out << text.err;
    EXPECT_EQ(text.out.rfind((dir_ / "cand.npy").string() + " against " + reference + ": error — the reference " + reference + " " + why, 0),
              0u)
        << text.out;
  }
  // NaN in the reference: error too, never red.
  const auto nan = densefeed({"compare", (dir_ / "nan.npy").string(), (dir_ / "cand.npy").string(), "--json"});
  EXPECT_EQ(nan.exit_code, 3) << nan.out << nan.err;
  EXPECT_EQ(nlohmann::json::parse(nan.out)["reason"], "the reference has 1 NaN/Inf element(s)") << nan.out;
  // A reference that is not there at all is a mistake on the command line.
  const auto missing = densefeed({"compare", (dir_ / "nowhere.npy").string(), (dir_ / "cand.npy").string()});
  EXPECT_EQ(missing.exit_code, 2) << missing.out << missing.err;
  EXPECT_NE(missing.err.find("nowhere.npy: no such file (the reference to compare against)"), std::string::npos) << missing.err;
}

TEST_F(CliEndToEnd, GateVerifyRefusesAProjectWithoutGates) {
  const auto empty = dir_ / "empty";
  testing::write_project(empty);
  const auto res = densefeed_bare({"--project", empty.string(), "gate", "verify"});
  EXPECT_EQ(res.exit_code, 2);
  EXPECT_NE(res.err.find("no gates (*.yaml) in the project's gates folder (gates in " + (empty / "densefeed.yaml").string() + ")"),
            std::string::npos)
      << res.err;
  // Without densefeed.yaml there is no project at all.
  const auto none = densefeed_bare({"--project", dir_.path().string(), "gate", "verify"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no densefeed.yaml in " + dir_.path().string()), std::string::npos) << none.err;
}

TEST_F(TamperedRoot, GateVerifyForCi) {
  const auto ok = df({"gate", "verify"}, false);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  // One line per gate in gates/, every one ok (the list grows with the gates).
  EXPECT_NE(ok.out.find("cp-affine-chain: ok\n"), std::string::npos) << ok.out;
  EXPECT_EQ(ok.out.find("NOT OK"), std::string::npos) << ok.out;
  auto frozen = root_ / "kernels" / "affine_chain" / "chunk_pairs.cpp";
  testing::write_file(frozen, testing::read_file(frozen) + "\n");
  const auto bad = df({"gate", "verify"}, false);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("kernels/affine_chain/chunk_pairs.cpp: modified since the lock"), std::string::npos) << bad.out;
  // A person re-locks what is committed on main, and commits the lock.
  const auto uncommitted = df({"gate", "lock"}, false);
  EXPECT_EQ(uncommitted.exit_code, 2);
  EXPECT_NE(uncommitted.err.find("not locking: kernels/affine_chain/chunk_pairs.cpp is not committed on the trusted ref"),
            std::string::npos)
      << uncommitted.err;
  ASSERT_EQ(testing::git_commit_all(root_, "chunk_pairs: a blank line"), "");
  const auto relock = df({"gate", "lock"}, false);
  EXPECT_EQ(relock.out, "changed kernels/affine_chain/chunk_pairs.cpp\ncommit gates/gates.lock on main so that runs use it\n")
      << relock.err;
  EXPECT_EQ(df({"gate", "verify"}, false).exit_code, 0);
}

}  // namespace
}  // namespace densefeed
