// The trace stage (green gate only): runs the manifest's trace command
// (DENSEFEED_MODE=trace) for each arm it names, reads the trace.json /
// trace.json.gz / trace.sqlite it wrote, and answers the manifest's checks
// (trace_checks.h) with the intervals involved. Only the candidate's checks
// decide the stage; the base's are recorded beside them for comparison.
#pragma once

#include "failure.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arm_context.h"
#include "process_limits.h"
#include "resource_request.h"
#include "sandbox.h"

#include "trace_checks.h"
#include "verdict.h"

namespace densefeed {

class Executor;

struct TraceArmResult {
  std::string arm;                   // candidate | base
  bool ran = false;                  // the command exited 0 and left a readable trace
  std::string failure;               // why not (crash, timeout, no trace, unreadable trace)
  std::filesystem::path trace_file;
  TraceCheckReport report;           // when ran
};

struct TraceStageResult {
  Verdict verdict = Verdict::green;  // red: the candidate's trace failed or a check failed
  std::string reason;
  Failure failure;  // the same as a value: the command's failure, a missing or unreadable trace, or tolerance (metric: the check's kind)
  std::vector<TraceArmResult> arms;
  double wall_s = 0;
  SandboxStatus sandbox;  // whether its commands ran sandboxed (untrusted_launch.h)
};

struct TraceStageOptions {
  std::filesystem::path work_dir;            // one folder per arm is made under it
  std::uint64_t seed = 0;
  ArmContext candidate;   // where each arm runs from (arm_context.h)
  ArmContext base;
  bool sandbox = true;    // false: --no-sandbox
  CommandLimits limits;   // the gate's (process_limits.h)
  int gpus = 0;           // the gate's: GPUs each trace command holds (executor.h)
  ResourceRequest resources;  // the gate's and project's for the trace stage (resources_spec.h)
  std::vector<std::filesystem::path> readable;  // revision folders the arms run from
  Executor* executor = nullptr;  // what runs each arm's trace command (executor.h); nullptr: this machine
};

// `trace` is the manifest's section ({command, timeout_s (default 600 s),
// arms (default both), checks}); `checks` the parsed checks. Never throws for
// what a harness does; throws InfraError when a run folder cannot be made.
TraceStageResult run_trace_stage(const nlohmann::ordered_json& trace, const std::vector<TraceCheck>& checks,
                                 const nlohmann::ordered_json& candidate_params, const nlohmann::ordered_json& base_params,
                                 const TraceStageOptions& options);

}  // namespace densefeed
