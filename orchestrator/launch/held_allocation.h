// An executor whose every allocation is one allocation already held (a
// benchmark's Slurm job): what a stage must run while it holds a node of
// its own (the reference runs of a benchmark's input sets) runs there, one
// launch at a time, instead of asking the scheduler for another job that
// could never start beside an --exclusive one.
#pragma once

#include <memory>
#include <mutex>

#include "executor.h"

namespace densefeed {

// `held` must outlive the executor; `under` names it (Executor::name()).
// Launches from any thread run one at a time, in `held`.
std::unique_ptr<Executor> make_held_executor(Allocation& held, const Executor& under);

}  // namespace densefeed
