// The executor a run is given, by the name the CLI's --executor takes
// (executor.h): made once per run and passed down (RunOptions::executor),
// never put in force for the whole process.
#pragma once

#include <memory>
#include <string>

#include "executor.h"

namespace densefeed {

// "local": this machine (local_executor.cpp). "slurm": every allocation an
// sbatch job (a gate arm's cases one job array) running `densefeed
// slurm-serve` from the binary beside this one (slurm_executor.h;
// DENSEFEED_SLURM_POLL_S, at least 0.02, default 1, and
// DENSEFEED_SLURM_POLL_MAX_S, default 30, bound its squeue interval in
// seconds). "slurm-steps": inside a Slurm allocation (SLURM_JOB_ID set),
// every allocation an srun step on its nodes. Throws InfraError when
// Slurm's commands are missing (or, for slurm-steps, outside an
// allocation); any other name is local (the CLI checks the name).
std::shared_ptr<Executor> make_executor(const std::string& name);

// Whether `name` is one of the Slurm executors ("slurm", "slurm-steps").
bool is_slurm_executor(const std::string& name);

}  // namespace densefeed
