// Candidates and bases at git revisions: resolved to commits, exported clean,
// built with the gate's build commands, red when a commit edits a frozen file
// or does not build, and never measured in the wrong arm's place. Uses a
// small git repository made here, whose harness is a copy of the cheat
// harness compiled by the gate's build command.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;
// The reference's harness (cheat_harness) is the build's: on PATH.
const std::map<std::string, std::string> kEnv = testing::with_on_path(std::filesystem::path(kExe).parent_path());

const char* kGate = R"(gate: rev
reference:
  command: [cheat_harness, --role, reference, --n, "{case.n}", --scale, "1", --seed, "{seed}", --out, "{out}"]
candidate:
  command: [rev_harness, --role, candidate, --mode, "{param.mode}", --n, "{case.n}", --scale, "1",
            --seed, "{seed}", --out, "{out}"]
params:
  mode: {type: string, enum: [honest, zeros, few-wrong], default: honest}
outputs:
  y: {dtype: float32, reference_dtype: float64, tolerance: {rel_l2: 1.0e-5}}
cases: {grid: [{n: [64]}]}
profiles: {quick: {}, full: {}}
bench: {warmup: 1, iters: 2, cases: [{n: 64}]}
build:
  commands:
    - [mkdir, -p, "{build}/bin"]
    - [c++, -std=c++20, -O1, -I, "{src}/harness", "{src}/harness/cheat_harness.cpp", "{src}/harness/npy_writer.cpp",
       -lfmt, -o, "{build}/bin/rev_harness"]
  timeout_s: 300
freezes: [frozen.txt]
)";

class Revisions : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repo_ = new testing::TempDir();
    const auto root = repo_->path();
    testing::write_project(root);
    testing::write_file(root / "gates" / "rev.yaml", kGate);
    testing::write_file(root / "frozen.txt", "frozen\n");
    std::filesystem::create_directories(root / "harness");
    std::filesystem::copy_file(kRoot / "tests" / "support" / "cheat_harness.cpp", root / "harness" / "cheat_harness.cpp");
    for (const char* f : {"npy_writer.h", "npy_writer.cpp"}) {
      std::filesystem::copy_file(kRoot / "kernels" / "common" / f, root / "harness" / f);
    }
    // Locked before the repository exists (so from the folder as it is),
    // then committed on main: the trusted ref the runs read the gate from.
    ASSERT_EQ(cli(kExe, {"--project", root.string(), "--trust-worktree", "gate", "lock"}), 0);
    git({"init", "-q", "-b", "main"});
    commit("v1");
    // A candidate whose kernel is wrong.
    edit("harness/cheat_harness.cpp", "y[i] = static_cast<float>(scale * std::sin(", "y[i] = static_cast<float>(1.01 * scale * std::sin(");
    commit("broken");
    git({"checkout", "-q", "v1"});
    edit("frozen.txt", "frozen", "loosened");
    commit("frozen-edit");
    git({"checkout", "-q", "v1"});
    edit("harness/cheat_harness.cpp", "int main(", "int main( this does not compile");
    commit("nocompile");
    git({"checkout", "-q", "main"});
    ready_ = !::testing::Test::HasFailure();
  }
  static void TearDownTestSuite() { delete repo_; }
  // A failed suite set-up must fail every test, not skip it.
  void SetUp() override { ASSERT_TRUE(ready_) << "the test repository could not be set up (see above)"; }

  static int cli(const std::string& exe, const std::vector<std::string>& args) {
    return testing::run_cli(exe, args, repo_->path()).exit_code;
  }
  static void git(std::vector<std::string> args) {
    args.insert(args.begin(), {"-C", repo_->path().string(), "-c", "user.name=densefeed-test", "-c", "user.email=t@example.invalid"});
    ASSERT_EQ(cli("/usr/bin/git", args), 0) << args.back();
  }
  static void commit(const std::string& tag) {
    git({"add", "-A"});
    git({"commit", "-q", "-m", tag});
    git({"tag", tag});
  }
  static void edit(const std::string& file, const std::string& from, const std::string& to) {
    const auto path = repo_->path() / file;
    std::string text = testing::read_file(path);
    ASSERT_NE(text.find(from), std::string::npos) << from;
    text.replace(text.find(from), from.size(), to);
    testing::write_file(path, text);
  }

  // Runs a manifest with these arms; returns {exit code, JSON report or error document}.
  std::pair<int, nlohmann::json> run(const std::string& candidate, const std::string& base, const std::string& base_mode,
                                     bool bench = false) {
    const auto manifest = dir_ / "m.yaml";
    testing::write_file(manifest, "experiment: rev\nhypothesis: h\npredicted_effect: p\ngate: rev\ncandidate: {revision: \"" +
                                      candidate + "\", params: {mode: honest}}\nbase: {revision: \"" + base +
                                      "\", params: {mode: " + base_mode + "}}\n");
    std::vector<std::string> args = {"--project", repo_->path().string(), "run", manifest.string(), "--ledger",
                                     (dir_ / "ledger.db").string(), "--json"};
    if (!bench) args.push_back("--no-bench");
    const auto res = testing::run_cli(kExe, args, dir_.path(), kEnv);
    return {res.exit_code, nlohmann::json::parse(res.out.empty() ? "{}" : res.out)};
  }

  static testing::TempDir* repo_;
  static bool ready_;
  testing::TempDir dir_;
};

