// Helpers shared by densefeed's tests: temporary folders, files, and running
// the real CLI as a process.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
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

}  // namespace densefeed::testing
