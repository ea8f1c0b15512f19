// densefeed as a kernel team uses it: installed into a prefix with
// `cmake --install`, run inside a git repository of its own (never densefeed's)
// from a subfolder, with no --project and nothing of densefeed's source tree on
// any path. init, gate lock, red and green runs, revisions as candidate and base
// with a benchmark, a branch made before a gate change on main, a branch that
// edits a frozen file, the queue, review and promotion, and the MCP server's
// gates and skill; then the bad inputs of a project.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;

const std::filesystem::path kBuild = DENSEFEED_BUILD_DIR;
const std::filesystem::path kSource = DENSEFEED_SOURCE_DIR;

// The installed prefix, made once for every test of this file.
class Installed : public ::testing::Environment {
 public:
  static std::filesystem::path prefix() { return dir()->path() / "prefix"; }
  static testing::TempDir* dir() {
    static testing::TempDir d;
    return &d;
  }
  void SetUp() override {
    const auto r = testing::run_cli("/usr/bin/env", {"cmake", "--install", kBuild.string(), "--prefix", prefix().string()},
                                    dir()->path());
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    ASSERT_TRUE(std::filesystem::is_regular_file(prefix() / "bin" / "densefeed"));
  }
};
const auto* const kInstalled = ::testing::AddGlobalTestEnvironment(new Installed);

class ProjectE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_ / "kernels-team";
    sub_ = repo_ / "src" / "ops";
    std::filesystem::create_directories(sub_);
    git({"init", "-q", "-b", "main"});
    git({"config", "user.email", "team@example.org"});
    git({"config", "user.name", "Kernel Team"});
    testing::write_file(repo_ / "README.md", "# a kernel library\n");
    testing::write_file(sub_ / "op.py", "# the team's own code\n");
    git({"add", "-A"});
    git({"commit", "-qm", "the library"});
  }

  // Only the installed prefix and the system on PATH: not densefeed's build
  // folder, not its source tree.
  std::map<std::string, std::string> env() const {
    return {{"PATH", (Installed::prefix() / "bin").string() + ":/usr/local/bin:/usr/bin:/bin"}, {"HOME", dir_.path().string()}};
  }
  testing::CliResult densefeed(const std::vector<std::string>& args, const std::filesystem::path& cwd = {}) const {
    return testing::run_cli((Installed::prefix() / "bin" / "densefeed").string(), args, cwd.empty() ? sub_ : cwd, env());
  }
  void git(const std::vector<std::string>& args) const {
    std::vector<std::string> a = {"git", "-C", repo_.string()};
    a.insert(a.end(), args.begin(), args.end());
    const auto r = testing::run_cli("/usr/bin/env", a, repo_, env());
    ASSERT_EQ(r.exit_code, 0) << "git " << args.front() << ": " << r.out << r.err;
  }
  std::string git_out(const std::vector<std::string>& args) const {
    std::vector<std::string> a = {"git", "-C", repo_.string()};
    a.insert(a.end(), args.begin(), args.end());
    return testing::run_cli("/usr/bin/env", a, repo_, env()).out;
  }
  void init_and_commit() {
    const auto r = densefeed({"init", repo_.string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    git({"add", "-A"});
    git({"commit", "-qm", "densefeed: sample gate"});
  }
  std::filesystem::path manifest(const std::string& name, const std::string& candidate, const std::string& base,
                                 const std::string& extra = "") const {
    const auto path = dir_ / (name + ".yaml");
    testing::write_file(path, "experiment: " + name + "\nauthor: agent\nhypothesis: h\npredicted_effect: p\ngate: scan-sharded\n"
                              "candidate: " + candidate + "\nbase: " + base + "\n" + extra);
    return path;
  }
  // A branch off main whose one commit appends `text` to `rel`; back on main after.
  void branch_appending(const std::string& branch, const std::string& rel, const std::string& text) const {
    git({"checkout", "-q", "-b", branch});
    testing::write_file(repo_ / rel, testing::read_file(repo_ / rel) + text);
    git({"commit", "-qam", branch + ": " + rel});
    git({"checkout", "-q", "main"});
  }
  J run_json(const std::vector<std::string>& args, int expected_exit) const {
    std::vector<std::string> a = {"run"};
    a.insert(a.end(), args.begin(), args.end());
    a.insert(a.end(), {"--json", "--jobs", "2"});
    const auto r = densefeed(a);
    EXPECT_EQ(r.exit_code, expected_exit) << r.out << r.err;
    return J::parse(r.out, nullptr, false);
  }

  testing::TempDir dir_;
  std::filesystem::path repo_, sub_;
};

TEST_F(ProjectE2E, InstalledTreeHoldsEverythingItReadsAndNoSourcePath) {
  const auto p = Installed::prefix();
  for (const char* f : {"bin/densefeed", "share/densefeed/schemas/experiment.schema.json", "share/densefeed/schemas/project.schema.json",
                        "share/densefeed/skills/densefeed-optimization-loop/SKILL.md", "share/densefeed/python/densefeed_harness.py",
                        "share/densefeed/init/densefeed.yaml", "share/densefeed/init/gates/scan-sharded.yaml",
                        "share/doc/densefeed/gate-authoring.md", "share/man/man1/densefeed.1"}) {
    EXPECT_TRUE(std::filesystem::is_regular_file(p / f)) << f;
  }
  // A plain prefix gets the modules in its lib/python3.X/site-packages (packaging/python_site_dir.py).
  bool site_module = false;
  for (const auto& e : std::filesystem::directory_iterator(p / "lib")) {
    site_module = site_module || std::filesystem::is_regular_file(e.path() / "site-packages" / "densefeed_harness.py");
  }
  EXPECT_TRUE(site_module) << "no lib/python3.X/site-packages/densefeed_harness.py";
  const auto bin = testing::read_file(p / "bin" / "densefeed");
  EXPECT_EQ(bin.find(kSource.string() + "/schemas"), std::string::npos) << "the binary names the source tree's schemas";
  const auto v = densefeed({"--version"}, dir_.path());
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("densefeed 0."), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("(commit "), std::string::npos) << v.out;
}

