// What a person needs to run one arm's commands by hand, as densefeed ran
// them (issue 27: the rerun commands of the `next` list come from the
// record, so `run` and every reader of the record print the same): the arm's
// {project} and {gate_dir}, where a bare argv[0] is looked up, what python3
// became, and the variables added to every command (PYTHONPATH). Recorded in
// the gate run's provenance as `candidate_arm`; read back for the next
// steps' rerun commands. Sandbox folders, hidden paths and caches are not
// part of it: a command run by hand runs outside the sandbox.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "arm_context.h"

namespace densefeed {

// {label, project, gate_dir, exe_dirs[], python, env{}}: strings, paths
// absolute as the arm had them. Never throws.
nlohmann::ordered_json arm_replay_json(const ArmContext& arm);

// The ArmContext those fields describe (every other field empty); nullopt
// when `j` is not an object with a string `project` (a record written before
// the field existed, or one whose field was damaged). Never throws.
std::optional<ArmContext> arm_from_replay_json(const nlohmann::ordered_json& j);

}  // namespace densefeed
