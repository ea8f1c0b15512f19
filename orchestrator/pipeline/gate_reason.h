// Why a gate is not green, in one line people read in `run`, `ledger list`
// and `status`: the failing cases counted by what happened to them, so that a
// harness that never ran (an import error, a file missing from the
// candidate's tree) does not read like a tolerance failure.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "arm_context.h"
#include "gate_result.h"

namespace densefeed {

// "" when every case is green; else "K of N case(s) not green: A over
// tolerance, B where the candidate's process failed (error: <the first such case's
// reason>), C timed out, D with missing or malformed output, E where the
// reference or densefeed failed", listing only the non-zero counts.
std::string gate_reason(const std::vector<CaseResult>& cases);

// The files the candidate's command names (tokens of `command` that are a
// relative path, or {project}/PATH) that exist in the reference's tree (the
// trusted ref) but not in the candidate's: the candidate revision predates
// them, e.g. a branch made before a harness was added. Relative to the tree.
std::vector<std::string> files_only_on_trusted_ref(const std::vector<std::string>& command, const ArmContext& candidate,
                                                   const ArmContext& reference);

}  // namespace densefeed
