// Where the stages' commands run (DESIGN.md, orchestration): the one seam
// between the stages (gate, bench, trace, acceptance, revision builds) and
// the machines. A stage describes each command as a Launch (a command for
// untrusted_launch.h: the reference's as well as the candidate's) and
// hands it to the executor it was given (RunOptions::executor, passed down
// to each stage's options) in an Allocation (what the command holds
// while it runs: GPUs, a time limit). Two executors:
//   - local (local_executor.cpp): today's behaviour. run() is
//     launch_untrusted on this machine; the stages' threads and GPU slots
//     (CUDA_VISIBLE_DEVICES per slot) stay the stages' own.
//   - slurm (slurm_executor.h): each allocation is one Slurm batch job that
//     runs `densefeed slurm-serve DIR` on a compute node, which runs the
//     launches handed to it through files in DIR with the same
//     launch_untrusted (the same sandbox, limits and
//     environment as locally) and writes their results next to them. The
//     scheduler assigns GPUs (--gres). Nothing on the compute side writes SQL:
//     the ledger stays with the collecting process.
// Whatever the executor, an untrusted command starts only through
// launch_untrusted (tests/orchestrator/untrusted_launch_test.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "placement.h"
#include "resource_request.h"
#include "scheduler_accounting.h"
#include "process_runner.h"
#include "untrusted_launch.h"

namespace densefeed {

// One command for an executor.
struct Launch {
  // The command (untrusted.arm must outlive the call): a candidate's, or the
  // gate's reference, which is trusted code but runs sandboxed all the same.
  UntrustedCommand untrusted;
};

// How a launch ended and where it ran.
struct LaunchResult {
  // The command's own outcome (for a trusted launch only .process is set).
  // When the scheduler ended it at its time limit, process.timed_out is set
  // and process.ended_by names the job and state (the verdict's reason says it).
  UntrustedResult result;
  std::string gpu;        // CUDA_VISIBLE_DEVICES it ran with ('' = none set)
  Placement placement;    // where it ran (placement.h): recorded with the case
  // The scheduler's final state of the job that ran it ("COMPLETED",
  // "FAILED", "TIMEOUT"; '' locally, or when the job had not ended within
  // a few seconds of its result).
  std::string scheduler_state;
  // Seconds from submission to the job's start (a Slurm job's wait in the
  // queue); 0 locally.
  double queue_s = 0;
  // When the job started running, seconds since the epoch (its node's clock; 0 locally).
  double started_at = 0;
  // Non-empty when the executor's machinery failed it, not the command: a
  // Slurm job CANCELLED from outside, NODE_FAIL, PREEMPTED, BOOT_FAIL,
  // OUT_OF_MEMORY, DEADLINE, or a job whose result never came back, each
  // after its one retry ("slurm job 41 ended NODE_FAIL; its retry, job 42,
  // ended CANCELLED"). Such a launch's case is error (FailureKind::
  // infrastructure), never red or green.
  std::string infrastructure;
  // What the scheduler's accounting (sacct) recorded of the job that ran it:
  // elapsed time, MaxRSS, exit code, node (scheduler_accounting.h); unset
  // locally or where the cluster keeps no accounting.
  std::optional<SchedulerAccounting> accounting;