testing::TempDir* Revisions::repo_ = nullptr;
bool Revisions::ready_ = false;

TEST_F(Revisions, CandidateAndBaseAtACommitAreBuiltAndMeasured) {
  const auto [code, r] = run("v1", "v1", "few-wrong", /*bench=*/true);
  EXPECT_EQ(code, 0) << r.dump(1);
  EXPECT_EQ(r["verdict"], "green");
  EXPECT_EQ(r["stages"]["bench"]["status"], "measured");
  EXPECT_EQ(r["stages"]["bench"]["cases"].size(), 1u);
  // The build folder is keyed on the commit and reused.
  bool built = false;
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "ledger-builds")) {
    built = built || std::filesystem::exists(e.path() / "build" / "bin" / "rev_harness");
  }
  EXPECT_TRUE(built);
}

TEST_F(Revisions, AWrongKernelAtACommitIsRed) {
  const auto [code, r] = run("broken", "v1", "few-wrong");
  EXPECT_EQ(code, 1) << r.dump(1);
  EXPECT_NE(r["stages"]["gate"]["cases"][0]["reason"].get<std::string>().find("rel_l2"), std::string::npos) << r.dump(1);
}

TEST_F(Revisions, ACommitThatEditsAFrozenFileIsRedWithTheFiles) {
  const auto [code, r] = run("frozen-edit", "v1", "few-wrong");
  EXPECT_EQ(code, 1) << r.dump(1);
  EXPECT_TRUE(r["stages"]["gate"]["cases"].empty());
  EXPECT_NE(r["stages"]["gate"]["reason"].get<std::string>().find("changes frozen files in its own commits: frozen.txt; no case ran"),
            std::string::npos)
      << r["stages"]["gate"]["reason"];
}

TEST_F(Revisions, ACandidateThatDoesNotBuildIsRed) {
  const auto [code, r] = run("nocompile", "v1", "few-wrong");
  EXPECT_EQ(code, 1) << r.dump(1);
  const auto reason = r["stages"]["gate"]["reason"].get<std::string>();
  EXPECT_NE(reason.find("the candidate's build at "), std::string::npos) << reason;
  EXPECT_NE(reason.find("build command 2 (c++"), std::string::npos) << reason;
}

TEST_F(Revisions, ABaseThatDoesNotBuildIsNeverMeasured) {
  const auto [code, r] = run("v1", "nocompile", "few-wrong", /*bench=*/true);
  EXPECT_EQ(code, 3) << r.dump(1);
  EXPECT_EQ(r["stages"]["gate"]["verdict"], "green");
  EXPECT_EQ(r["stages"]["bench"]["status"], "error");
  EXPECT_NE(r["stages"]["bench"]["reason"].get<std::string>().find("the base's build at"), std::string::npos);
  EXPECT_TRUE(r["stages"]["bench"]["cases"].empty());
}

TEST_F(Revisions, UnknownRevisionAndSameArmsAreBadInput) {
  const auto [code, r] = run("no-such-tag", "v1", "few-wrong");
  EXPECT_EQ(code, 2);
  EXPECT_EQ(r["details"]["field"], "candidate.revision");
  EXPECT_NE(r["details"]["message"].get<std::string>().find("'no-such-tag' names no commit"), std::string::npos);
  // The same commit under two names is the same code.
  const auto [alias_code, alias] = run("v1", "v1^{commit}", "honest");
  EXPECT_EQ(alias_code, 2) << alias.dump(1);
  const auto [same_code, same] = run("v1", "v1", "honest");
  EXPECT_EQ(same_code, 2);
  EXPECT_NE(same["details"]["message"].get<std::string>().find("the base is the candidate"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "ledger.db"));
}