TEST_F(ProjectE2E, InitLockRunRedAndGreenFromASubfolder) {
  const auto init = densefeed({"init", repo_.string()});
  ASSERT_EQ(init.exit_code, 0) << init.out << init.err;
  EXPECT_NE(init.out.find("trusted ref: main"), std::string::npos) << init.out;
  EXPECT_TRUE(std::filesystem::is_regular_file(repo_ / "densefeed.yaml"));
  EXPECT_TRUE(std::filesystem::is_regular_file(repo_ / "gates" / "gates.lock"));
  // init never overwrites: a second init names what exists and writes nothing.
  const auto again = densefeed({"init", repo_.string()});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("densefeed.yaml"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("never overwrites"), std::string::npos) << again.err;

  // Not committed yet: the gate is not on the trusted ref, so a run is bad
  // input naming what to do, and gate lock refuses to lock it.
  const auto early = densefeed({"run", (repo_ / "experiments" / "scan-merge-float16.yaml").string()});
  EXPECT_EQ(early.exit_code, 2) << early.out << early.err;
  EXPECT_NE(early.err.find("is not committed on main"), std::string::npos) << early.err;
  const auto lock_early = densefeed({"gate", "lock"});
  EXPECT_EQ(lock_early.exit_code, 2) << lock_early.out << lock_early.err;
  EXPECT_NE(lock_early.err.find("gates/scan-sharded.yaml"), std::string::npos) << lock_early.err;
  EXPECT_NE(lock_early.err.find("git add"), std::string::npos) << lock_early.err;
  EXPECT_FALSE(std::filesystem::exists(repo_ / ".densefeed" / "ledger.db")) << "bad input wrote a ledger";

  // The commit exactly as init tells the user to make it.
  const auto told = init.out.substr(init.out.find("  git add "), init.out.find(" && git commit") - init.out.find("  git add "));
  ASSERT_NE(told.find(".densefeed/.gitignore"), std::string::npos) << init.out;
  std::vector<std::string> add_args;
  std::istringstream words(told.substr(told.find("add ") + 4));
  for (std::string w; words >> w;) add_args.push_back(w);
  add_args.insert(add_args.begin(), "add");
  git(add_args);
  git({"commit", "-qm", "densefeed: sample gate"});
  EXPECT_EQ(git_out({"status", "--porcelain"}), "") << "init's own commit command must leave nothing behind";
  const auto lock = densefeed({"gate", "lock"});
  EXPECT_EQ(lock.exit_code, 0) << lock.out << lock.err;
  EXPECT_NE(lock.out.find("unchanged"), std::string::npos) << lock.out;

  const J red = run_json({"../../experiments/scan-merge-float16.yaml"}, 1);
  ASSERT_TRUE(red.is_object());
  EXPECT_EQ(red["verdict"], "red");
  std::map<int, std::string> by_shards;
  for (const auto& c : red["stages"]["gate"]["cases"]) by_shards[c["values"]["shards"].get<int>()] = c["verdict"];
  EXPECT_EQ(by_shards[1], "green") << "one shard merges nothing";
  for (int s : {2, 4, 8, 16}) EXPECT_EQ(by_shards[s], "red") << s;
  const auto& prov = red["stages"]["gate"]["provenance"];
  EXPECT_EQ(prov["project"], std::filesystem::weakly_canonical(repo_).string());
  EXPECT_EQ(prov["clean"], true) << prov.dump();
  EXPECT_EQ(prov["trusted_commit"], git_out({"rev-parse", "main"}).substr(0, 40));
  // The harness script is hashed, not the interpreter that runs it.
  bool script_hashed = false;
  for (const auto& [path, sha] : prov["harness_sha256"].items()) {
    EXPECT_EQ(path.find("python3"), std::string::npos) << path;
    script_hashed = script_hashed || path.find("harness/scan_reference.py") != std::string::npos;
  }
  EXPECT_TRUE(script_hashed) << prov.dump();
  EXPECT_EQ(prov["frozen_sha256"].size(), 5u) << prov.dump();  // gate, lock, three frozen files (reference, inputs, bench driver)

  const J green = run_json({(repo_ / "experiments" / "scan-merge-float32.yaml").string()}, 0);
  ASSERT_TRUE(green.is_object());
  EXPECT_EQ(green["verdict"], "green");
  EXPECT_EQ(green["stages"]["bench"]["status"], "measured") << green["stages"]["bench"].dump();
  EXPECT_FALSE(green["stages"]["bench"]["cases"].empty());
  // The ledger is the project's, in its workspace, not next to densefeed.
  EXPECT_TRUE(std::filesystem::is_regular_file(repo_ / ".densefeed" / "ledger.db"));
  EXPECT_EQ(git_out({"status", "--porcelain"}), "") << "the workspace must be ignored by git";
}

