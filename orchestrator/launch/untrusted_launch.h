// The one path by which densefeed starts a command whose argv or code comes
// from a manifest or a candidate revision: the candidate's and the base's
// harnesses (gate, bench), trace commands, acceptance commands and the build
// commands of a revision (DESIGN.md, boundaries of trust). It decides, for
// every such command alike:
//   - the sandbox (sandbox.h: bwrap's small world, no network, own PID
//     namespace), and fails closed: when the sandbox was asked for and cannot
//     start, nothing runs (InfraError, exit 3); only --no-sandbox runs it bare;
//   - the environment: an allowlist, never densefeed's own (see
//     untrusted_environment);
//   - the limits (process_limits.h CommandLimits, per gate): memory and
//     processes in a cgroup of its own where densefeed can make one, else
//     RLIMIT_AS / RLIMIT_NPROC; file size (RLIMIT_FSIZE); the private /tmp's
//     size; a limit it hits is named in its result;
//   - that nothing outlives it: every process it starts is in its PID
//     namespace (sandboxed) and in its cgroup, both ended with it.
// Reference commands are trusted (the gate store's, trusted_arm.h) and start
// here too, in the same sandbox with the same allowlisted environment: they
// import libraries that may not be trusted, and must reach nothing the agent
// wrote (its worktree, its home, its environment's LD_PRELOAD or PYTHONPATH).
// tests/orchestrator/untrusted_launch_test.cpp holds the list of files that
// may start processes; a process started elsewhere fails it.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "arm_context.h"
#include "process_limits.h"
#include "failure.h"
#include "process_runner.h"
#include "rank_group.h"
#include "sandbox.h"
#include "workspace.h"

namespace densefeed {

struct UntrustedCommand {
  std::vector<std::string> argv;   // rendered (arm_command); argv[0] looked up in the arm's exe_dirs, then PATH
  const ArmContext* arm = nullptr; // where it runs from; nullptr for a revision build (its own folder only)
  std::map<std::string, std::string> env;  // the protocol's DENSEFEED_* and CUDA_VISIBLE_DEVICES densefeed sets
  std::filesystem::path cwd;               // its run folder: shown read-only
  std::vector<std::filesystem::path> writable;  // its DENSEFEED_OUT (a build: its build folder)
  std::vector<std::filesystem::path> readable;  // shown beside the arm's own folders
  std::filesystem::path stdout_path;
  std::filesystem::path stderr_path;
  std::chrono::milliseconds timeout{static_cast<long long>(kDefaultHarnessTimeoutS * 1000)};
  CommandLimits limits;
  const std::atomic<bool>* cancel = nullptr;
  // false only when the person running densefeed said --no-sandbox.
  bool sandbox = true;
  // A harness session's request pipe and leader pid (process_runner.h
  // ProcessSpec::stdin_fd, ::leader): local launches only, never serialised.
  int stdin_fd = -1;
  std::atomic<int>* leader = nullptr;
  // The session freezer's cgroup.procs (process_freezer.h join_fd), joined
  // best effort before exec: local launches only, never serialised; -1 none.
  int freeze_join_fd = -1;
  // A trusted driver's outside-clock socket (outside_clock.h): the command
  // inherits it as descriptor 3 (bwrap passes inherited descriptors through).
  // Local launches only, never serialised: the Slurm executor runs the
  // command without it.
  int clock_fd = -1;
  // A multi-rank command (rank_group.h): one entry per rank, what rank K
  // adds to `env` (its DENSEFEED_OUT, CUDA_VISIBLE_DEVICES). Empty: one
  // process. When set, all ranks run as one command in the group's sandbox
  // (their loopback shared), each rank in a sandbox of its own inside it
  // (own PID namespace and /tmp; writable: only its own DENSEFEED_OUT and
  // the arm's compile cache), with `timeout` each and the limits scaled by
  // the rank count; their logs go to cwd/ranks/rank-K.{stdout,stderr}.log.
  std::vector<std::map<std::string, std::string>> rank_env;
};

struct UntrustedResult {
  ProcessResult process;
  // The limit it ran into, in words ("the memory limit of 512 MiB (cgroup
  // memory.limit_in_bytes)"); empty when none. A command that hit a limit is
  // red even when it exited 0.
  std::string limit;
  bool sandboxed = false;
  std::string containment;  // "bwrap, cgroup (memory, pids)", "no sandbox (--no-sandbox), rlimits": for messages
  // A multi-rank command's ranks, in rank order, as its group reported
  // them (empty for one process, or when the group left no report). When
  // the group failed and named the rank that took it down, `process` is
  // that rank's result.
  std::vector<RankOutcome> ranks;

  bool ok() const { return process.ok() && limit.empty(); }
  // process.describe(), then "; it exceeded <limit>" when it hit one.
  std::string describe() const;
};

// How the command failed as a value (failure.h): the process's failure, or
// FailureKind::limit with the limit in detail when it exited 0 over one;
// FailureKind::none when ok().
Failure failure_value(FailureWho who, const UntrustedResult& r);

// Whether untrusted commands can run now: `requested` false is off
// (--no-sandbox); otherwise sandbox_status(true), and when bwrap cannot start
// throws InfraError naming why (fail closed: exit 3 before anything runs).
SandboxStatus require_sandbox(bool requested);

// Where a multi-rank command's rank K writes its stdout and stderr:
// cwd/ranks/rank-K.stdout.log and .stderr.log.
std::filesystem::path rank_log(const std::filesystem::path& cwd, int rank, const char* stream);

// Runs one untrusted command to completion. Never throws for what the
// command does; throws InfraError when the sandbox was asked for and cannot
// start, when a path it mounts was gone once the command had failed
// (sandbox_mounted_paths: bwrap stopped before the command, or the tree it
// was shown changed under it), or when its log files cannot be made.
UntrustedResult launch_untrusted(const UntrustedCommand& command);

// The environment an untrusted command gets: `protocol` (DENSEFEED_*,
// CUDA_VISIBLE_DEVICES), the arm's env (PYTHONPATH), PATH, LANG and LC_ALL
// and CUDA_VISIBLE_DEVICES from densefeed's environment when set, HOME and
// TMPDIR = `home`, and the variables the project's sandbox.env names
// (`allow`; "NAME*" matches a prefix). Nothing else.
std::map<std::string, std::string> untrusted_environment(const std::map<std::string, std::string>& protocol,
                                                         const ArmContext* arm, const std::filesystem::path& home);

// What of a workspace a sandbox hides where a shown folder holds it (the
// project folder of a WORKTREE arm holds .densefeed/): the runs, builds,
// exports and calibrations folders, the ledger and its journal files.
std::vector<std::filesystem::path> workspace_hidden(const Workspace& workspace);

}  // namespace densefeed
