// What one stage's jobs ask a scheduler for (executor.h AllocationRequest::
// resources): CPUs, memory, GPUs and their type, a node constraint, a
// partition, a time limit, a node of its own, and how many tasks of one
// job array run at once. Declared per gate and stage, with project defaults
// (spec/resources_spec.h: gate.schema.json and project.schema.json
// `resources`); the local executor ignores all of it, the Slurm executors
// turn it into sbatch / srun options (slurm_options.h).
#pragma once

#include <optional>
#include <string>

namespace densefeed {

struct ResourceRequest {
  std::optional<int> cpus;          // --cpus-per-task (per process); unset: the scheduler's default
  std::string mem;                  // --mem: "16G", "4000M" (Slurm's units, K/M/G/T); '' unset
  std::optional<int> gpus;          // GPUs each process holds; unset: the gate's `gpus`
  std::string gpu_type;             // the gres type: --gres=gpu:TYPE:N ("h200"); '' any
  std::string constraint;           // --constraint (Slurm's feature expression, "h200&ib"); '' none
  std::string partition;            // --partition; '' the user's SBATCH_PARTITION or the cluster's default
  std::optional<long> time_min;     // --time in minutes; unset: densefeed's own (the launch's timeout plus a minute)
  std::optional<bool> exclusive;    // --exclusive; unset: on for bench and acceptance, off otherwise
  std::optional<int> array_throttle;  // --array=0-N%P: at most P tasks of one array at once; unset: no throttle

  bool operator==(const ResourceRequest&) const = default;
};

// `over` laid on `under`: each field `over` sets wins (stage over gate over
// project).
ResourceRequest overlay(const ResourceRequest& under, const ResourceRequest& over);

}  // namespace densefeed
