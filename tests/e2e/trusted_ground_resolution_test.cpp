// Issue 25, trusted resolution: the gate's reference and bench driver, their
// interpreter and their import path come from the trusted ref only (its
// export, or densefeed's build of it), never from the worktree the agent
// writes. Each test is an attack that needs nothing but files in the
// worktree (most of them git-ignored, as a build folder or a .venv is): each
// planted program, if it ever ran, would leave a marker file outside the
// project; each must be refused at load (exit 2, nothing recorded, nothing
// run) or simply never be found.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::string kExe = DENSEFEED_EXE;

const std::string kWriter =
    "import os, numpy as np\nnp.save(os.path.join(os.environ['DENSEFEED_OUT'], 'y.npy'), np.arange(4.0))\n";

// A gate whose reference is `reference` (a YAML flow list) and whose
// candidate is the committed c.py; `extra` is more of the gate's YAML.
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
  // A planted program's proof of life: a file outside the project (the
  // sandbox shows no such folder, so only an unsandboxed run could write it;
  // either way it must not exist).
  std::filesystem::path marker() const { return dir_ / "planted-code-ran"; }
  std::string plant() const { return "open(" + J(marker().string()).dump() + ", 'w').write('ran')\n"; }
  std::string plant_sh() const { return "touch '" + marker().string() + "'\n"; }

  std::string make(const std::map<std::string, std::string>& files) { return testing::locked_project(repo_, files, kExe, env_); }
  void manifest() {
    testing::write_file(dir_ / "m.yaml", "experiment: m\nhypothesis: h\npredicted_effect: p\ngate: g\n"
                                         "candidate: {revision: WORKTREE, params: {m: b}}\nbase: {revision: WORKTREE}\n");
  }
  // Commits the worktree as it is, re-locks the gates as a person would and
  // commits the lock. Returns "" or what failed.
  std::string relock(const std::string& message) {
    if (auto failed = testing::git_commit_all(repo_, message); !failed.empty()) return failed;
    const auto lock = testing::run_cli(kExe, {"gate", "lock"}, repo_, env_);
    if (lock.exit_code != 0) return "densefeed gate lock: " + lock.out + lock.err;
    return testing::git_commit_all(repo_, "lock: " + message);
  }
  testing::CliResult run(std::map<std::string, std::string> extra_env = {}) {
    auto env = env_;
    for (const auto& [k, v] : extra_env) env[k] = v;
    return testing::run_cli(kExe, {"run", (dir_ / "m.yaml").string(), "--json", "--no-bench"}, repo_, env);
  }
  // Refused at load: exit 2, an error holding each of `says` (the file, the
  // field, what to do), no planted code run, no experiment in the ledger.
  void expect_refused_at_load(const testing::CliResult& r, const std::vector<std::string>& says) {
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    for (const auto& text : says) EXPECT_NE(r.err.find(text), std::string::npos) << text << " not in: " << r.err;
    EXPECT_FALSE(std::filesystem::exists(marker())) << "planted code ran";
    const auto list = testing::run_cli(kExe, {"ledger", "list", "--json"}, repo_, env_);
    if (list.exit_code == 0) EXPECT_EQ(J::parse(list.out)["experiments"].size(), 0u) << list.out;
  }

  testing::TempDir dir_;
  std::filesystem::path repo_ = dir_ / "project";
  std::map<std::string, std::string> env_ = testing::project_env(dir_ / "home");
};

// The README's own `python: {path: [third_party]}`, git-ignored: a
// sitecustomize.py there is imported by every Python that has it on its path.
TEST_F(TrustedGround, ASitecustomizeInAGitIgnoredPythonPathFolderNeverRunsAsTheReference) {
  ASSERT_EQ(make({{"densefeed.yaml", "gates: gates\nexperiments: experiments\nledger: .densefeed/ledger.db\n"
                                     "python: {path: [third_party]}\n"},
                  {".gitignore", ".densefeed/\nthird_party/\n"},
                  {"c.py", kWriter},
                  {"ref.py", kWriter},
                  {"gates/g.yaml", gate_yaml("[python3, \"{project}/ref.py\"]")}}),
            "");
  testing::write_file(repo_ / "third_party" / "sitecustomize.py", plant());
  manifest();
  expect_refused_at_load(run(), {"densefeed.yaml", "python.path[0]", "'third_party' is not a folder of the trusted ref's tree"});

  // Committed, the folder is the trusted ref's; a sitecustomize.py the
  // agent adds to it later (untracked) is still never the reference's.
  testing::write_file(repo_ / ".gitignore", ".densefeed/\n");
  testing::write_file(repo_ / "third_party" / "sitecustomize.py", "# the team's\n");
  ASSERT_EQ(testing::git_commit_all(repo_, "third_party"), "");
  testing::write_file(repo_ / "third_party" / "sitecustomize.py", plant());
  // The reference alone imports it: the candidate, WORKTREE, may see what
  // the agent wrote (it is the agent's), so it runs a copy that skips it.
  testing::write_file(repo_ / "c.py", "import sys\nsys.path = [p for p in sys.path if 'third_party' not in p]\n" + kWriter);
  ASSERT_EQ(relock("candidate"), "");
  testing::write_file(repo_ / "third_party" / "sitecustomize.py", plant());  // dirty in the worktree
  const auto green = run();
  EXPECT_EQ(green.exit_code, 0) << green.out << green.err;
  EXPECT_FALSE(std::filesystem::exists(marker())) << "the worktree's sitecustomize.py ran";
}

