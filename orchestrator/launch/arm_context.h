// Where one arm's commands run from (DESIGN.md, harness protocol): the tree
// that {project} names (the trusted ref's export for the reference; a
// revision's export, or the project folder for WORKTREE, for the candidate
// and base), {gate_dir}, where a bare argv[0] is looked up, and what python3
// becomes. Every stage renders its commands through arm_command, so that a
// harness of any language runs the same way in the gate, bench, trace and
// acceptance stages.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "command_template.h"
#include "workspace.h"

namespace densefeed {

struct ArmContext {
  std::string label;                      // "the trusted ref main at 1a2b3c4d5e6f", "WORKTREE", "revision 9f8e..."
  std::filesystem::path project;          // {project}
  std::filesystem::path gate_dir;         // {gate_dir}
  std::vector<std::filesystem::path> exe_dirs;  // a bare argv[0] is looked up here, in order, then in PATH
  std::filesystem::path python;           // what argv[0] python3/python becomes ("" = not resolved)
  std::map<std::string, std::string> env;  // added to every command's environment (PYTHONPATH)
  std::vector<std::filesystem::path> python_path;  // the project's python.path entries in PYTHONPATH, in order
  std::vector<std::filesystem::path> readable;  // folders a sandbox must show: the tree, its build
  // Inside `readable`, what a sandbox covers again: the workspace (runs,
  // builds, exports, the ledger) when the tree holds it (untrusted_launch.h).
  std::vector<std::filesystem::path> hidden;
  std::vector<std::string> env_allow;  // the project's sandbox.env: densefeed's variables its untrusted commands get
  // This arm's compile cache ('' = none): a folder of the workspace
  // (arm_cache_dir: Workspace::caches() / KEY-ARM, KEY the revision's build
  // folder name, the same key as its cached build, or "worktree-ID" for a
  // WORKTREE arm of experiment ID; ARM candidate or base; "trusted-COMMIT"
  // for the reference; a bench driver hosting an arm's kernel gets the
  // arm's with "-driver" added, never the arm's own nor the reference's).
  // Its commands get TRITON_CACHE_DIR, CUDA_CACHE_PATH,
  // TORCHINDUCTOR_CACHE_DIR and XDG_CACHE_HOME inside it, and it is the one
  // cache folder they may write (cache_environment); every other is hidden
  // with the workspace, so no candidate can poison the base's cache, a
  // later experiment's or a trusted command's.
  std::filesystem::path cache_dir;
};

// Workspace::caches() / "KEY-ARM": the compile cache of arm `arm`
// ("candidate", "base") of the revision keyed `key` (see ArmContext::cache_dir).
std::filesystem::path arm_cache_dir(const Workspace& workspace, const std::string& key, const std::string& arm);

// The variables that point a command's compilers at `cache_dir` (created):
// TRITON_CACHE_DIR = DIR/triton, CUDA_CACHE_PATH = DIR/cuda,
// TORCHINDUCTOR_CACHE_DIR = DIR/inductor, XDG_CACHE_HOME = DIR/xdg. Empty
// when cache_dir is ''.
std::map<std::string, std::string> cache_environment(const std::filesystem::path& cache_dir);

// Bytes in `dir` and below (0 when absent): a cache's size for the report.
std::uintmax_t folder_bytes(const std::filesystem::path& dir);

// Whether argv[0] of a command template names the Python interpreter.
bool is_python_command(const std::vector<std::string>& argv);

// Renders `argv` with `values` and the arm's {project} and {gate_dir}, then
// replaces argv[0] python3/python with the arm's interpreter. Throws
// std::invalid_argument as render_command does, and when a Python command
// meets an arm whose interpreter was not resolved.
std::vector<std::string> arm_command(const std::vector<std::string>& argv, TemplateValues values, const ArmContext& arm);

// The file whose bytes a rendered command runs: the script (first argument
// not starting with '-') of an interpreter command, else the executable
// argv[0] resolves to; empty when neither is found. For provenance hashes.
std::filesystem::path command_program(const std::vector<std::string>& rendered, const ArmContext& arm);

}  // namespace densefeed
