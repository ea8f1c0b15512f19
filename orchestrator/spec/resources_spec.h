// `resources:` of a gate file (gate.schema.json) and of densefeed.yaml
// (project.schema.json): what each stage's scheduler jobs ask for
// (launch/resource_request.h), read after the schema has checked types and
// ranges:
//
//   resources:
//     cpus: 4              # --cpus-per-task, >= 1
//     mem: 16G             # --mem, Slurm's units (K, M, G, T; none: MiB)
//     gpus: 1              # GPUs per process (default: the gate's gpus)
//     gpu_type: h200       # --gres=gpu:h200:N
//     constraint: "ib&h200"
//     partition: gpu
//     time: 30             # --time, minutes
//     exclusive: true      # --exclusive (default: bench and acceptance only)
//     array_throttle: 8    # --array=0-N%8
//     bench: {exclusive: false, time: 120}   # per stage: gate, bench, trace, acceptance, build
//
// A stage's request is, field by field, the last of: the project's
// top-level fields, the project's stage entry, the gate's top-level
// fields, the gate's stage entry (for_stage).
#pragma once

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "resource_request.h"

namespace densefeed {

struct StageResources {
  ResourceRequest all;                            // the top-level fields
  std::map<std::string, ResourceRequest> stages;  // "gate", "bench", "trace", "acceptance", "build"
  std::shared_ptr<const StageResources> under;    // the project's, below these (layered)

  // The request of `stage` (one of the five names), layered as above.
  ResourceRequest for_stage(const std::string& stage) const;
};

// Reads a schema-valid `resources` object (an absent one: null, nothing set).
StageResources read_resources(const nlohmann::ordered_json& v);

// `over` (a gate's) with `under` (the project's) beneath it.
StageResources layered(const StageResources& under, StageResources over);

}  // namespace densefeed