// The README's `python.interpreter: .venv/bin/python`: a wrapper there is the
// agent's program, and would be the reference's interpreter.
TEST_F(TrustedGround, AVenvInterpreterInTheWorktreeIsRefusedForTheReference) {
  for (const std::string& interpreter : std::vector<std::string>{".venv/bin/python", (repo_ / ".venv/bin/python").string()}) {
    SCOPED_TRACE(interpreter);
    std::filesystem::remove_all(repo_);
    ASSERT_EQ(make({{"densefeed.yaml", "gates: gates\nexperiments: experiments\nledger: .densefeed/ledger.db\n"
                                       "python: {interpreter: " + interpreter + "}\n"},
                    {".gitignore", ".densefeed/\n.venv/\n"},
                    {"c.py", kWriter},
                    {"ref.py", kWriter},
                    {"gates/g.yaml", gate_yaml("[python3, \"{project}/ref.py\"]")}}),
              "");
    const auto python = repo_ / ".venv" / "bin" / "python";
    testing::write_file(python, "#!/bin/sh\n" + plant_sh() + "exec /usr/bin/python3 \"$@\"\n");
    std::filesystem::permissions(python, std::filesystem::perms::owner_all);
    manifest();
    expect_refused_at_load(run(), {"densefeed.yaml", "python.interpreter", "an absolute interpreter outside the project folder"});
  }
}

// densefeed's own layout: a compiled reference named bare, found on the
// harness_path in a git-ignored build folder. A wrapper there is the agent's.
TEST_F(TrustedGround, AWrapperInTheWorktreesBuildFolderNeverRunsAsTheReferenceOrTheDriver) {
  ASSERT_EQ(make({{"densefeed.yaml", "gates: gates\nexperiments: experiments\nledger: .densefeed/ledger.db\nharness_path: [bin]\n"},
                  {".gitignore", ".densefeed/\nbin/\n"},
                  {"c.py", kWriter},
                  {"ref.py", "#!/usr/bin/env python3\n" + kWriter},
                  {"gates/g.yaml", gate_yaml("[ref]")}}),
            "");
  testing::write_file(repo_ / "bin" / "ref", "#!/bin/sh\n" + plant_sh() + "exec python3 \"$(dirname \"$0\")/../ref.py\"\n");
  std::filesystem::permissions(repo_ / "bin" / "ref", std::filesystem::perms::owner_all);
  manifest();
  // 1. Nothing says how to build it from the trusted ref: refused at load.
  expect_refused_at_load(run(), {"g.yaml", "reference.command", "the trusted ref's, never the worktree's build of it"});

  // 2. A bench driver only the worktree's build holds: refused the same way.
  testing::write_file(repo_ / "gates" / "g.yaml",
                      gate_yaml("[python3, \"{project}/ref.py\"]",
                                "bench:\n  cases: [{n: 1}]\n  driver:\n    command: [drv]\n    kernel: {module: c, function: f}\n"));
  ASSERT_EQ(relock("a driver"), "");
  testing::write_file(repo_ / "bin" / "drv", "#!/bin/sh\n" + plant_sh());
  std::filesystem::permissions(repo_ / "bin" / "drv", std::filesystem::perms::owner_all);
  expect_refused_at_load(run(), {"g.yaml", "bench.driver.command"});

  // 3. With a build, the reference is the trusted ref's build of it; the
  // worktree's bin/ref never runs, and the run is green from the real one.
  testing::write_file(repo_ / "gates" / "g.yaml",
                      gate_yaml("[ref]", "build:\n  commands:\n    - [install, -D, -m, \"755\", \"{src}/ref.py\", \"{build}/ref\"]\n"
                                         "  bin: \"{build}\"\n"));
  ASSERT_EQ(relock("a build"), "");
  const auto g = run();
  EXPECT_EQ(g.exit_code, 0) << g.out << g.err;
  EXPECT_FALSE(std::filesystem::exists(marker())) << "the worktree's bin/ref ran as the reference";
  if (g.exit_code == 0) {
    const J doc = J::parse(g.out);
    bool built = false;
    for (const auto& [program, sha] : doc["stages"]["gate"]["provenance"]["harness_sha256"].items()) {
      EXPECT_EQ(program.find((repo_ / "bin").string() + "/"), std::string::npos) << program;
      built = built || program.find("-builds/") != std::string::npos;
    }
    EXPECT_TRUE(built) << doc["stages"]["gate"]["provenance"].dump(1);
    EXPECT_TRUE(doc["stages"]["gate"]["provenance"]["clean"].get<bool>()) << doc["stages"]["gate"]["provenance"].dump(1);
  }
}

