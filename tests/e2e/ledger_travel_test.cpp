// Issue 31, artifacts that travel and an exit for a regression, through the
// real CLI and a real ledger:
// - LedgerTravel: a ledger's backup and a plain copy are read, reported and
//   audited in another folder and HOME when its key is given (--ledger-key,
//   DENSEFEED_LEDGER_KEY); the key is found by the ledger's identity, a wrong
//   one is refused naming the fingerprint it expects;
// - AuditJUnit: audit's JUnit file is valid against Jenkins' junit-10.xsd
//   (fetched from PyPI's pytest sdist, checked with xmllint), has times,
//   and is written on every exit;
// - FailOn: run and audit --fail-on slower fail CI on a green gate with a
//   slower bench.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "ledger_identity.h"
#include "sha256.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;

// The cheat gate of gate_cheats_test, with its bench: a candidate whose
// `slowdown` param makes each bench call that many times longer.
const char* kGate = R"(gate: cheat
description: y_i = scale * sin(seed / 1000 + i), float32 against a float64 reference.
reference:
  command: [cheat_harness, --role, reference, --n, "{case.n}", --scale, "{case.scale}",
            --ref-fault, "{case.ref_fault}", --seed, "{seed}", --out, "{out}"]
candidate:
  command: [cheat_harness, --role, candidate, --mode, "{param.mode}", --n, "{case.n}",
            --scale, "{case.scale}", --slowdown, "{param.slowdown}", --seed, "{seed}", --out, "{out}"]
params:
  mode: {type: string, enum: [honest, nan], default: honest}
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
profiles:
  quick: {ref_fault: [none]}
  full: {ref_fault: [none]}
timeout_s: 5
freezes: []
bench:
  warmup: 1
  iters: 5
  cases: [{n: 1000}]
)";

