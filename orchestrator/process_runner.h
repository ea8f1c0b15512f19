// Starts harness processes (Boost.Process): argv, no shell, stdin from
// /dev/null, stdout/stderr to files, its own process group, a timeout after
// which the whole group gets SIGTERM and, after a grace period, SIGKILL.
// Only this file starts processes.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace densefeed {

struct ProcessSpec {
  // argv[0] without '/' is looked up in exe_dir (when set: a revision's
  // build), then next to the densefeed binary, then in PATH.
  std::vector<std::string> argv;
  std::filesystem::path exe_dir;
  std::map<std::string, std::string> env;  // added to (and overriding) densefeed's own environment
  std::filesystem::path cwd;
  std::filesystem::path stdout_path;
  std::filesystem::path stderr_path;
  std::chrono::milliseconds timeout{600'000};
  std::chrono::milliseconds kill_grace{2'000};  // between SIGTERM and SIGKILL
  // When set and it becomes true, the group is ended as at a timeout
  // (ProcessResult::cancelled); `densefeed cancel` of a running experiment.
  const std::atomic<bool>* cancel = nullptr;
};

struct ProcessResult {
  bool started = false;
  std::string start_error;  // why it could not start (not found, not executable)
  int exit_code = -1;       // when it exited normally
  int signal = 0;           // when a signal ended it
  bool timed_out = false;
  bool cancelled = false;   // ended through ProcessSpec::cancel
  double wall_s = 0;        // from spawn to reaping, seconds
  std::string resolved_exe;

  bool ok() const { return started && !timed_out && !cancelled && signal == 0 && exit_code == 0; }
  // "exit code 2", "killed by signal 11 (SIGSEGV)", "timed out after 10 s", ...
  std::string describe() const;
};

// Runs one process to completion. Never throws for anything the child does;
// throws InfraError only if the output files cannot be created.
ProcessResult run_process(const ProcessSpec& spec);

// The last `max_lines` lines (at most `max_bytes`) of a text file, for messages.
std::string file_tail(const std::filesystem::path& path, std::size_t max_lines = 12, std::size_t max_bytes = 4096);

// On SIGINT, SIGTERM or SIGHUP, kill every process group run_process has
// running, then end densefeed by the same signal: a killed densefeed leaves
// no harness behind. Call once, early in main.
void kill_children_on_termination();

// Where argv[0] = `name` would run from: a name with '/' as is, else in
// exe_dir (if given), else next to densefeed, else in PATH; empty when not found.
std::filesystem::path resolve_executable(const std::string& name, const std::filesystem::path& exe_dir = {});

// Runs argv to completion (timeout `timeout`) and returns its stdout, or
// nullopt if it could not start or did not exit 0. For small helper commands
// (git); stderr is discarded.
std::optional<std::string> capture_output(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                                          std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Directory of the running densefeed executable (where harnesses are built).
std::filesystem::path self_dir();

}  // namespace densefeed
