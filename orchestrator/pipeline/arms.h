// The arms' contexts (arm_context.h) built from the project and the gate
// store: the reference's from the trusted tree, a WORKTREE arm's from the
// project folder, a revision's from its clean export and build.
#pragma once

#include <filesystem>
#include <vector>

#include "arm_context.h"
#include "gate_store.h"
#include "project.h"

namespace densefeed {

struct RevisionBuild;

// The reference's (and a bench driver's) context: {project} is the gate
// store's tree. Bare names are looked up in `trusted_bin` (the trusted ref's
// build of its harnesses, '' when it has none), then in the project's
// harness_path under the store's tree; never under the project folder
// (trusted_paths.h), unless the store is the worktree (--trust-worktree).
// `python` and `python_path` are trusted_python's and trusted_python_path's
// (or, for a reference that runs no Python, whatever the run resolved).
ArmContext reference_context(const Project& project, const GateStore& store, const std::filesystem::path& python,
                             const std::vector<std::filesystem::path>& python_path,
                             const std::filesystem::path& trusted_bin = {});
// A WORKTREE arm: the project folder as it is.
ArmContext worktree_context(const Project& project, const GateStore& store, const std::filesystem::path& python);
// An arm at a revision: its clean export (build.src) and, when it was built,
// its build's bin folder first; never the worktree's harnesses.
ArmContext revision_context(const Project& project, const GateStore& store, const RevisionBuild& build,
                            const std::filesystem::path& python);

}  // namespace densefeed
