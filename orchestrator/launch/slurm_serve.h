// `densefeed slurm-serve DIR [--array]`: what a Slurm job or job step that
// densefeed's Slurm executors submitted runs (slurm_executor.h).
//
// Without --array (a job of one or several launches: a benchmark's rounds,
// a trace arm, one gate process): runs DIR/launch-NNNN.json in order from the
// first that has no DIR/launch-NNNN.result.json yet (a job Slurm requeued
// after a preemption or `scontrol requeue` resumes after the launches it
// finished: their results are kept), each through launch_untrusted as
// locally, writes its result, and returns when DIR/release exists and no
// launch is left (or after `idle_s` without a launch), with the last
// launch's exit status (128 + N for signal N). SIGUSR1 (sbatch
// --signal=B:USR1@N: the job's time limit or a preemption is near) lets the
// launch under way finish, then writes DIR/interrupted (how many launches
// were done) and returns 0: the collector moves what is left to a new job.
//
// With --array (one task of a job array): runs only
// DIR/launch-{SLURM_ARRAY_TASK_ID:04}.json, unless its result exists.
//
// Each launch must carry DIR/launch-NNNN.json.hmac, HMAC-SHA256 under
// DENSEFEED_SLURM_KEY (the submitting densefeed's, in the job's environment
// and removed before any launch starts); any other file is refused
// (InfraError). The result's placement is {"slurm", SLURM_JOB_ID (with
// ".STEP" inside a step), this host}.
#pragma once

#include <filesystem>

namespace densefeed {

int slurm_serve(const std::filesystem::path& dir, bool array = false, double idle_s = 600);

}  // namespace densefeed
