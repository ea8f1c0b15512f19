// The executor a run is given, by the name the CLI's --executor takes
// (executor.h): made once per run and passed down (RunOptions::executor),
// never put in force for the whole process.
#pragma once

#include <memory>
#include <string>

#include "executor.h"

namespace densefeed {

// "local": this machine (local_executor.cpp). "slurm": every allocation an
// sbatch job running `densefeed slurm-serve` from the binary beside this one
// (slurm_executor.h; DENSEFEED_SLURM_POLL_S, at least 0.02, sets its poll
// interval in seconds). Throws InfraError when sbatch, squeue or scancel
// are missing; any other name is local (the CLI checks the name).
std::shared_ptr<Executor> make_executor(const std::string& name);

}  // namespace densefeed
