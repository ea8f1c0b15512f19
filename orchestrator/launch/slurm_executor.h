// The Slurm executor (executor.h): every allocation is one Slurm batch job.
//
// What a job is. One job per launch for the gate's cases (a reference and a
// candidate are separate jobs: a reference that several cases share runs once,
// and each arm is retried on its own), one job for a whole benchmark (all its
// interleaved rounds, both arms, on the GPU it holds alone), one per trace
// arm, acceptance run and build command. The job's script is
// `densefeed slurm-serve DIR` (slurm_serve.h): it runs DIR/launch-NNNN.json
// in order through launch_untrusted on the compute node (the
// sandbox, limits and environment exactly as locally), writes
// DIR/launch-NNNN.result.json, and ends when DIR/release exists and no launch
// is left, with the last launch's exit status (128 + N for signal N), so that
// Slurm's own FAILED / COMPLETED says what the command did.
//
// Submission: sbatch --parsable --job-name PREFIX+NAME --output/--error
// DIR/slurm-%j.{out,err} --chdir DIR --time M [--gres=gpu:N]; the
// partition, account and QOS come from sbatch's own SBATCH_* variables.
// Following: one squeue --states=all of this user's jobs per poll interval
// (DENSEFEED_SLURM_POLL_S, default 0.25 s) for all of this process's jobs.
//
// Final states (classify_slurm_state): a result file is the command's outcome
// (as locally); without one, TIMEOUT is the command's (timed out: red for a
// candidate, error for a reference, the job and state named); CANCELLED by
// densefeed is a cancel; every other end (CANCELLED from outside, NODE_FAIL,
// PREEMPTED, BOOT_FAIL, OUT_OF_MEMORY, DEADLINE, FAILED or COMPLETED without
// a result, a job Slurm forgot) is infrastructure: the launch is retried once
// in a new job, then LaunchResult::infrastructure.
//
// Time: a single-launch job's limit is the scheduler's (the launch's own
// timeout rounded up to whole minutes; the launch's inner timeout is moved
// past it as a backstop); a job of several launches keeps each launch's own
// timeout and gets their sum as its limit.
//
// Jobs outlive nothing: a destroyed executor scancels its jobs that still
// run, so does a densefeed ended by SIGINT/SIGTERM/SIGHUP (a termination
// hook), `densefeed cancel` (by name prefix), and a starting worker cancels
// the jobs of experiments no live process owns (cli_queue.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "executor.h"

namespace densefeed {

enum class SlurmOutcome {
  pending,         // PENDING, RUNNING, CONFIGURING, COMPLETING, SUSPENDED, REQUEUED, RESIZING, ... : not over
  finished,        // COMPLETED or FAILED: the result file says what the command did
  timeout,         // TIMEOUT: the command ran past the job's time limit
  cancelled,       // CANCELLED (by densefeed, when it asked; otherwise infrastructure)
  infrastructure,  // NODE_FAIL, PREEMPTED, BOOT_FAIL, OUT_OF_MEMORY, DEADLINE, SPECIAL_EXIT, REVOKED, ...
};

// squeue's %T (JobState) -> outcome. States Slurm may add later that end a
// job count as infrastructure; unknown states that do not end one (none
// known) would too, which retries rather than misjudges.
SlurmOutcome classify_slurm_state(std::string_view state);

// Slurm's --time in whole minutes for a limit in seconds: ceil(s / 60), at least 1.
long slurm_minutes(double seconds);

// Job names: "densefeed-" + the first 8 hex digits of sha256(the ledger's
// absolute path) + "-" (one ledger's jobs), then "e" + ID + "-" (one
// experiment's), then the allocation's name.
std::string slurm_ledger_prefix(const std::filesystem::path& ledger);
std::string slurm_experiment_prefix(const std::filesystem::path& ledger, std::int64_t id);

struct SlurmJob {
  std::string id;     // squeue %i
  std::string name;   // %j
  std::string state;  // %T
};
// This user's jobs whose names start with `prefix` that Slurm still knows
// (--states=all: also ended ones within MinJobAge). Throws InfraError when
// squeue cannot run or fails.
std::vector<SlurmJob> slurm_jobs_with_prefix(const std::string& prefix);
// scancel of those not ended yet; returns them. Throws InfraError as above.
std::vector<SlurmJob> slurm_cancel_prefix(const std::string& prefix);
// Whether squeue can be run and answers (sinfo would do as well).
bool slurm_available();

struct SlurmOptions {
  std::filesystem::path densefeed;  // the binary the job runs (the same path on the compute nodes)
  double poll_s = 0.25;             // DENSEFEED_SLURM_POLL_S
};

// Throws InfraError when sbatch or squeue is not on PATH.
std::unique_ptr<Executor> make_slurm_executor(const SlurmOptions& options);

}  // namespace densefeed
