// Builds an experiment arm at a git revision: a clean export of the project
// at that commit, the gate's build commands (or, when the gate has none, the
// project's; with neither, the export is the build), and a folder of harness
// binaries. Builds are cached per (commit, project folder, build commands),
// and sealed (build_seal.h): a cached build is reused only while its files
// are what its build left.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "gate_spec.h"
#include "project.h"
#include "sandbox.h"
#include "tamper_event.h"
#include "workspace.h"

namespace densefeed {

class Executor;

struct RevisionBuild {
  bool ok = false;
  std::string sha;
  std::filesystem::path src;    // the exported tree
  std::filesystem::path build;  // its build folder
  std::filesystem::path bin;    // where its built harnesses are ("" when nothing was built)
  bool cached = false;          // built by an earlier run
  std::string failure;          // what failed: the step, its exit, the log tail
  double wall_s = 0;
  // Whether its build commands ran sandboxed (write access to this build's
  // folder only, no network), and if not why; "off: cached" when nothing ran.
  SandboxStatus sandbox;
  // A cached build found altered (its seal did not match) and rebuilt: the
  // caller that holds the ledger records it (Ledger::record_tamper).
  std::vector<TamperEvent> tampered;
};

// Exports `sha` of the project into workspace.builds()/<sha>-<hash of the
// folder and build spec>/src and runs the build commands there (logs beside
// them), under the sandbox when `sandbox` and bwrap can start: a revision's
// build scripts are its code as much as its harnesses. The finished build is
// sealed with the key of workspace.ledger; a cached one is reused only when
// its seal verifies, else it is rebuilt and `tampered` says what differed
// (without a key to seal with, nothing is reused). Never throws for a
// failing build (ok = false, failure says which command and why); throws
// InfraError if densefeed cannot create its folders or write the seal.
// Its commands run on `executor` (executor.h; nullptr: this machine).
RevisionBuild build_revision(const GateSpec& gate, const Project& project, const std::string& sha, const Workspace& workspace,
                             bool sandbox = true, Executor* executor = nullptr);

}  // namespace densefeed
