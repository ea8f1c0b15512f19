// Starts harness processes (Boost.Process): argv, no shell, stdin from
// /dev/null, stdout/stderr to capped log files, its own process group, a
// timeout after which the whole group gets SIGTERM and, after a grace
// period, SIGKILL. Defaults: process_limits.h. Only this file starts
// processes.
//
// What is killed: the command's process group; at a timeout also every
// process below it that left the group (setsid, setpgid), found through
// /proc while its parent chain still leads to the command; and, when
// densefeed adopts orphans (adopt_orphans(), as the CLI does), any process
// that left its group and lost its parent, swept (a walk of /proc, about
// 1 ms per 150 processes) after each command without a launcher ends.
// Under the sandbox (a launcher with its own PID namespace) the kernel ends
// every process the command started when the sandbox ends. Every command
// gets DENSEFEED_RUN_TOKEN (unique per command) in its environment: an
// orphan that still carries the token of a command that is running is left
// to that command's end; one without (it cleared its environment) is ended
// at the next command's end, whichever that is.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "failure.h"
#include "output_capture.h"
#include "process_limits.h"

namespace densefeed {

struct ProcessSpec {
  // argv[0] without '/' is looked up in exe_dirs (the arm's build, the
  // project's harness_path: arm_context.h), in order, then in PATH; never
  // next to the densefeed binary.
  std::vector<std::string> argv;
  std::vector<std::filesystem::path> exe_dirs;
  std::map<std::string, std::string> env;  // added to (and overriding) densefeed's own environment
  // The command's environment is `env` alone (plus DENSEFEED_RUN_TOKEN), not
  // densefeed's: what untrusted_launch.h's allowlist gives.
  bool clear_env = false;
  // Applied with setrlimit(2) in the child before exec (0 = unchanged):
  // RLIMIT_AS and RLIMIT_FSIZE, bytes. untrusted_launch.h sets them.
  std::uint64_t rlimit_as_bytes = 0;
  std::uint64_t rlimit_fsize_bytes = 0;
  // Open files ("cgroup.procs" of a cgroup v1 hierarchy) the child writes
  // "0" into before exec: it joins those cgroups, and so does everything
  // it starts (untrusted_launch.h's CommandCgroup).
  std::vector<int> join_fds;
  // The same, where joining is best effort: a failed write is ignored (the
  // session freezer's cgroup, process_freezer.h join_fd: without it the
  // freezer moves the tree in later, or falls back to signals).
  std::vector<int> try_join_fds;
  std::filesystem::path cwd;
  std::filesystem::path stdout_path;
  std::filesystem::path stderr_path;
  std::chrono::milliseconds timeout{static_cast<long long>(kDefaultHarnessTimeoutS * 1000)};
  std::chrono::milliseconds kill_grace = kDefaultKillGrace;  // between SIGTERM and SIGKILL
  // Bytes kept of stdout and of stderr, each; the rest is counted, dropped.
  std::uint64_t output_cap_bytes = kDefaultOutputCapBytes;
  // Runs the command as launcher + {resolved argv[0], argv[1]...} (the
  // sandbox's bwrap prefix). A launcher reports the command's death by
  // signal N as exit code 128 + N (bwrap, like a shell); that is read back
  // as signal N, so a command that itself exits 129..192 under a launcher is
  // reported as killed by that signal.
  std::vector<std::string> launcher;
  // When set and it becomes true, the group is ended as at a timeout
  // (ProcessResult::cancelled); `densefeed cancel` of a running experiment.
  const std::atomic<bool>* cancel = nullptr;
  // A harness session's request pipe (session.h): when >= 0 the command's
  // stdin is this descriptor (the read end of a pipe, opened O_CLOEXEC)
  // instead of /dev/null.
  int stdin_fd = -1;
  // The outside clock's socket (outside_clock.h): when >= 0 it is the one
  // descriptor above stderr the command inherits, as descriptor
  // kClockChildFd (3), close-on-exec cleared; every other one is closed.
  int pass_fd = -1;
  // When set, the command's process group leader's pid is stored here once
  // it runs (0 again when it has ended): for reading its memory.
  std::atomic<int>* leader = nullptr;
};

struct ProcessResult {
  bool started = false;
  std::string start_error;  // why it could not start (not found, not executable)
  int exit_code = -1;       // when it exited normally
  int signal = 0;           // when a signal ended it
  bool timed_out = false;
  bool cancelled = false;   // ended through ProcessSpec::cancel
  double timeout_s = 0;      // the limit it ran under, seconds
  double kill_grace_s = 0;   // SIGTERM to SIGKILL, seconds
  bool sigkill_needed = false;  // timed out and outlived SIGTERM by the grace period
  // Processes that had left its process group (setsid, setpgid) and were
  // killed: found below it at its timeout, or adopted as orphans after it
  // ended. Under the sandbox only the first kind is counted: what is left
  // when it ends dies with its PID namespace, uncounted.
  std::size_t strays_killed = 0;
  CaptureCounts stdout_capture;  // bytes written to stdout, bytes dropped beyond the cap
  CaptureCounts stderr_capture;
  double wall_s = 0;        // from spawn to reaping, seconds
  std::string resolved_exe;
  // Who ended it when that was not densefeed's own timeout or cancel: the
  // scheduler's job and state ("Slurm job 42 ended TIMEOUT at its time limit
  // of 1 min"); describe() says it.
  std::string ended_by;

