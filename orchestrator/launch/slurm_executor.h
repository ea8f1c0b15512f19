// The Slurm executors (executor.h): `slurm` makes every allocation a Slurm
// batch job (a gate arm's cases one job array); `slurm-steps`, inside an
// allocation (salloc, or sbatch of the worker itself), makes each an srun
// step on its nodes.
//
// What a job is. A gate's cases go through Executor::run_batch: the
// references as one job array, the candidates as another (one array per
// group of launches alike in stage, GPUs, time and resources; `sbatch
// --array=0-N[%P]`, P the resources' array_throttle), each task running its
// case (slurm-serve --array reads launch-{SLURM_ARRAY_TASK_ID}.json); a
// task's failure is that case's. One job holds a whole benchmark (all its
// interleaved rounds, both arms, on a node of its own), one each trace arm,
// acceptance run and build command. The job's script is `densefeed
// slurm-serve DIR` (slurm_serve.h): it runs DIR/launch-NNNN.json through
// launch_untrusted on the compute node (the sandbox, limits and environment
// exactly as locally), writes DIR/launch-NNNN.result.json, and exits with
// the last launch's status, so that Slurm's COMPLETED / FAILED says what the
// command did.
//
// Submission: sbatch --parsable --job-name PREFIX+NAME --output/--error
// DIR/slurm-%j (arrays %A_%a) --chdir DIR --export=ALL and the options of
// slurm_options.h (CPUs, memory, GPUs and their type merged with
// SBATCH_GRES, constraint, partition, --exclusive for bench and acceptance,
// --time, and for a benchmark or acceptance run --signal=B:USR1@S
// --requeue). Following: squeue -h -r --states=all of this user's jobs, at
// an interval that starts at DENSEFEED_SLURM_POLL_S (default 1 s) after any
// submission and grows x1.5 to DENSEFEED_SLURM_POLL_MAX_S (default 30 s);
// result files are looked for every 0.2 s (no squeue for that).
//
// Accounting (scheduler_accounting.h): once per job or array, when it has
// ended, sacct -j (its numeric ids) -o JobIDRaw,State,ExitCode,Elapsed,
// MaxRSS,NodeList, from accounting storage (AccountingStorageType not none)
// or job completion records (JobCompType=jobcomp/filetxt: sacct
// --completion, no MaxRSS); read from `scontrol show config` once;
// DENSEFEED_SLURM_ACCOUNTING=off turns it off. Its state is the launch's
// scheduler_state; the record goes with the case.
//
// Final states (classify_slurm_state): a result file is the command's
// outcome (as locally); without one, TIMEOUT is the command's (timed out:
// red for a candidate, error for a reference, the job and state named);
// CANCELLED by densefeed is a cancel; a job Slurm forgot (purged past
// MinJobAge) is asked of accounting, and with no record there is
// infrastructure "unknown", not retried; a job that got SIGUSR1 (its limit
// or a preemption near) stopped after its finished launches; every other
// end (CANCELLED from outside, NODE_FAIL, PREEMPTED, BOOT_FAIL,
// OUT_OF_MEMORY, DEADLINE, FAILED or COMPLETED without a result) is
// infrastructure: the launch is retried once in a new job (a batch's
// failed tasks as one more array), then LaunchResult::infrastructure. A job
// Slurm requeues (preemption, scontrol requeue) keeps its folder: it
// resumes after the launches whose results are in.
//
// Time: a single-launch job's limit is the scheduler's (the launch's own
// timeout plus a minute, in whole minutes; `resources.time` overrides); a
// job of several launches keeps each launch's own timeout and gets their
// sum as its limit.
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
  double poll_s = 1;                // DENSEFEED_SLURM_POLL_S: squeue's first interval after a submission, seconds
  double poll_max_s = 30;           // DENSEFEED_SLURM_POLL_MAX_S: the longest it grows to, seconds
  bool steps = false;               // slurm-steps: srun steps inside the allocation this process runs in
};

// Throws InfraError when sbatch, squeue or scancel (steps: srun, and
// SLURM_JOB_ID) is missing.
std::unique_ptr<Executor> make_slurm_executor(const SlurmOptions& options);

}  // namespace densefeed