TEST_F(Revisions, ARunFromTheTrustedRefHasCleanProvenance) {
  const auto [code, r] = run("v1", "v1", "few-wrong");
  EXPECT_EQ(code, 0) << r.dump(1);
  const auto head = testing::git(repo_->path(), {"rev-parse", "HEAD"}).out.substr(0, 40);
  const auto& p = r["stages"]["gate"]["provenance"];
  EXPECT_TRUE(p["clean"].get<bool>()) << p.dump(1);
  EXPECT_EQ(p["project"], repo_->path().string());
  EXPECT_EQ(p["repository"], repo_->path().string());
  EXPECT_EQ(p["commit"], head);
  EXPECT_EQ(p["trusted_ref"], "main");
  EXPECT_EQ(p["trusted_commit"], head);  // main is checked out
  EXPECT_EQ(p["gate_store"], "main at " + head.substr(0, 12));
  EXPECT_FALSE(p["trust_worktree"].get<bool>());
  EXPECT_EQ(p["notes"], nlohmann::json::array());
  for (const char* rel : {"gates/rev.yaml", "gates/gates.lock", "frozen.txt"}) EXPECT_TRUE(p["frozen_sha256"].contains(rel)) << rel;
  // The candidate's harness is hashed from its revision's build.
  bool built_harness = false;
  for (const auto& h : p["harness_sha256"].items()) {
    built_harness = built_harness || (h.key().find("-builds/") != std::string::npos && h.key().ends_with("/bin/rev_harness"));
  }
  EXPECT_TRUE(built_harness) << p["harness_sha256"].dump(1);
  const auto manifest = dir_ / "m.yaml";
  const auto text = testing::run_cli(kExe, {"--project", repo_->path().string(), "run", manifest.string(), "--ledger",
                                            (dir_ / "ledger.db").string(), "--no-bench"}, dir_.path(), kEnv);
  EXPECT_NE(text.out.find("provenance: " + repo_->path().string() + " at commit " + head.substr(0, 12) + "; gates from main at " +
                          head.substr(0, 12) + "\n"),
            std::string::npos)
      << text.out;
}

// A clone of the suite's repository in which main moves on after the
// branches were made: it loosens frozen.txt, and a person re-locks it there.
class RevisionsAfterMainMoved : public Revisions {
 protected:
  void SetUp() override {
    Revisions::SetUp();
    clone_ = dir_ / "clone";
    ASSERT_EQ(testing::run_cli("/usr/bin/git", {"clone", "-q", repo_->path().string(), clone_.string()}, dir_.path()).exit_code, 0);
    testing::write_file(clone_ / "frozen.txt", "frozen, revised on main\n");
    ASSERT_EQ(testing::git_commit_all(clone_, "main: frozen.txt revised"), "");
    const auto lock = testing::run_cli(kExe, {"--project", clone_.string(), "gate", "lock"}, dir_.path());
    ASSERT_EQ(lock.exit_code, 0) << lock.out << lock.err;
    ASSERT_EQ(testing::git_commit_all(clone_, "main: re-locked"), "");
  }
  std::pair<int, nlohmann::json> run_in_clone(const std::string& candidate) {
    const auto manifest = dir_ / "m.yaml";
    testing::write_file(manifest, "experiment: rev\nhypothesis: h\npredicted_effect: p\ngate: rev\ncandidate: {revision: \"" +
                                      candidate + "\", params: {mode: honest}}\nbase: {revision: v1, params: {mode: few-wrong}}\n");
    const auto res = testing::run_cli(kExe, {"--project", clone_.string(), "run", manifest.string(), "--ledger",
                                             (dir_ / "ledger.db").string(), "--json", "--no-bench"}, dir_.path(), kEnv);
    return {res.exit_code, nlohmann::json::parse(res.out.empty() ? "{}" : res.out)};
  }
  std::filesystem::path clone_;
};

TEST_F(RevisionsAfterMainMoved, ABranchMadeBeforeAGateChangeOnMainIsJudgedByMainsGateNotBlamedForIt) {
  // Before projects, a revision was red when it differed from the trusted
  // files at all, so every branch older than main's change was blamed for
  // it. Now only the candidate's own commits count: v1 changes nothing
  // frozen, so it runs against main's gate and lock, and is green.
  const auto [code, r] = run_in_clone("v1");
  EXPECT_EQ(code, 0) << r.dump(1);
  EXPECT_EQ(r["stages"]["gate"]["verdict"], "green") << r["stages"]["gate"]["reason"];
  EXPECT_FALSE(r["stages"]["gate"]["cases"].empty());
  const auto main_sha = testing::git(clone_, {"rev-parse", "main"}).out.substr(0, 40);
  EXPECT_EQ(r["stages"]["gate"]["provenance"]["trusted_commit"], main_sha);
  // A branch whose own commit edits the frozen file is still red, naming it.
  const auto [edit_code, e] = run_in_clone("frozen-edit");
  EXPECT_EQ(edit_code, 1) << e.dump(1);
  EXPECT_TRUE(e["stages"]["gate"]["cases"].empty());
  EXPECT_NE(e["stages"]["gate"]["reason"].get<std::string>().find("changes frozen files in its own commits: frozen.txt; no case ran"),
            std::string::npos)
      << e["stages"]["gate"]["reason"];
}

}  // namespace
}  // namespace densefeed