TEST_F(ProjectE2E, RevisionsAsCandidateAndBaseWithABenchmark) {
  init_and_commit();
  branch_appending("faster", "harness/scan.py", "\n# faster: the team's change under test\n");
  const auto m = manifest("faster", "{revision: faster, params: {merge_dtype: float32}}", "{revision: main, params: {merge_dtype: float32}}");
  const J doc = run_json({m.string()}, 0);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["verdict"], "green") << doc["stages"]["gate"]["reason"];
  EXPECT_EQ(doc["candidate"]["sha"], git_out({"rev-parse", "faster"}).substr(0, 40)) << doc["candidate"].dump();
  EXPECT_EQ(doc["base"]["sha"], git_out({"rev-parse", "main"}).substr(0, 40)) << doc["base"].dump();
  EXPECT_EQ(doc["stages"]["bench"]["status"], "measured") << doc["stages"]["bench"].dump();
  EXPECT_FALSE(doc["stages"]["bench"]["cases"].empty());
  // The candidate ran its own export's script, not the worktree's.
  bool candidate_from_export = false;
  for (const auto& [path, sha] : doc["stages"]["gate"]["provenance"]["harness_sha256"].items()) {
    if (path.find("harness/scan.py") != std::string::npos) {
      candidate_from_export = path != (repo_ / "harness" / "scan.py").string() && path.find("-builds/") != std::string::npos;
    }
  }
  EXPECT_TRUE(candidate_from_export) << doc["stages"]["gate"]["provenance"].dump();
}

