// Where an executor ran a launch (executor.h LaunchResult::placement): this
// machine, or a scheduler's job and the node it ran on. Decided by the
// executor that ran it (local_executor.cpp, slurm_executor.cpp on the
// collecting side, slurm_serve.cpp on the node) and carried as a value to
// the case it ran (gate_result.h CaseResult); the printers that show it in
// words ("slurm job 42 on node1") all use to_string, and those that count
// nodes read .node, never the words.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace densefeed {

struct Placement {
  std::string executor;  // Executor::name() of what ran it: "local", "slurm"; '' when nothing ran
  std::string job;       // the scheduler's job id ('' locally; "?" when the node was not told its job)
  std::string node;      // the node it ran on ('' locally, or when the scheduler did not say)

  bool operator==(const Placement&) const = default;
};

// This machine's: {"local", "", ""}.
Placement local_placement();

// Whether it ran somewhere other than this machine (a scheduler's job).
bool ran_elsewhere(const Placement& p);

// The placement in words, as run's report, its JSON (candidate_placement)
// and the ledger's output capture have always shown it: "" (nothing ran),
// "local", "slurm job 42", "slurm job 42 on node1".
std::string to_string(const Placement& p);

// {"executor", "job", "node"}: how a placement crosses from a Slurm job's
// slurm-serve to the collecting process (launch_json.h). placement_from_json
// throws nlohmann::json::exception for a field missing or not a string.
nlohmann::json placement_to_json(const Placement& p);
Placement placement_from_json(const nlohmann::json& j);

}  // namespace densefeed
