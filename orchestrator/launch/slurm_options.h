// The scheduler options of one Slurm job or job step (slurm_executor.h,
// slurm_steps_executor.h) from what its allocation asks (executor.h
// AllocationRequest: gpus, time limit, stage, resources), merged with the
// user's own SBATCH_* settings rather than overriding them:
//   - --cpus-per-task, --mem, --constraint, --partition: only where the
//     gate or project sets them (otherwise SBATCH_CPUS_PER_TASK,
//     SBATCH_MEM_PER_NODE, SBATCH_CONSTRAINT, SBATCH_PARTITION or the
//     cluster's defaults apply, as for any sbatch);
//   - --gres=gpu[:TYPE]:N when the stage holds GPUs: TYPE from `gpu_type`,
//     else from SBATCH_GRES's own gpu entry; SBATCH_GRES's other entries
//     ("nvme:1") are kept, since an explicit --gres replaces the variable;
//   - --exclusive for bench and acceptance unless `exclusive: false`, and
//     for any stage with `exclusive: true` (SBATCH_EXCLUSIVE also applies);
//   - --time: `time` (minutes) or the allocation's own limit, in whole
//     minutes;
//   - --signal=B:USR1@S and --requeue for a resumable allocation (S =
//     DENSEFEED_SLURM_SIGNAL_S, default 120 s before the limit).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "executor.h"

namespace densefeed {

// Whether `request`'s stage gets --exclusive: resources.exclusive if set,
// else true for "bench" and "acceptance".
bool wants_exclusive(const AllocationRequest& request);

// The options above for `request` with `minutes` as its computed limit, for
// sbatch (`for_srun` false) or an srun step inside an allocation (true: no
// --partition/--signal/--requeue/--time past the allocation's, --exclusive
// as srun's step form). `env` is the submitting process's environment
// (SBATCH_GRES is read from it).
std::vector<std::string> slurm_resource_options(const AllocationRequest& request, long minutes,
                                                const std::map<std::string, std::string>& env, bool for_srun = false);

// The GPU gres for `gpus` of `type` merged with the user's SBATCH_GRES
// ("gpu:a100:2,nvme:1"): "gpu:h200:1,nvme:1". Empty when gpus is 0.
std::string merged_gres(int gpus, const std::string& type, const std::string& sbatch_gres);

// This process's SBATCH_* variables.
std::map<std::string, std::string> sbatch_environment();

}  // namespace densefeed