// A project need not be the top of its repository (experiments/fla-intracard-cp
// is one such): its trusted ref's export and a revision's export are the
// project's folder at that commit.
TEST_F(ProjectE2E, AProjectInASubfolderOfItsRepository) {
  const auto project = repo_ / "src" / "ops";
  ASSERT_EQ(densefeed({"init", project.string()}).exit_code, 0);
  git({"add", "-A"});
  git({"commit", "-qm", "densefeed in src/ops"});
  git({"checkout", "-q", "-b", "sub-change"});
  testing::write_file(project / "harness" / "scan.py", testing::read_file(project / "harness" / "scan.py") + "\n# changed\n");
  git({"commit", "-qam", "change the candidate"});
  git({"checkout", "-q", "main"});
  const auto m = manifest("sub", "{revision: sub-change, params: {merge_dtype: float16}}", "{revision: main, params: {merge_dtype: float32}}");
  const auto r = densefeed({"run", m.string(), "--json", "--no-bench", "--jobs", "2"}, project / "harness");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const J doc = J::parse(r.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << r.out << r.err;
  EXPECT_EQ(doc["stages"]["gate"]["provenance"]["project"], std::filesystem::weakly_canonical(project).string());
  EXPECT_EQ(doc["stages"]["gate"]["cases"].size(), 5u) << doc["stages"]["gate"]["reason"];
  EXPECT_TRUE(std::filesystem::is_regular_file(project / ".densefeed" / "ledger.db"));
}

TEST_F(ProjectE2E, ABranchMadeBeforeAGateChangeOnMainIsJudgedByMainsGate) {
  init_and_commit();
  git({"checkout", "-q", "-b", "agent-old"});
  testing::write_file(sub_ / "op.py", "# the agent's change\n");
  git({"commit", "-qam", "agent work"});
  git({"checkout", "-q", "main"});
  // A person changes the gate on main and re-locks it.
  auto gate = testing::read_file(repo_ / "gates" / "scan-sharded.yaml");
  gate.replace(gate.find("timeout_s: 120"), 14, "timeout_s: 100");
  testing::write_file(repo_ / "gates" / "scan-sharded.yaml", gate);
  git({"commit", "-qam", "gate: a shorter timeout"});
  ASSERT_EQ(densefeed({"gate", "lock"}).exit_code, 0);
  git({"commit", "-qam", "gate: re-locked"});
  const auto m = manifest("old-branch", "{revision: agent-old, params: {merge_dtype: float32}}",
                          "{revision: agent-old, params: {merge_dtype: float16}}");
  const J doc = run_json({m.string(), "--no-bench"}, 0);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["verdict"], "green") << doc["stages"]["gate"]["reason"];
  EXPECT_EQ(doc["stages"]["gate"]["provenance"]["trusted_commit"], git_out({"rev-parse", "main"}).substr(0, 40));
}

TEST_F(ProjectE2E, ABranchThatEditsAFrozenFileIsRedNamingIt) {
  init_and_commit();
  branch_appending("cheat", "harness/scan_reference.py", "\n# the reference, improved\n");
  const auto ref = testing::read_file(repo_ / "harness" / "scan_reference.py") + "\n# the reference, improved\n";
  const auto m = manifest("cheat", "{revision: cheat, params: {merge_dtype: float32}}", "{revision: main, params: {merge_dtype: float32}}");
  const J doc = run_json({m.string()}, 1);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["verdict"], "red");
  EXPECT_NE(doc["stages"]["gate"]["reason"].get<std::string>().find("harness/scan_reference.py"), std::string::npos)
      << doc["stages"]["gate"]["reason"];
  EXPECT_TRUE(doc["stages"]["gate"]["cases"].empty());

  // The same edit in the worktree, run as WORKTREE: red, saying so.
  testing::write_file(repo_ / "harness" / "scan_reference.py", ref);
  const auto w = manifest("cheat-wt", "{revision: WORKTREE, params: {merge_dtype: float32}}",
                          "{revision: WORKTREE, params: {merge_dtype: float16}}");
  const J wt = run_json({w.string()}, 1);
  ASSERT_TRUE(wt.is_object());
  EXPECT_NE(wt["stages"]["gate"]["reason"].get<std::string>().find("WORKTREE candidate edits frozen files: harness/scan_reference.py"),
            std::string::npos)
      << wt["stages"]["gate"]["reason"];
  // The agent is told what to do, from the failure's value: restore them.
  ASSERT_FALSE(wt["next"].empty()) << wt.dump();
  EXPECT_EQ(wt["next"][0]["kind"], "revert-frozen");
  EXPECT_NE(wt["next"][0]["suggestion"].get<std::string>().find("git checkout main -- harness/scan_reference.py"), std::string::npos)
      << wt["next"][0].dump();
  ASSERT_FALSE(doc["next"].empty()) << doc.dump();
  EXPECT_EQ(doc["next"][0]["kind"], "revert-frozen");
}

