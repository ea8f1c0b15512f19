// Helpers shared by densefeed's tests: temporary folders, files, and running
// the real CLI as a process.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "process_runner.h"

namespace densefeed::testing {

// A fresh folder under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("densefeed-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Processes (not zombies) whose command line mentions `text`, e.g. a run's
// unique output folder: found by what they were started with, so that a
// process in a sandbox's own PID namespace is found too.
inline std::vector<int> processes_mentioning(const std::string& text) {
  std::vector<int> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file(entry.path() / "cmdline");
    std::string stat = read_file(entry.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z') continue;
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (cmdline.find(text) != std::string::npos) found.push_back(std::stoi(name));
  }
  return found;
}

// Waits (at most 5 s: a killed process takes a moment to end) until no
// process mentions `text`; returns those still there.
inline std::vector<int> processes_left_mentioning(const std::string& text) {
  auto left = processes_mentioning(text);
  for (int i = 0; i < 250 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    left = processes_mentioning(text);
  }
  return left;
}

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `exe args...` to completion (timeout 10 min) in `cwd`.
inline CliResult run_cli(const std::string& exe, const std::vector<std::string>& args, const std::filesystem::path& cwd,
                         const std::map<std::string, std::string>& env = {}) {
  ProcessSpec spec;
  spec.argv.push_back(exe);
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = env;
  spec.cwd = cwd;
  static int counter = 0;
  const auto tag = std::to_string(::getpid()) + "-" + std::to_string(counter++);
  spec.stdout_path = std::filesystem::temp_directory_path() / ("densefeed-cli-" + tag + ".out");
  spec.stderr_path = std::filesystem::temp_directory_path() / ("densefeed-cli-" + tag + ".err");
  spec.timeout = std::chrono::minutes(10);
  const ProcessResult r = run_process(spec);
  CliResult result;
  result.exit_code = r.started && !r.timed_out && r.signal == 0 ? r.exit_code : -1;
  result.out = read_file(spec.stdout_path);
  result.err = read_file(spec.stderr_path);
  std::filesystem::remove(spec.stdout_path);
  std::filesystem::remove(spec.stderr_path);
  return result;
}

// Writes DIR/densefeed.yaml, which makes DIR a project (DESIGN.md): `text`
// is its YAML ("{}": every default: gates/, experiments/, the trusted ref
// main, .densefeed/ledger.db).
inline void write_project(const std::filesystem::path& dir, const std::string& text = "{}\n") {
  write_file(dir / "densefeed.yaml", text);
}

// `env` with `bin` first on PATH. A test project in a temporary folder names
// its harnesses bare (cheat_harness, ...); densefeed looks such a name up in
// the project's harness_path (folders inside the project) and then in PATH,
// never next to itself, so the build's bin folder goes on PATH.
inline std::map<std::string, std::string> with_on_path(const std::filesystem::path& bin,
                                                       std::map<std::string, std::string> env = {}) {
  std::string rest;
  if (auto it = env.find("PATH"); it != env.end()) rest = it->second;
  else if (const char* path = std::getenv("PATH")) rest = path;
  env["PATH"] = bin.string() + (rest.empty() ? "" : ":" + rest);
  return env;
}

// The environment a team's project runs densefeed in for these tests: the
// system's PATH only (densefeed finds its harnesses through the project,
// never through the build folder) and HOME in a folder of the test's own.
inline std::map<std::string, std::string> project_env(const std::filesystem::path& home) {
  return {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", home.string()}};
}

// Runs git in `dir` with a fixed identity (and no signing, hooks or global
// configuration of the person running the tests).
inline CliResult git(const std::filesystem::path& dir, std::vector<std::string> args) {
  args.insert(args.begin(), {"-C", dir.string(), "-c", "user.name=densefeed-test", "-c", "user.email=t@example.invalid",
                             "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null"});
  return run_cli("/usr/bin/git", args, dir, {{"GIT_CONFIG_GLOBAL", "/dev/null"}, {"GIT_CONFIG_NOSYSTEM", "1"}});
}

// Makes `dir` a git repository whose branch main (the default trusted ref)
// holds everything in it as one commit. Returns "" or what failed.
inline std::string git_init_main(const std::filesystem::path& dir, const std::string& message = "initial") {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"init", "-q", "-b", "main"},
                                               std::vector<std::string>{"add", "-A"},
                                               std::vector<std::string>{"commit", "-q", "-m", message}}) {
    const auto r = git(dir, args);
    if (r.exit_code != 0) return "git " + args[0] + " in " + dir.string() + ": " + r.out + r.err;
  }
  return "";
}

// Commits everything in `dir` on its current branch. Returns "" or what failed.
inline std::string git_commit_all(const std::filesystem::path& dir, const std::string& message) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"add", "-A"},
                                               std::vector<std::string>{"commit", "-q", "-m", message}}) {
    const auto r = git(dir, args);
    if (r.exit_code != 0) return "git " + args[0] + " in " + dir.string() + ": " + r.out + r.err;
  }
  return "";
}

// A project in `dir` as a team keeps one: a git repository on main holding
// densefeed.yaml (the defaults written out; the workspace ignored by git),
// `files` (path relative to dir -> text), and its gates locked by
// `densefeed gate lock` (run as `densefeed` with `env`) with the lock
// committed. The repository keeps a local identity for later commits.
// Returns "" or what failed.
inline std::string locked_project(const std::filesystem::path& dir, const std::map<std::string, std::string>& files,
                                  const std::string& densefeed, const std::map<std::string, std::string>& env) {
  write_file(dir / "densefeed.yaml", "gates: gates\nexperiments: experiments\nledger: .densefeed/ledger.db\n");
  write_file(dir / ".gitignore", ".densefeed/\n");
  for (const auto& [rel, text] : files) write_file(dir / rel, text);
  write_file(dir / "gates" / "gates.lock", "");
  if (auto failed = git_init_main(dir, "gates"); !failed.empty()) return failed;
  for (const auto& [key, value] : {std::pair{"user.email", "t@e"}, std::pair{"user.name", "t"}}) {
    if (git(dir, {"config", key, value}).exit_code != 0) return std::string("git config ") + key + " failed";
  }
  const auto lock = run_cli(densefeed, {"gate", "lock"}, dir, env);
  if (lock.exit_code != 0) return "densefeed gate lock: " + lock.out + lock.err;
  return git_commit_all(dir, "lock");
}

}  // namespace densefeed::testing
