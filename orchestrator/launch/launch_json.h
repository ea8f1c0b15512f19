// A Launch and its LaunchResult as JSON (executor.h): what the Slurm
// executor writes into a job's folder for `densefeed slurm-serve` on the
// compute node (DIR/launch-NNNN.json) and what that writes back
// (DIR/launch-NNNN.result.json). Every field of ProcessSpec, UntrustedCommand
// (its ArmContext by value), CommandLimits and ProcessResult that crosses a
// machine; the in-process ones (cancel, join_fds, launcher) do not: the
// serving side makes its own. Paths are absolute and must mean the same on
// both sides (a shared filesystem).
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "executor.h"
#include "process_json.h"

namespace densefeed {

nlohmann::json launch_to_json(const Launch& launch);

// A decoded launch owns the ArmContext its untrusted command points at.
struct DecodedLaunch {
  Launch launch;
  ArmContext arm;
  DecodedLaunch() = default;
  DecodedLaunch(const DecodedLaunch&) = delete;
  DecodedLaunch& operator=(const DecodedLaunch&) = delete;
};
// Throws nlohmann::json::exception when a field is missing or of the wrong type.
std::unique_ptr<DecodedLaunch> launch_from_json(const nlohmann::json& j);

nlohmann::json launch_result_to_json(const LaunchResult& r);
LaunchResult launch_result_from_json(const nlohmann::json& j);

}  // namespace densefeed