// densefeed.yaml is the agent's too when its branch is checked out: what
// decides how the reference runs (the interpreter, python.path) comes from the
// trusted ref's copy, and a branch that names itself the trusted ref gets a
// green that audit on main refuses.
TEST_F(ProjectE2E, AnAgentsDensefeedYamlDoesNotConfigureTheTrustedRun) {
  init_and_commit();
  const auto marker = dir_ / "shim-ran";
  const auto shim = repo_ / "tools" / "py";
  testing::write_file(shim, "#!/bin/sh\necho ran >> " + marker.string() + "\nexec /usr/bin/python3 \"$@\"\n");
  std::filesystem::permissions(shim, std::filesystem::perms::owner_all);
  const auto config = testing::read_file(repo_ / "densefeed.yaml");
  testing::write_file(repo_ / "densefeed.yaml", config + "python: {interpreter: tools/py}\n");
  const auto red = densefeed({"run", (repo_ / "experiments" / "scan-merge-float16.yaml").string(), "--no-bench", "--jobs", "2"});
  EXPECT_EQ(red.exit_code, 1) << red.out << red.err;
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the worktree's python.interpreter ran: " << testing::read_file(marker);
  testing::write_file(repo_ / "densefeed.yaml", config);

  git({"checkout", "-q", "-b", "self-trust"});
  auto own = config;
  own.replace(own.find("trusted_ref: main"), 17, "trusted_ref: self-trust");
  testing::write_file(repo_ / "densefeed.yaml", own);
  auto gate = testing::read_file(repo_ / "gates" / "scan-sharded.yaml");
  gate.replace(gate.find("rel_l2: 1.0e-5"), 14, "rel_l2: 1.0e-1");
  gate.replace(gate.find("max_abs: 1.0e-3"), 15, "max_abs: 1.0e+1");
  testing::write_file(repo_ / "gates" / "scan-sharded.yaml", gate);
  git({"commit", "-qam", "the agent trusts itself"});
  ASSERT_EQ(densefeed({"gate", "lock"}).exit_code, 0);
  git({"commit", "-qam", "and locks its own gate"});
  const auto forged = densefeed({"run", (repo_ / "experiments" / "scan-merge-float16.yaml").string(), "--no-bench", "--jobs", "2"});
  EXPECT_EQ(forged.exit_code, 0) << forged.out << forged.err;  // on its own branch it is green...
  git({"checkout", "-q", "main"});
  const auto audit = densefeed({"audit"});
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;  // ...and main's audit says where its gates came from
  EXPECT_NE(audit.out.find("with gates from the ref 'self-trust', not the trusted ref 'main'"), std::string::npos) << audit.out;
}