// What the reference itself sees, from inside: its program, interpreter,
// prefix and every import path lie outside the project folder but for the
// trusted ref's export; the environment of the agent's shell (PYTHONPATH,
// LD_PRELOAD) does not reach it. Fails when any of them resolves into the
// worktree.
TEST_F(TrustedGround, NoTrustedProgramInterpreterOrImportPathResolvesUnderTheProjectFolder) {
  const std::string probe =
      "import os, sys, json\n"
      "sys.stderr.write('PROBE ' + json.dumps({'exe': sys.executable, 'real': os.path.realpath(sys.executable),\n"
      "  'prefix': sys.prefix, 'argv0': os.path.realpath(sys.argv[0]), 'path': [os.path.realpath(p) for p in sys.path if p],\n"
      "  'env': {k: v for k, v in os.environ.items() if k in ('PYTHONPATH', 'LD_PRELOAD', 'PYTHONSTARTUP', 'PATH')}}) + '\\n')\n" +
      kWriter;
  ASSERT_EQ(make({{"densefeed.yaml", "gates: gates\nexperiments: experiments\nledger: .densefeed/ledger.db\n"
                                     "python: {path: [lib]}\nharness_path: [tools]\n"},
                  {"lib/team.py", "# the team's module\n"},
                  {"c.py", kWriter},
                  {"ref.py", probe},
                  {"gates/g.yaml", gate_yaml("[python3, \"{project}/ref.py\"]")}}),
            "");
  manifest();
  // The agent's shell: a folder of the worktree first on PATH, with a
  // python3 of its own there (an activated in-project venv).
  const auto agent_dir = repo_ / "agent";
  testing::write_file(agent_dir / "python3", "#!/bin/sh\n" + plant_sh() + "exec /usr/bin/python3 \"$@\"\n");
  std::filesystem::permissions(agent_dir / "python3", std::filesystem::perms::owner_all);
  const auto r = run({{"PYTHONPATH", agent_dir.string()},
                      {"LD_PRELOAD", (agent_dir / "evil.so").string()},
                      {"PATH", agent_dir.string() + ":/usr/local/bin:/usr/bin:/bin"}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const J doc = J::parse(r.out);
  const auto runs = repo_ / ".densefeed" / "ledger-runs" / std::to_string(doc["experiment_id"].get<int>());
  std::string probe_line;
  for (const auto& e : std::filesystem::recursive_directory_iterator(runs)) {
    if (e.path().filename() != "stderr.log") continue;
    const auto text = testing::read_file(e.path());
    if (const auto at = text.find("PROBE "); at != std::string::npos) probe_line = text.substr(at + 6, text.find('\n', at) - at - 6);
  }
  ASSERT_FALSE(probe_line.empty()) << "the reference's stderr.log holds no probe line";
  const J seen = J::parse(probe_line);
  const auto project = std::filesystem::weakly_canonical(repo_).string() + "/";
  const auto exports = std::filesystem::weakly_canonical(repo_ / ".densefeed" / "ledger-exports").string() + "/";
  const auto trusted = [&](const std::string& p) { return p.rfind(project, 0) != 0 || p.rfind(exports, 0) == 0; };
  for (const char* key : {"exe", "real", "prefix", "argv0"}) EXPECT_TRUE(trusted(seen[key].get<std::string>())) << key << ": " << seen[key];
  EXPECT_EQ(seen["argv0"].get<std::string>().rfind(exports, 0), 0u) << seen["argv0"];
  bool lib_from_export = false;
  for (const auto& p : seen["path"]) {
    EXPECT_TRUE(trusted(p.get<std::string>())) << "import path " << p;
    lib_from_export = lib_from_export || (p.get<std::string>().rfind(exports, 0) == 0 && p.get<std::string>().ends_with("/lib"));
  }
  EXPECT_TRUE(lib_from_export) << "python.path's lib is the export's: " << seen["path"];
  EXPECT_FALSE(std::filesystem::exists(marker())) << "the agent's python3 ran outside the sandbox";
  EXPECT_FALSE(seen["env"].contains("LD_PRELOAD")) << seen["env"];
  EXPECT_FALSE(seen["env"].contains("PYTHONSTARTUP")) << seen["env"];
  EXPECT_EQ(seen["env"]["PYTHONPATH"].get<std::string>().find(agent_dir.string()), std::string::npos) << seen["env"];
  EXPECT_EQ(seen["env"]["PATH"].get<std::string>().find(agent_dir.string()), std::string::npos) << seen["env"];
}

}  // namespace
}  // namespace densefeed
