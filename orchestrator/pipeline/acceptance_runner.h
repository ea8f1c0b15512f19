// The acceptance stage: after `densefeed promote`, runs the manifest's
// pre-registered end-to-end command (DENSEFEED_MODE=acceptance) and checks
// its metrics.json against the pre-registered criteria (acceptance.h).
#pragma once

#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "arm_context.h"
#include "process_limits.h"
#include "resource_request.h"
#include "ledger.h"

namespace densefeed {

class Executor;

struct AcceptanceOptions {
  std::filesystem::path work_dir;  // emptied; the command runs in work_dir with its outputs in work_dir/out
  ArmContext candidate;             // where the candidate runs from (arm_context.h)
  std::uint64_t seed = 0;
  bool sandbox = true;    // false: --no-sandbox (promote never passes it: acceptance always runs sandboxed)
  CommandLimits limits;   // the gate's (process_limits.h)
  int gpus = 0;           // the gate's: GPUs the acceptance command holds (executor.h)
  ResourceRequest resources;  // the gate's and project's for the acceptance stage (resources_spec.h)
  Executor* executor = nullptr;  // what runs the command (executor.h); nullptr: this machine
};

// `acceptance` is the manifest's section as recorded ({command, statistic,
// timeout_s (default 600 s), criteria[]}); `params` the candidate's
// parameters. Verdict pass when every criterion holds; fail when one does
// not, or the command crashed, timed out, exited non-zero or wrote no valid
// metrics.json ({NAME: number | [numbers]}), with the reason. Throws
// InfraError only when the run folder cannot be made.
AcceptanceRecord run_acceptance(const nlohmann::ordered_json& acceptance, const nlohmann::ordered_json& params,
                                const AcceptanceOptions& options);

}  // namespace densefeed