TEST_F(ProjectE2E, QueueReviewPromoteAndMcp) {
  init_and_commit();
  const auto m = manifest("promoted", "{revision: WORKTREE, params: {merge_dtype: float32}}",
                          "{revision: WORKTREE, params: {merge_dtype: float16}}",
                          "risk: [numerics]\nacceptance:\n  command: [python3, \"{project}/harness/scan.py\", --T, \"256\", --D, \"8\", "
                          "--shards, \"2\", --merge-dtype, \"{param.merge_dtype}\"]\n  criteria: [\"median(scan_ms) <= 60000\"]\n");
  const auto submit = densefeed({"submit", m.string(), "--json"});
  ASSERT_EQ(submit.exit_code, 0) << submit.out << submit.err;
  const auto id = std::to_string(J::parse(submit.out)["experiment_id"].get<int>());
  const auto worker = densefeed({"worker", "--once", "--jobs", "2"});
  ASSERT_EQ(worker.exit_code, 0) << worker.out << worker.err;
  const auto status = densefeed({"status", id, "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.out << status.err;
  EXPECT_EQ(J::parse(status.out)["gate_verdict"], "green") << status.out;
  const auto blocked = densefeed({"promote", id, "--by", "alice"});
  EXPECT_EQ(blocked.exit_code, 1) << blocked.out;
  ASSERT_EQ(densefeed({"review", "approve", id, "--by", "alice"}).exit_code, 0);
  // Both arms are WORKTREE: the base is the agent's, accepted by the person.
  const auto promote = densefeed({"promote", id, "--by", "alice", "--accept-agent-base", "--json"});
  ASSERT_EQ(promote.exit_code, 0) << promote.out << promote.err;
  EXPECT_EQ(J::parse(promote.out)["acceptance"], "pass") << promote.out;

  // MCP: the project's gates and the installed skill, from this project.
  const auto requests = dir_ / "mcp.in";
  testing::write_file(requests,
                      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"
                      "\n"
                      R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
                      "\n"
                      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_gates","arguments":{}}})"
                      "\n"
                      R"({"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"densefeed://skills/densefeed-optimization-loop/SKILL.md"}})"
                      "\n"
                      R"({"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"densefeed://gates/scan-sharded.yaml"}})"
                      "\n"
                      R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"analyze_trace","arguments":{"path":"/etc/shadow"}}})"
                      "\n");
  const auto mcp = testing::run_cli("/bin/sh", {"-c", "exec densefeed mcp < '" + requests.string() + "'"}, sub_, env());
  ASSERT_EQ(mcp.exit_code, 0) << mcp.out << mcp.err;
  std::map<int, J> responses;
  std::istringstream lines(mcp.out);
  for (std::string line; std::getline(lines, line);) {
    const J r = J::parse(line, nullptr, false);
    if (r.is_object() && r.contains("id")) responses[r["id"].get<int>()] = r;
  }
  ASSERT_TRUE(responses.count(2) && responses.count(3) && responses.count(4)) << mcp.out << mcp.err;
  EXPECT_NE(responses[2]["result"].dump().find("scan-sharded"), std::string::npos) << responses[2].dump();
  EXPECT_FALSE(responses[2]["result"].value("isError", false)) << responses[2].dump();
  const auto skill = responses[3]["result"]["contents"][0]["text"].get<std::string>();
  EXPECT_EQ(skill, testing::read_file(Installed::prefix() / "share/densefeed/skills/densefeed-optimization-loop/SKILL.md"));
  EXPECT_NE(responses[4]["result"]["contents"][0]["text"].get<std::string>().find("gate: scan-sharded"), std::string::npos);
  // The agent's tools read no file outside the project and the ledger's folder.
  ASSERT_TRUE(responses.count(5)) << mcp.out;
  EXPECT_TRUE(responses[5]["result"].value("isError", false)) << responses[5].dump();
  EXPECT_NE(responses[5]["result"].dump().find("outside the project folder"), std::string::npos) << responses[5].dump();
}

// SKILL.md's table of MCP tools is what an agent reads; tools/list is what the
// server takes. Every tool and every argument, required or optional, agree.
TEST_F(ProjectE2E, SkillToolTableMatchesToolsList) {
  init_and_commit();
  const auto requests = dir_ / "mcp.in";
  testing::write_file(requests,
                      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"
                      "\n"
                      R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})"
                      "\n");
  const auto mcp = testing::run_cli("/bin/sh", {"-c", "exec densefeed mcp < '" + requests.string() + "'"}, sub_, env());
  ASSERT_EQ(mcp.exit_code, 0) << mcp.err;
  J tools;
  std::istringstream lines(mcp.out);
  for (std::string line; std::getline(lines, line);) {
    const J r = J::parse(line, nullptr, false);
    if (r.is_object() && r.value("id", 0) == 2) tools = r["result"]["tools"];
  }
  ASSERT_TRUE(tools.is_array() && !tools.empty()) << mcp.out;
  std::map<std::string, std::pair<std::set<std::string>, std::set<std::string>>> served;  // name -> (required, optional)
  for (const auto& t : tools) {
    auto& [req, opt] = served[t["name"].get<std::string>()];
    const auto& schema = t["inputSchema"];
    for (const auto& r : schema.value("required", J::array())) req.insert(r.get<std::string>());
    for (const auto& [k, v] : schema["properties"].items()) {
      if (!req.count(k)) opt.insert(k);
    }
  }
  const auto skill = testing::read_file(Installed::prefix() / "share/densefeed/skills/densefeed-optimization-loop/SKILL.md");
  std::map<std::string, std::pair<std::set<std::string>, std::set<std::string>>> documented;
  const std::regex row(R"(^\| `([a-z_0-9]+)` \| (.*) \|$)"), arg(R"(`([a-z_0-9]+)(\??)`)");
  const auto section = skill.find("## 7. From an MCP client");
  ASSERT_NE(section, std::string::npos);
  std::istringstream doc(skill.substr(section, skill.find("\n## ", section + 1) - section));
  for (std::string line; std::getline(doc, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    auto& [req, opt] = documented[m[1].str()];
    const std::string args = m[2].str();
    for (auto it = std::sregex_iterator(args.begin(), args.end(), arg); it != std::sregex_iterator(); ++it) {
      ((*it)[2].str().empty() ? req : opt).insert((*it)[1].str());
    }
  }
  EXPECT_EQ(documented, served) << "SKILL.md's MCP table and tools/list disagree";
  EXPECT_EQ(documented.size(), 12u);
}

