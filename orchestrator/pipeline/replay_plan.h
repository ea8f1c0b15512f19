// What a replay of a recorded experiment runs (run --failing-of ID and each
// step of densefeed narrow, issue 30): its manifest, its red cases, its
// seed and profile, and the link to it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "experiment_outcome.h"
#include "experiment_record.h"

namespace densefeed {

// The manifest to replay `e` with: `manifest` when given (it must name e's
// gate and candidate revision, else InputError naming the manifest), else
// the one `e` recorded when that file (relative paths against the project
// folder) still has the recorded sha256. Throws InputError (file: the
// ledger, field "experiment ID") when it is gone or changed.
std::string replay_manifest(const ExperimentRecord& e, const RunOptions& options, const std::string& manifest);

// Sets `options` to replay `e`: its red and error cases unless
// options.cases names others, its seed unless `seed_given`, its profile
// unless `profile_given`, parent_id = e's id, step "replay" (or "replay
// with {params}" when options.candidate_param_overrides sets any). Throws
// InputError when `e` has no gate run or no case that is not green.
void plan_replay(const ExperimentRecord& e, const std::filesystem::path& ledger, RunOptions& options, bool seed_given, bool profile_given);

}  // namespace densefeed
