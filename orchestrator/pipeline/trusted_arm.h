// The arm that trusted commands run from: the gate's reference and its
// bench driver, from the trusted ref only (trusted_paths.h says where that
// is). Its interpreter and import path are the trusted ref's
// configuration's, resolved in its export; a compiled reference or driver is
// found in the export's harness_path or, where the gate (or the project)
// says how to build, in the trusted ref's own build of its export, made in
// the sandbox like any revision's and cached with them (revision_build.h).
// The worktree's build of them is never run as trusted code.
#pragma once

#include <filesystem>
#include <string>

#include "arm_context.h"
#include "gate_spec.h"
#include "gate_store.h"
#include "project.h"
#include "workspace.h"

namespace densefeed {

class Executor;

// The reference's context before any build: trusted_python and
// trusted_python_path when a trusted command runs Python (`python`, the
// run's interpreter, otherwise), and, when no trusted build is needed, every
// trusted program checked. Throws InputError (densefeed.yaml's field, or the
// gate file's reference.command / bench.driver.command) when any of them
// would come from the project folder: bad input, before anything is recorded.
ArmContext trusted_arm(const GateSpec& gate, const Project& project, const GateStore& store, const std::filesystem::path& python);

// Whether the gate's trusted programs are found only once the trusted ref is
// built: a bare name that the export's harness_path does not hold, and a
// gate or project `build` with commands. Never with --trust-worktree.
bool needs_trusted_build(const GateSpec& gate, const Project& project, const GateStore& store);

// When needs_trusted_build: builds the trusted ref's commit (build_revision,
// sandboxed when `sandbox`), points `arm` at its bin folder and checks every
// trusted program there. Returns '' when done (or nothing was needed; *built
// says which), else what failed, in words (the build's failure, or a program
// it did not build): the caller records the gate as error, no case run.
// The build runs on `executor` (executor.h; nullptr: this machine).
std::string build_trusted_arm(ArmContext& arm, const GateSpec& gate, const Project& project, const GateStore& store,
                              const Workspace& workspace, bool sandbox, bool* built = nullptr,
                              std::vector<TamperEvent>* tampered = nullptr, Executor* executor = nullptr);

}  // namespace densefeed