class Artifacts : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "root";
    testing::write_project(root_);
    testing::write_file(root_ / "gates" / "cheat.yaml", kGate);
    ASSERT_EQ(cli({"--trust-worktree", "gate", "lock"}).exit_code, 0);
    ledger_ = dir_ / "ci" / "ledger.db";
  }
  // HOME (and XDG_CONFIG_HOME) `home` under the test's folder, PATH with the harnesses.
  std::map<std::string, std::string> env(const std::string& home, std::map<std::string, std::string> more = {}) const {
    more["HOME"] = (dir_ / home).string();
    more["XDG_CONFIG_HOME"] = (dir_ / home / ".config").string();
    return testing::with_on_path(std::filesystem::path(kExe).parent_path(), more);
  }
  testing::CliResult cli(std::vector<std::string> args, const std::string& home = "home",
                         std::map<std::string, std::string> more = {}) const {
    args.insert(args.begin(), {"--project", root_.string()});
    return testing::run_cli(kExe, args, dir_.path(), env(home, std::move(more)));
  }
  // Runs the cheat gate with the candidate `slowdown` times slower than its base.
  testing::CliResult run(double slowdown, std::vector<std::string> extra = {}) {
    const auto manifest = dir_ / "slow.yaml";
    testing::write_file(manifest, "experiment: slow\nhypothesis: h\npredicted_effect: p\ngate: cheat\n"
                                  "candidate: {revision: WORKTREE, params: {slowdown: " + std::to_string(slowdown) + "}}\n"
                                  "base: {revision: WORKTREE, params: {slowdown: 1.0}}\n");
    std::vector<std::string> args = {"--trust-worktree", "run", manifest.string(), "--ledger", ledger_.string(), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return cli(args);
  }
  // A green experiment without its bench (experiment 1); its exit code.
  int green() {
    const auto r = run(1.5, {"--no-bench"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r.exit_code;
  }
  // The key file the first run made: keys/<ledger identity>.key in HOME "home".
  std::filesystem::path made_key() const {
    const std::string fingerprint = ledger_key_fingerprint(ledger_);
    EXPECT_EQ(fingerprint.size(), 64u);
    return dir_ / "home" / ".config" / "densefeed" / "keys" / (fingerprint.substr(0, 32) + ".key");
  }
  // A copy of `from` at `to`, mode 0600 (what a CI secret written to a file is).
  static void copy_key(const std::filesystem::path& from, const std::filesystem::path& to) {
    std::filesystem::create_directories(to.parent_path());
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
    ::chmod(to.c_str(), 0600);
  }
  // Jenkins' junit-10.xsd itself (MIT, Gregory Boissinot; jenkinsci/xunit-plugin),
  // as pytest's source distribution on PyPI ships it
  // (testing/example_scripts/junit-10.xsd): fetched once into the build folder.
  static std::filesystem::path junit_10_xsd() {
    const std::filesystem::path dir = std::filesystem::path(DENSEFEED_BUILD_DIR) / "third_party" / "junit-10";
    const auto xsd = dir / "junit-10.xsd";
    if (std::filesystem::is_regular_file(xsd)) return xsd;
    std::filesystem::create_directories(dir);
    const auto got = testing::run_cli("/usr/bin/python3", {"-m", "pip", "download", "--disable-pip-version-check", "-q", "--no-deps",
                                                           "--no-binary", ":all:", "-d", dir.string(), "pytest==8.3.4"}, dir);
    const auto tar = testing::run_cli("/usr/bin/tar", {"-xzf", (dir / "pytest-8.3.4.tar.gz").string(), "-C", dir.string(),
                                                       "--strip-components=3", "pytest-8.3.4/testing/example_scripts/junit-10.xsd"}, dir);
    EXPECT_TRUE(std::filesystem::is_regular_file(xsd)) << "junit-10.xsd from PyPI's pytest 8.3.4 sdist: " << got.out << got.err << tar.err;
    return xsd;
  }
  // xmllint's verdict on `file` against junit-10.xsd ('' = valid).
  static std::string junit_problems(const std::filesystem::path& file) {
    const auto r = testing::run_cli("/usr/bin/xmllint", {"--noout", "--schema", junit_10_xsd().string(), file.string()}, file.parent_path());
    return r.exit_code == 0 ? "" : r.out + r.err;
  }
  testing::TempDir dir_;
  std::filesystem::path root_, ledger_;
};

class LedgerTravel : public Artifacts {};
class AuditJUnit : public Artifacts {};
class FailOn : public Artifacts {};

// The hostile trial's forgery of a copy, without the key: the link's column
// list (not under the HMAC) names "green" where the column verdict stood, and
// SQLite reads a double-quoted name that is no column as a text literal, so
// the row hashed as it was while it said green. The copy's chain is broken at
// that link, whatever key is given, and audit fails.
TEST_F(LedgerTravel, AForgedCopyWhoseLinkNamesALiteralForAColumnIsABrokenChain) {
  ASSERT_EQ(green(), 0);
  const auto key = made_key();
  const auto copy = dir_ / "artifact" / "ledger.db";
  std::filesystem::create_directories(copy.parent_path());
  std::filesystem::copy_file(ledger_, copy);
  const auto sql = [&](const std::string& q) {
    const auto r = testing::run_cli("/usr/bin/sqlite3", {copy.string(), q}, dir_.path());
    EXPECT_EQ(r.exit_code, 0) << q << ": " << r.err;
    return r.out;
  };
  const std::string trigger1 = sql("SELECT sql FROM sqlite_schema WHERE name = 'experiment_outcomes_no_update'");
  const std::string trigger2 = sql("SELECT sql FROM sqlite_schema WHERE name = 'record_chain_no_update'");
  ASSERT_FALSE(trigger1.empty());
  ASSERT_FALSE(trigger2.empty());
  const std::string columns = sql("SELECT columns FROM record_chain WHERE table_name = 'experiment_outcomes' AND row_id = 1");
  const std::string verdict = sql("SELECT verdict FROM experiment_outcomes WHERE id = 1");
  ASSERT_EQ(verdict, "green\n");
  // Hash the original verdict as a literal while the row says red.
  std::string forged = columns.substr(0, columns.find('\n'));
  const auto at = forged.find("\"verdict\"");
  ASSERT_NE(at, std::string::npos) << forged;
  forged.replace(at, 9, "\"green\"");
  sql("DROP TRIGGER experiment_outcomes_no_update; DROP TRIGGER record_chain_no_update; "
      "UPDATE experiment_outcomes SET verdict = 'red' WHERE id = 1; "
      "UPDATE record_chain SET columns = '" + forged + "' WHERE table_name = 'experiment_outcomes' AND row_id = 1; " +
      trigger1 + ";" + trigger2 + ";");
  ASSERT_EQ(sql("SELECT verdict FROM experiment_outcomes WHERE id = 1"), "red\n");
  const std::map<std::string, std::string> with_key = {{"DENSEFEED_LEDGER_KEY", key.string()}};
  const auto verify = cli({"ledger", "verify", "--ledger", copy.string()}, "elsewhere", with_key);
  EXPECT_NE(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_NE((verify.out + verify.err).find("its column list is not the table's columns"), std::string::npos) << verify.out << verify.err;
  const auto audit = cli({"--trust-worktree", "audit", "--ledger", copy.string()}, "elsewhere", with_key);
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;
}

// The re-attack of the fix above, with the rows and links untouched: an
// index that readers' views join on pointed at another index's pages (the
// list then shows another row's verdict), and a table named like SQLite's own
// (sqliteX..., which "NOT LIKE 'sqlite_%'" passed over) to hold the pages.
// verify runs SQLite's integrity_check, and the schema inventory skips only
// the names SQLite reserves.
TEST_F(LedgerTravel, AnIndexPointedElsewhereOrAnObjectNamedLikeSqlitesOwnIsCaught) {
  ASSERT_EQ(green(), 0);
  const auto key = made_key();
  const std::map<std::string, std::string> with_key = {{"DENSEFEED_LEDGER_KEY", key.string()}};
  const auto forged = [&](const std::string& name, const std::string& q) {
    const auto copy = dir_ / name / "ledger.db";
    std::filesystem::create_directories(copy.parent_path());
    std::filesystem::copy_file(ledger_, copy);
    const auto r = testing::run_cli("/usr/bin/sqlite3", {copy.string(), q}, dir_.path());
    EXPECT_EQ(r.exit_code, 0) << q << ": " << r.err;
    return copy;
  };
  const auto index = forged("index", "PRAGMA writable_schema = ON; UPDATE sqlite_schema SET rootpage = (SELECT rootpage FROM "
                                     "sqlite_schema WHERE name = 'experiment_events_by_experiment') WHERE name = "
                                     "'sqlite_autoindex_experiment_outcomes_1';");
  const auto v1 = cli({"ledger", "verify", "--ledger", index.string()}, "elsewhere", with_key);
  EXPECT_NE(v1.exit_code, 0) << v1.out << v1.err;
  // Refused at open (quick_check sees this page twice) or by verify's integrity_check.
  const std::string said = v1.out + v1.err;
  EXPECT_TRUE(said.find("integrity_check") != std::string::npos || said.find("damaged") != std::string::npos) << said;
  // audit compares the schema with densefeed's: the look-alike table is named.
  const auto hidden = forged("hidden", "CREATE TABLE sqliteXt(k INTEGER); INSERT INTO sqliteXt VALUES (1);");
  const auto a2 = cli({"--trust-worktree", "audit", "--ledger", hidden.string()}, "elsewhere", with_key);
  EXPECT_EQ(a2.exit_code, 1) << a2.out << a2.err;
  EXPECT_NE((a2.out + a2.err).find("table sqliteXt: not densefeed's"), std::string::npos) << a2.out << a2.err;
}

// The re-attack: a report folder whose logs/ is a link planted beforehand
// (and a page's name a link) never writes through them.
class ReportContext : public Artifacts {};
TEST_F(ReportContext, AFolderNeverWritesThroughALinkPlantedInIt) {
  ASSERT_EQ(green(), 0);
  const auto site = dir_ / "site";
  const auto victim = dir_ / "victim";
  std::filesystem::create_directories(site);
  std::filesystem::create_directories(victim);
  testing::write_file(victim / "keep.txt", "mine\n");
  std::filesystem::create_directory_symlink(victim, site / "logs");
  std::filesystem::create_symlink(victim / "keep.txt", site / "index.html");
  const auto r = cli({"--trust-worktree", "report", "--folder", "-o", site.string(), "--ledger", ledger_.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(testing::read_file(victim / "keep.txt"), "mine\n");
  std::size_t in_victim = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(victim)) in_victim += e.is_regular_file();
  EXPECT_EQ(in_victim, 1u) << "the report wrote into the planted link's target";
  EXPECT_FALSE(std::filesystem::is_symlink(site / "logs"));
  EXPECT_FALSE(std::filesystem::is_symlink(site / "index.html"));
}

// The README's CI recipe: a backup (and a plain cp of the file) taken to
// another folder and HOME is listed, shown, reported and audited there with
// its key given; without it, it is refused naming what to pass.
TEST_F(LedgerTravel, ABackupAndACopyAreReadElsewhereWithTheKeyGiven) {
  ASSERT_EQ(green(), 0);
  const auto key = made_key();
  ASSERT_TRUE(std::filesystem::is_regular_file(key)) << key;
  const auto backup = dir_ / "artifact" / "ledger-backup.db";
  std::filesystem::create_directories(backup.parent_path());
  ASSERT_EQ(cli({"ledger", "backup", backup.string(), "--ledger", ledger_.string()}).exit_code, 0);
  const auto copy = dir_ / "elsewhere" / "copy.db";
  std::filesystem::create_directories(copy.parent_path());
  std::filesystem::copy_file(ledger_, copy);
  const auto secret = dir_ / "secrets" / "ledger.key";
  copy_key(key, secret);
  const std::string fingerprint = ledger_key_fingerprint(ledger_);
  for (const auto& file : {backup, copy}) {
    // Another HOME, no key: refused, saying which key and how to pass it.
    const auto bare = cli({"ledger", "list", "--ledger", file.string()}, "home2");
    EXPECT_EQ(bare.exit_code, 2) << bare.out << bare.err;
    EXPECT_NE(bare.err.find(fingerprint.substr(0, 32)), std::string::npos) << bare.err;
    EXPECT_NE(bare.err.find("--ledger-key FILE or DENSEFEED_LEDGER_KEY"), std::string::npos) << bare.err;
    // With the key: every reader works.
    const auto list = cli({"ledger", "list", "--ledger", file.string(), "--ledger-key", secret.string(), "--json"}, "home2");
    ASSERT_EQ(list.exit_code, 0) << list.out << list.err;
    EXPECT_EQ(nlohmann::json::parse(list.out).size(), 1u);
    const auto show = cli({"ledger", "show", "1", "--ledger", file.string()}, "home2", {{"DENSEFEED_LEDGER_KEY", secret.string()}});
    EXPECT_EQ(show.exit_code, 0) << show.out << show.err;
    const auto page = dir_ / "elsewhere" / (file.stem().string() + ".html");
    const auto report = cli({"report", "1", "-o", page.string(), "--ledger", file.string(), "--ledger-key", secret.string()}, "home2");
    EXPECT_EQ(report.exit_code, 0) << report.out << report.err;
    EXPECT_TRUE(std::filesystem::is_regular_file(page));
    const auto audit = cli({"--trust-worktree", "audit", "--ledger", file.string(), "--ledger-key", secret.string()}, "home2");
    EXPECT_EQ(audit.exit_code, 0) << audit.out << audit.err;
  }
}

// A key that is not the ledger's is refused naming the ledger and the
// fingerprint it expects; the flag comes before the environment.
TEST_F(LedgerTravel, AWrongKeyIsRefusedNamingTheExpectedFingerprint) {
  ASSERT_EQ(green(), 0);
  const auto right = dir_ / "secrets" / "right.key";
  copy_key(made_key(), right);
  const auto wrong = dir_ / "secrets" / "wrong.key";
  testing::write_file(wrong, std::string(32, 'x'));
  ::chmod(wrong.c_str(), 0600);
  const std::string fingerprint = ledger_key_fingerprint(ledger_);
  const auto r = cli({"ledger", "list", "--ledger", ledger_.string(), "--ledger-key", wrong.string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(ledger_.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is not this ledger's"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fingerprint " + fingerprint.substr(0, 32)), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ledger-key FILE or DENSEFEED_LEDGER_KEY"), std::string::npos) << r.err;
  // Environment wrong, flag right: the flag wins; environment alone: refused.
  EXPECT_EQ(cli({"ledger", "list", "--ledger", ledger_.string(), "--ledger-key", right.string()}, "home2",
                {{"DENSEFEED_LEDGER_KEY", wrong.string()}}).exit_code, 0);
  EXPECT_EQ(cli({"ledger", "list", "--ledger", ledger_.string()}, "home", {{"DENSEFEED_LEDGER_KEY", wrong.string()}}).exit_code, 2);
  // The key-file rules stay: readable by others is refused.
  ::chmod(right.c_str(), 0644);
  const auto open = cli({"ledger", "list", "--ledger", ledger_.string(), "--ledger-key", right.string()});
  EXPECT_EQ(open.exit_code, 2);
  EXPECT_NE(open.err.find("readable by others"), std::string::npos) << open.err;
}

// Whoever can write the ledger's folder or the project could re-seal the
// ledger with a key kept there: such a --ledger-key is refused.
TEST_F(LedgerTravel, AKeyInTheLedgersFolderOrTheProjectIsRefused) {
  ASSERT_EQ(green(), 0);
  const auto in_ledger = ledger_.parent_path() / "ledger.key";
  copy_key(made_key(), in_ledger);
  const auto a = cli({"ledger", "list", "--ledger", ledger_.string(), "--ledger-key", in_ledger.string()});
  EXPECT_EQ(a.exit_code, 2);
  EXPECT_NE(a.err.find("is inside the ledger's folder"), std::string::npos) << a.err;
  const auto in_project = root_ / "ledger.key";
  copy_key(made_key(), in_project);
  const auto b = cli({"ledger", "list", "--ledger", ledger_.string()}, "home", {{"DENSEFEED_LEDGER_KEY", in_project.string()}});
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.err.find("is inside the project folder"), std::string::npos) << b.err;
}

// A key made before ledgers had an identity (named by the ledger's path)
// still opens its ledger, and is linked to the identity's name once.
TEST_F(LedgerTravel, AKeyAtItsOldPathNameStillOpensTheLedger) {
  ASSERT_EQ(green(), 0);
  const auto key = made_key();
  const auto old = key.parent_path() / (sha256_hex(std::filesystem::weakly_canonical(ledger_).string()).substr(0, 16) + ".key");
  std::filesystem::rename(key, old);
  const auto r = cli({"ledger", "list", "--ledger", ledger_.string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(std::filesystem::is_regular_file(key)) << "linked to the identity's name";
  EXPECT_TRUE(std::filesystem::equivalent(key, old));
}

// audit --junit on success and on a failed check: valid against junit-10's
// rules, with errors, time and timestamp.
TEST_F(AuditJUnit, IsValidWithTimesOnSuccessAndOnAFailedCheck) {
  ASSERT_EQ(green(), 0);
  const auto junit = dir_ / "audit.xml";
  const auto ok = cli({"--trust-worktree", "audit", "--ledger", ledger_.string(), "--junit", junit.string()});
  ASSERT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_EQ(junit_problems(junit), "");
  const std::string xml = testing::read_file(junit);
  EXPECT_NE(xml.find("errors=\"0\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("failures=\"0\""), std::string::npos) << xml;
  EXPECT_TRUE(std::regex_search(xml, std::regex("timestamp=\"\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ\""))) << xml;
  EXPECT_TRUE(std::regex_search(xml, std::regex("<testcase [^>]*time=\"\\d+\\.\\d{3}\""))) << xml;
  // --strict without a head: a failed check, still valid.
  const auto failed = cli({"--trust-worktree", "audit", "--strict", "--ledger", ledger_.string(), "--junit", junit.string()});
  ASSERT_EQ(failed.exit_code, 1) << failed.out << failed.err;
  EXPECT_EQ(junit_problems(junit), "");
  EXPECT_NE(testing::read_file(junit).find("failures=\"1\""), std::string::npos) << testing::read_file(junit);
  EXPECT_NE(testing::read_file(junit).find("<failure "), std::string::npos);
}

// An audit that cannot run (exit 2: no key here) still writes its JUnit
// file, with an <error> saying why.
TEST_F(AuditJUnit, IsWrittenWhenTheAuditExits2) {
  ASSERT_EQ(green(), 0);
  const auto junit = dir_ / "audit.xml";
  const auto r = cli({"--trust-worktree", "audit", "--ledger", ledger_.string(), "--junit", junit.string()}, "home2");
  ASSERT_EQ(r.exit_code, 2) << r.out << r.err;
  ASSERT_TRUE(std::filesystem::is_regular_file(junit));
  EXPECT_EQ(junit_problems(junit), "");
  const std::string xml = testing::read_file(junit);
  EXPECT_NE(xml.find("errors=\"1\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<error "), std::string::npos) << xml;
  EXPECT_NE(xml.find("type=\"bad-input\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("chain key is not here"), std::string::npos) << xml;
}

// A green gate with a slower bench: exit 0 (it is correct), exit 5 with
// --fail-on slower; audit --fail-on slower fails on it too.
TEST_F(FailOn, SlowerExitsNonZeroOnAGreenGateWithASlowerBench) {
  // Eight times the work per bench call: slower beyond any machine's noise.
  const auto plain = run(8.0);
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  const auto doc = nlohmann::json::parse(plain.out);
  ASSERT_EQ(doc["stages"]["bench"]["cases"].size(), 1u) << plain.out;
  ASSERT_EQ(doc["stages"]["bench"]["cases"][0]["verdict"], "slower") << plain.out;
  const auto failing = run(8.0, {"--fail-on", "slower"});
  EXPECT_EQ(failing.exit_code, 5) << failing.out << failing.err;
  EXPECT_NE(failing.err.find("--fail-on: experiment 2: bench case n=1000 is slower"), std::string::npos) << failing.err;
  EXPECT_EQ(run(8.0, {"--fail-on", "inconclusive"}).exit_code, 0);
  const auto bad = run(8.0, {"--fail-on", "faster"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;

  EXPECT_EQ(cli({"--trust-worktree", "audit", "--ledger", ledger_.string()}).exit_code, 0);
  const auto audit = cli({"--trust-worktree", "audit", "--ledger", ledger_.string(), "--fail-on", "slower"});
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;
  EXPECT_NE(audit.out.find("FAIL no green-gated experiment with a bench case that is slower (--fail-on)"), std::string::npos) << audit.out;
  EXPECT_NE(audit.out.find("experiment 1: bench case n=1000 is slower"), std::string::npos) << audit.out;
}

}  // namespace
}  // namespace densefeed