  bool ok() const { return infrastructure.empty() && result.ok(); }
};

// What an allocation holds while its launches run.
struct AllocationRequest {
  std::string name;                // what it runs, for the job name: "gate-candidate-003", "bench-00"
  int gpus = 0;                    // GPUs it holds alone (the gate's `gpus`): Slurm --gres=gpu:N; 0: none asked
  std::chrono::seconds time_limit{600};  // the whole allocation's: Slurm --time, rounded up to whole minutes
  // How many launches it runs when that is known: 1 (run_launch) lets the
  // scheduler's limit be the launch's own (slurm_executor.h); 0: unknown.
  int launches = 0;
  const std::atomic<bool>* cancel = nullptr;  // densefeed cancel / a stopping worker: the job is scancelled
  // The stage the allocation serves ("gate", "bench", "trace", "acceptance",
  // "build"): its resources' defaults depend on it (bench and acceptance
  // ask for a node of their own: resource_request.h).
  std::string stage = "gate";
  // What the stage's jobs ask the scheduler for beyond `gpus` and
  // `time_limit` (the gate's and project's `resources`, merged:
  // spec/resources_spec.h). The local executor ignores it.
  ResourceRequest resources;
  // A long allocation (a benchmark, an acceptance run) that a scheduler may
  // preempt or end at its limit: under Slurm it asks --signal=B:USR1@N and
  // --requeue, and a requeued job resumes after the launches it finished.
  bool resumable = false;
};

// One launch of a batch (Executor::run_batch) and the allocation it runs in.
struct BatchLaunch {
  Launch launch;
  AllocationRequest request;  // request.launches is 1: one launch each
};

// Runs launches one after another on what it holds (a Slurm job keeps its
// node and GPUs between them). Released when destroyed.
class Allocation {
 public:
  virtual ~Allocation() = default;
  // Runs one launch to completion. Throws InfraError for densefeed's own
  // failures (files it cannot write, a scheduler it cannot reach); never for
  // what the command does.
  virtual LaunchResult run(const Launch& launch) = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::unique_ptr<Allocation> allocate(const AllocationRequest& request) = 0;
  // Runs independent launches (one stage's arm: a gate's references or its
  // candidates), each alone in an allocation, and returns their results in
  // order. `ended(i)` is called (from any thread) as launch i's result is in,
  // before the batch returns: progress. By default `concurrency(requested,
  // n)` threads each run_launch one at a time; the Slurm executor submits
  // one job array per group of launches alike in resources
  // (slurm_executor.h). Throws InfraError as Allocation::run does.
  virtual std::vector<LaunchResult> run_batch(const std::vector<BatchLaunch>& batch, int requested,
                                              const std::function<void(std::size_t)>& ended);
  // Whether densefeed assigns CUDA_VISIBLE_DEVICES itself (local GPU slots);
  // false: the scheduler does, per allocation.
  virtual bool assigns_gpus() const = 0;
  // Threads a stage uses for `jobs` independent launches when it was asked
  // for `requested` at once: locally `requested`; under Slurm all of them
  // (the scheduler queues what does not fit).
  virtual int concurrency(int requested, std::size_t jobs) const = 0;
  // "local" | "slurm": recorded with the run.
  virtual std::string name() const = 0;
  // Set once the experiment's id is known: the prefix of this process's job
  // names ("densefeed-1a2b3c4d-e12-": densefeed cancel and a starting worker
  // find an experiment's jobs by it) and the folder its job files go in
  // (the experiment's run folder's slurm-jobs/: hidden from every sandbox
  // and writable by no launch, so nothing a launch runs can plant a job
  // file). The local executor ignores both.
  virtual void set_job_context(const std::string& prefix, const std::filesystem::path& root) {
    (void)prefix;
    (void)root;
  }
};

// densefeed cancel of this process's experiment, or a stopping worker: from
// then on every launch of this process ends as cancelled (its cancel flag,
// where the stage gave none, is this one), the Slurm executor scancels its
// jobs, and nothing is retried.
void request_cancel();
const std::atomic<bool>& cancel_requested();
// A signal (SIGTERM, SIGINT) told this process to stop: as request_cancel,
// and interrupt_signal() says which. Async-signal-safe (lock-free atomic
// stores only): a signal handler calls it.
void request_interrupt(int signal_number);
// The signal request_interrupt was given; 0: none.
int interrupt_signal();

// One launch in an allocation of its own on `executor` (a gate case, a
// trace, an acceptance run, a build command). request.launches is set to 1.
LaunchResult run_launch(Executor& executor, const Launch& launch, AllocationRequest request);

// The local executor (local_executor.cpp).
std::unique_ptr<Executor> make_local_executor();

// The executor a stage was given, or, when it was given none (nullptr),
// this machine's: promote's acceptance, calibration and `gate verify`'s
// trusted build run locally, as they always did. Stateless: nothing sets it.
Executor& given_or_local(Executor* given);

}  // namespace densefeed
