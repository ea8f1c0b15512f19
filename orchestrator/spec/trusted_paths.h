// Where a trusted command (the gate's reference, its bench driver) may take
// its program, its interpreter and its import path from (DESIGN.md,
// boundaries of trust; issue 25): the trusted ref's export, the trusted
// ref's own build of it, densefeed's own data, or a place outside the
// project folder. Never the project folder itself (the worktree the agent
// writes, its git-ignored files, a .venv or build/ in it), so that no file
// the agent plants there is found, imported or run as trusted code.
// With --trust-worktree a person trusts the folder as it is, and none of
// this applies (the store's root is the project folder).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "gate_store.h"
#include "project.h"

namespace densefeed {

struct TrustedGround {
  std::filesystem::path project;  // the project folder: refused, but for `allowed`
  // Inside the project folder nonetheless trusted: the store's export, the
  // trusted ref's build folder, densefeed's own data (a build-tree densefeed
  // run in its own repository).
  std::vector<std::filesystem::path> allowed;
  bool worktree = false;  // --trust-worktree: everything is allowed

  // Whether `p` may be taken by a trusted command: false when p, or the
  // place a link in it leads to, lies in the project folder outside
  // `allowed`. Relative paths are taken against the current folder.
  bool admits(const std::filesystem::path& p) const;
};

// The trusted ground of a run whose gate store is `store` (its export is
// allowed) and whose trusted ref's build, when there is one, is `build_dir`.
TrustedGround trusted_ground(const Project& project, const GateStore& store, const std::filesystem::path& build_dir = {});

// The interpreter python3/python becomes in trusted commands: python.interpreter
// of the trusted ref's densefeed.yaml (`project`) resolved inside the store's
// export when relative (a committed wrapper), else as given or through PATH;
// unconfigured, harness_python's choice. Throws InputError naming
// densefeed.yaml, line and field /python/interpreter when it resolves into
// the project folder outside the export (a .venv/bin/python there is the
// agent's: name an absolute interpreter outside the project, or commit it),
// when it is not found, or when it cannot import numpy.
std::filesystem::path trusted_python(const Project& project, const GateStore& store);

// python.path of the trusted ref's densefeed.yaml, each entry inside the
// store's export (absolute paths, in order). Throws InputError naming
// densefeed.yaml, line and field /python/path/N when an entry is not a
// folder of the trusted ref's tree (git-ignored or uncommitted in the
// worktree: trusted commands never import from there).
std::vector<std::filesystem::path> trusted_python_path(const Project& project, const GateStore& store);

// Checks that the program a trusted command runs lies on trusted ground:
// argv[0] resolved through `exe_dirs`, then PATH. `what` names the command
// for the message ("the gate's reference command"), `gate_file` and `field`
// where it is declared. Throws InputError (gate file, field) when it is not
// found, or is found only in the project folder outside `ground` (the
// worktree's build of it: say to build it from the trusted ref, with the
// gate's or the project's `build`, or to commit it on the harness_path).
// Returns the resolved program.
std::filesystem::path require_trusted_program(const std::vector<std::string>& argv,
                                              const std::vector<std::filesystem::path>& exe_dirs, const TrustedGround& ground,
                                              const std::string& what, const std::filesystem::path& gate_file,
                                              const std::string& field);

// PATH without the entries that do not lie on `ground` (a trusted command's
// own children look programs up there too).
std::string trusted_search_path(const std::string& path, const TrustedGround& ground);

}  // namespace densefeed
