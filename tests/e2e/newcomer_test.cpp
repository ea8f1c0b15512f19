// Issue 31, a newcomer's first hour: densefeed in a team's own repository
// (densefeed init's sample, a git repository that is not densefeed's), the
// mistakes a new user makes, and what each message then tells them to do;
// and what they see while a run works.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;

const std::string kExe = DENSEFEED_EXE;

class Newcomer : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_ / "team";
    std::filesystem::create_directories(repo_);
    ASSERT_EQ(testing::git(repo_, {"init", "-q", "-b", "main"}).exit_code, 0);
    const auto init = densefeed({"init"});
    ASSERT_EQ(init.exit_code, 0) << init.out << init.err;
    commit("densefeed: sample gate");
  }
  testing::CliResult densefeed(const std::vector<std::string>& args) const {
    return testing::run_cli(kExe, args, repo_, testing::project_env(dir_.path()));
  }
  void commit(const std::string& message) const {
    const auto failed = testing::git_commit_all(repo_, message);
    ASSERT_TRUE(failed.empty()) << failed;
  }
  std::string read(const std::filesystem::path& rel) const { return testing::read_file(repo_ / rel); }
  void write(const std::filesystem::path& rel, const std::string& text) const { testing::write_file(repo_ / rel, text); }
  static void replace(std::string& text, const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  }
  testing::TempDir dir_;
  std::filesystem::path repo_;
};