  bool ok() const { return started && !timed_out && !cancelled && signal == 0 && exit_code == 0; }
  // What ended it, to follow "the candidate ": "exited with code 2", "was
  // killed by signal 11 (SIGSEGV)", "timed out after 10 s and was killed
  // (SIGTERM ended it)", "could not start: ...", "exited with code 0".
  std::string describe() const;
};

// How a process that did not exit 0 failed, as a value (failure.h): crash
// (signal), timeout, exit_code, or no_start; FailureKind::none when it exited
// 0. detail is left empty (ProcessResult::describe() says it in words).
Failure process_failure_value(FailureWho who, const ProcessResult& p);

// Runs one process to completion. Never throws for anything the child does;
// throws InfraError only if the log files or their pipes cannot be created.
ProcessResult run_process(const ProcessSpec& spec);

// The last `max_lines` lines (at most `max_bytes`) of a text file, for
// messages, through printable() (keeping '\n' and '\t'): valid UTF-8
// whatever the file holds.
std::string file_tail(const std::filesystem::path& path, std::size_t max_lines = kLogTailLines, std::size_t max_bytes = 4096);

// A failing process's log tail for its verdict: the last lines of its
// stderr, or of its stdout when stderr is empty. `stream` says which
// ("stderr", "stdout"; empty when both are).
struct LogTail {
  std::string stream;
  std::string text;
};
LogTail log_tail(const std::filesystem::path& stdout_path, const std::filesystem::path& stderr_path,
                 std::size_t max_lines = kLogTailLines);

// On SIGINT, SIGTERM or SIGHUP, kill every process group run_process has
// running, then end densefeed by the same signal: a killed densefeed leaves
// no harness behind. Call once, early in main.
void kill_children_on_termination();

// Also run `hook` from that signal handler, after the process groups are
// killed and before densefeed ends (at most 8 hooks; async-signal-safe code
// only: the Slurm executor's scancel of its jobs through fork + execv).
void add_termination_hook(void (*hook)());

// Where argv[0] = `name` would run from: a name with '/' as is, else the
// first of exe_dirs holding it, else in PATH; empty when not found.
std::filesystem::path resolve_executable(const std::string& name, const std::vector<std::filesystem::path>& exe_dirs = {});

// Runs argv to completion (timeout `timeout`) and returns its stdout, or
// nullopt if it could not start or did not exit 0. For small helper commands
// (git); stderr is discarded.
std::optional<std::string> capture_output(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                                          std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Starts argv (argv[0] a path) as a process of its own that outlives
// densefeed: a new session, no death signal, stdin /dev/null, stdout and
// stderr appended to the files. For the MCP server's worker: a server that
// crashes must not take a benchmark with it. densefeed's sweep of adopted
// orphans leaves it alone. Returns its pid; throws InfraError when it
// cannot start.
pid_t start_detached(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                     const std::filesystem::path& stdout_path, const std::filesystem::path& stderr_path);

// Directory of the running densefeed executable (where harnesses are built).
std::filesystem::path self_dir();

}  // namespace densefeed