TEST_F(ProjectE2E, BadProjectInputIsExit2NamingWhatAndWhere) {
  // No densefeed.yaml anywhere above: exit 2 naming the folders and init.
  const auto none = densefeed({"gate", "list"});
  EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
  EXPECT_NE(none.err.find(sub_.string()), std::string::npos) << none.err;
  EXPECT_NE(none.err.find(repo_.string()), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("densefeed init"), std::string::npos) << none.err;

  init_and_commit();
  const auto config = testing::read_file(repo_ / "densefeed.yaml");
  // An unknown key: file, line, column and what was expected.
  testing::write_file(repo_ / "densefeed.yaml", config + "ledgr: x.db\n");
  auto r = densefeed({"gate", "list"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("densefeed.yaml:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ledgr"), std::string::npos) << r.err;
  // A wrong type.
  auto wrong_type = config;
  wrong_type.replace(wrong_type.find("harness_path: []"), 16, "harness_path: build/bin");
  testing::write_file(repo_ / "densefeed.yaml", wrong_type);
  r = densefeed({"gate", "list"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("harness_path"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("array"), std::string::npos) << r.err;
  // A trusted ref that does not exist.
  auto no_ref = config;
  no_ref.replace(no_ref.find("trusted_ref: main"), 17, "trusted_ref: release");
  testing::write_file(repo_ / "densefeed.yaml", no_ref);
  r = densefeed({"run", (repo_ / "experiments" / "scan-merge-float32.yaml").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("trusted ref 'release' names no commit"), std::string::npos) << r.err;
  // An interpreter without numpy, as the trusted ref configures it (a
  // worktree's python settings are never used: see AnAgentsDensefeedYaml...).
  testing::write_file(repo_ / "densefeed.yaml", config + "python: {interpreter: /bin/false}\n");
  git({"commit", "-qam", "a person configures an interpreter without numpy"});
  r = densefeed({"run", (repo_ / "experiments" / "scan-merge-float32.yaml").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("cannot import numpy"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("python.interpreter"), std::string::npos) << r.err;
  testing::write_file(repo_ / "densefeed.yaml", config);
  git({"commit", "-qam", "and takes it back"});
  // A gate whose frozen file is not on the trusted ref: locking it is refused.
  auto gate = testing::read_file(repo_ / "gates" / "scan-sharded.yaml");
  gate += "  - harness/new_frozen.py\n";
  testing::write_file(repo_ / "gates" / "scan-sharded.yaml", gate);
  testing::write_file(repo_ / "harness" / "new_frozen.py", "# new\n");
  git({"commit", "-qam", "gate: freeze one more file (not committed)"});
  r = densefeed({"gate", "lock"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("harness/new_frozen.py"), std::string::npos) << r.err;
  // A gate committed on main that nobody could lock (a placeholder no case
  // defines): a run is bad input naming it, not a red asking for a lock.
  auto typo = testing::read_file(repo_ / "gates" / "scan-sharded.yaml");
  typo.replace(typo.find("gate: scan-sharded"), 18, "gate: scan-typo");
  typo.replace(typo.find("\"{case.T}\", --D"), 10, "\"{case.Tt}\"");
  testing::write_file(repo_ / "gates" / "scan-typo.yaml", typo);
  git({"add", "-A"});
  git({"commit", "-qm", "a gate with a typo"});
  const auto m = manifest("typo", "{revision: WORKTREE, params: {merge_dtype: float32}}", "{revision: WORKTREE, params: {merge_dtype: float16}}");
  auto mt = testing::read_file(m);
  mt.replace(mt.find("gate: scan-sharded"), 18, "gate: scan-typo");
  testing::write_file(m, mt);
  r = densefeed({"run", m.string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("case.Tt"), std::string::npos) << r.err;
  // Nothing was written to the ledger by any of it.
  EXPECT_FALSE(std::filesystem::exists(repo_ / ".densefeed" / "ledger.db"));
}

}  // namespace
}  // namespace densefeed