TEST_F(Newcomer, AGateNotYetCommittedSaysSoAndHowToCheckTheDraft) {
  std::string gate = read("gates/scan-sharded.yaml");
  replace(gate, "gate: scan-sharded", "gate: mine");
  write("gates/mine.yaml", gate);
  const auto r = densefeed({"gate", "show", "mine"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("gates/mine.yaml exists in the project folder but is not committed on main"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("densefeed gate lock mine"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("densefeed --trust-worktree gate show mine"), std::string::npos) << r.err;
  // And what it says to run works.
  const auto draft = densefeed({"--trust-worktree", "gate", "show", "mine"});
  EXPECT_EQ(draft.exit_code, 0) << draft.out << draft.err;
  // A name with no file at all gets no such advice.
  const auto none = densefeed({"gate", "show", "nothere"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.err.find("exists in the project folder"), std::string::npos) << none.err;
}

TEST_F(Newcomer, AMissingVenvNamesTheFileTheUserEditsAndWhereItLooked) {
  std::string config = read("densefeed.yaml");
  config += "python:\n  interpreter: .venv/bin/python\n";
  write("densefeed.yaml", config);
  commit("a venv");
  const auto r = densefeed({"run", "experiments/scan-merge-float32.yaml", "--no-bench"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(r.err.find("ledger-exports"), std::string::npos) << "names densefeed's copy, not the user's file: " << r.err;
  EXPECT_NE(r.err.find((repo_ / "densefeed.yaml").string() + ":"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("as committed on main"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("resolves against the project folder to " + (repo_ / ".venv/bin/python").string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("python3 -m venv"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("looked in PATH"), std::string::npos) << r.err;
}

TEST_F(Newcomer, AGateCommittedButNotRelockedNamesGateLock) {
  std::string gate = read("gates/scan-sharded.yaml");
  replace(gate, "timeout_s:", "timeout_s: 61\n# was:\n#timeout_s:");
  write("gates/scan-sharded.yaml", gate);
  commit("a reviewed gate change");
  const auto r = densefeed({"run", "experiments/scan-merge-float32.yaml", "--no-bench", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const J doc = J::parse(r.out);
  ASSERT_FALSE(doc["next"].empty()) << r.out;
  EXPECT_EQ(doc["next"][0]["command"], J::array({"densefeed", "gate", "lock", "scan-sharded"})) << doc["next"].dump();
  // What it says works: the lock, committed, and the run is green.
  ASSERT_EQ(densefeed({"gate", "lock", "scan-sharded"}).exit_code, 0);
  commit("relock");
  EXPECT_EQ(densefeed({"run", "experiments/scan-merge-float32.yaml", "--no-bench", "--quiet"}).exit_code, 0);
}

TEST_F(Newcomer, AHarnessThatCannotImportIsAnErrorNotAToleranceFailure) {
  std::string harness = read("harness/scan.py");
  replace(harness, "\nimport ", "\nimport einops_not_installed\nimport ");
  write("harness/scan.py", harness);
  const auto r = densefeed({"run", "experiments/scan-merge-float32.yaml", "--no-bench", "--quiet"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("error   the candidate exited with code 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ModuleNotFoundError"), std::string::npos) << r.out;
  const auto list = densefeed({"ledger", "list", "--json"});
  const J doc = J::parse(list.out);
  ASSERT_EQ(doc.size(), 1u) << list.out;
  const std::string reason = doc[0]["reason"];
  EXPECT_NE(reason.find("where the candidate's process failed (error: the candidate exited with code 1"), std::string::npos) << reason;
  EXPECT_NE(reason.find("einops_not_installed"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("over tolerance"), std::string::npos) << reason;
}

TEST_F(Newcomer, ABranchMadeBeforeTheHarnessExistedSaysToMergeTheTrustedRef) {
  ASSERT_EQ(testing::git(repo_, {"branch", "agent"}).exit_code, 0);
  // On main, later: the candidate's harness moves to a new file.
  write("harness/scan_v2.py", read("harness/scan.py"));
  std::string gate = read("gates/scan-sharded.yaml");
  replace(gate, "{project}/harness/scan.py", "{project}/harness/scan_v2.py");
  write("gates/scan-sharded.yaml", gate);
  commit("the candidate harness is scan_v2.py");
  const auto lock = densefeed({"gate", "lock", "scan-sharded"});
  ASSERT_EQ(lock.exit_code, 0) << lock.out << lock.err;
  commit("relock");
  std::string manifest = read("experiments/scan-merge-float32.yaml");
  replace(manifest, "candidate: {revision: WORKTREE", "candidate: {revision: agent");
  write("experiments/on-agent.yaml", manifest);
  const auto r = densefeed({"run", "experiments/on-agent.yaml", "--no-bench", "--quiet"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("harness/scan_v2.py is on the trusted ref but not in the candidate's tree"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("git merge"), std::string::npos) << r.out;
  // And `next` says the same, alone: no rerun of that revision can help.
  const auto j = densefeed({"run", "experiments/on-agent.yaml", "--no-bench", "--quiet", "--json"});
  const J doc = J::parse(j.out);
  ASSERT_EQ(doc["next"].size(), 1u) << doc["next"].dump();
  EXPECT_EQ(doc["next"][0]["kind"], "resubmit") << doc["next"].dump();
  EXPECT_NE(doc["next"][0]["suggestion"].get<std::string>().find("merge the trusted ref into the candidate's revision"), std::string::npos);
}

TEST_F(Newcomer, LedgerShowSaysWhatEachStageDid) {
  ASSERT_EQ(densefeed({"run", "experiments/scan-merge-float32.yaml", "--no-bench", "--quiet"}).exit_code, 0);
  const auto show = densefeed({"ledger", "show", "1"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("stage acceptance not declared — the manifest pre-registers no acceptance criteria"), std::string::npos)
      << show.out;
  EXPECT_EQ(show.out.find("acceptance pending"), std::string::npos) << show.out;
}

// What a run shows while it works: the header at once, then progress lines on
// stderr (plain lines off a terminal, one updating line on one), none with
// --quiet; the events are in status --json.
TEST_F(Newcomer, ARunShowsItsProgressAndQuietSilencesIt) {
  const auto r = densefeed({"run", "experiments/scan-merge-float32.yaml", "--no-bench"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("densefeed: gate: 5 case(s): starting\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("densefeed: gate: green after "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("\x1b[K"), std::string::npos) << "no terminal codes off a terminal";
  EXPECT_EQ(r.out.rfind("experiment 1 'scan-merge-float32'", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("experiment 1 'scan-merge-float32'", 1), std::string::npos) << "the header printed twice: " << r.out;
  const auto quiet = densefeed({"run", "experiments/scan-merge-float32.yaml", "--no-bench", "--quiet"});
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.err.find("densefeed: gate:"), std::string::npos) << quiet.err;
  const auto status = densefeed({"status", "1", "--json"});
  const J doc = J::parse(status.out);
  std::vector<std::string> phases;
  for (const auto& e : doc["progress"]) {
    if (e["stage"] == "gate") phases.push_back(e["phase"]);
  }
  ASSERT_GE(phases.size(), 3u) << doc["progress"].dump();
  EXPECT_EQ(phases.front(), "start");
  EXPECT_EQ(phases.back(), "end");
  EXPECT_EQ(doc["progress"].back()["done"], 5) << doc["progress"].dump();
  // On a terminal (script(1) gives it a pseudo-terminal): one line updated in place.
  const auto tty = testing::run_cli("/usr/bin/script", {"-qfec", kExe + " run experiments/scan-merge-float32.yaml --no-bench", "/dev/null"},
                                    repo_, testing::project_env(dir_.path()));
  EXPECT_EQ(tty.exit_code, 0) << tty.out << tty.err;
  EXPECT_NE(tty.out.find("\r\x1b[Kdensefeed: gate: case "), std::string::npos) << tty.out;
}

// README's "Use it in your own repository", step by step as a new user takes
// it, in a folder like a fresh container's (HOME of its own, PATH the install
// and the system's only): install, init, the samples red and green, an own
// copy of the sample gate changed and locked, red and green on it, the
// report, a backup read in another HOME with its key. Prints how long each
// step took (the closing note's figure); checks every exit code on the way.
TEST(NewcomerFirstHour, TheReadmesOwnRepositoryStepsFromInstallToABackupReadElsewhere) {
  testing::TempDir dir;
  const auto home = dir.path() / "home";
  const auto repo = home / "team-kernels";
  std::filesystem::create_directories(repo);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, double>> steps;
  auto lap = [&, last = start](const std::string& what) mutable {
    const auto now = std::chrono::steady_clock::now();
    steps.emplace_back(what, std::chrono::duration<double>(now - last).count());
    last = now;
  };
  const std::map<std::string, std::string> env = {{"PATH", (home / ".local" / "bin").string() + ":/usr/local/bin:/usr/bin:/bin"},
                                                  {"HOME", home.string()}};
  const auto sh = [&](const std::string& command, const std::filesystem::path& cwd) {
    return testing::run_cli("/bin/sh", {"-c", command}, cwd, env);
  };
  // 1. Install it once (the build is the README's first command's).
  const std::string build = std::filesystem::path(kExe).parent_path().parent_path().string();
  auto r = sh("cmake --install '" + build + "' --prefix ~/.local >/dev/null && densefeed --version", home);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  lap("install");
  // 2. Make the repository a project, on main.
  ASSERT_EQ(testing::git(repo, {"init", "-q", "-b", "main"}).exit_code, 0);
  r = sh("densefeed init", repo);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_TRUE(testing::git_commit_all(repo, "densefeed: sample gate").empty());
  lap("init and commit");
  // 3. The samples: red, then green.
  r = sh("densefeed run experiments/scan-merge-float16.yaml --quiet", repo);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  lap("first red verdict (sample)");
  r = sh("densefeed run experiments/scan-merge-float32.yaml --quiet --no-bench", repo);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  lap("green (sample)");
  // 4. An own gate: the sample's copy with the float16 merge only, locked by a person.
  std::string gate = testing::read_file(repo / "gates" / "scan-sharded.yaml");
  gate.replace(gate.find("gate: scan-sharded"), 18, "gate: my-scan");
  testing::write_file(repo / "gates" / "my-scan.yaml", gate);
  for (const std::string dtype : {"float16", "float32"}) {
    std::string m = testing::read_file(repo / "experiments" / ("scan-merge-" + dtype + ".yaml"));
    m.replace(m.find("gate: scan-sharded"), 18, "gate: my-scan");
    m.replace(m.find("experiment: scan-merge-" + dtype), 23 + dtype.size(), "experiment: mine-" + dtype);
    testing::write_file(repo / "experiments" / ("mine-" + dtype + ".yaml"), m);
  }
  ASSERT_TRUE(testing::git_commit_all(repo, "my gate").empty());
  r = sh("densefeed gate lock my-scan", repo);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_TRUE(testing::git_commit_all(repo, "lock my gate").empty());
  r = sh("densefeed run experiments/mine-float16.yaml --quiet", repo);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  lap("first red verdict on the own gate");
  r = sh("densefeed run experiments/mine-float32.yaml --quiet", repo);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  lap("green on the own gate, with its benchmark");
  r = sh("densefeed ledger list && densefeed report --gate my-scan -o report.html", repo);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(std::filesystem::is_regular_file(repo / "report.html"));
  lap("ledger list and report");
  // The CI recipe's artifact, read on another machine (another HOME) with its key.
  r = sh("densefeed ledger backup ../ledger-backup.db", repo);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::filesystem::path key;
  for (const auto& e : std::filesystem::directory_iterator(home / ".config" / "densefeed" / "keys")) key = e.path();
  // The key as a CI secret written to a 0600 file outside the artifact's folder.
  const auto elsewhere = dir.path() / "colleague";
  std::filesystem::create_directories(elsewhere / "artifact");
  std::filesystem::create_directories(elsewhere / "secrets");
  std::filesystem::copy_file(key, elsewhere / "secrets" / "ci.key");
  std::filesystem::permissions(elsewhere / "secrets" / "ci.key", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::filesystem::copy_file(home / "ledger-backup.db", elsewhere / "artifact" / "ledger-backup.db");
  const auto other = testing::run_cli((home / ".local" / "bin" / "densefeed").string(),
                                      {"ledger", "list", "--ledger", (elsewhere / "artifact" / "ledger-backup.db").string()}, elsewhere,
                                      {{"PATH", "/usr/bin:/bin"}, {"HOME", elsewhere.string()},
                                       {"DENSEFEED_LEDGER_KEY", (elsewhere / "secrets" / "ci.key").string()}});
  EXPECT_EQ(other.exit_code, 0) << other.out << other.err;
  EXPECT_NE(other.out.find("mine-float32"), std::string::npos) << other.out;
  lap("backup read elsewhere");
  double total = 0;
  for (const auto& [what, s] : steps) {
    total += s;
    std::cout << fmt::format("newcomer: {:<45} {:6.1f} s (total {:6.1f} s)\n", what, s, total);
  }
}

}  // namespace
}  // namespace densefeed
