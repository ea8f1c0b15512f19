#include "arms.h"

#include <cstdlib>

#include "install_paths.h"
#include "revision_build.h"
#include "trusted_paths.h"
#include "untrusted_launch.h"

namespace densefeed {
namespace {

ArmContext base_context(const Project& project, const GateStore& store, const std::filesystem::path& tree,
                        const std::filesystem::path& python) {
  ArmContext a;
  a.project = tree;
  a.gate_dir = store.gate_dir();
  a.python = python;
  a.python_path = project.python_path;
  std::string pythonpath;
  for (const auto& p : project.python_path) pythonpath += p.string() + ":";
  pythonpath += python_module_dir().string();
  a.env["PYTHONPATH"] = pythonpath;
  // Never write bytecode caches into densefeed's installed data (or a trusted export).
  a.env["PYTHONDONTWRITEBYTECODE"] = "1";
  a.readable = {tree};
  for (const auto& p : project.python_path) a.readable.push_back(p);
  a.readable.push_back(python_module_dir());
  a.env_allow = project.sandbox_env;
  a.hidden = workspace_hidden(Workspace{project.ledger});
  return a;
}

}  // namespace

ArmContext reference_context(const Project& project, const GateStore& store, const std::filesystem::path& python,
                             const std::vector<std::filesystem::path>& python_path, const std::filesystem::path& trusted_bin) {
  Project trusted = project;
  trusted.python_path = python_path;
  ArmContext a = base_context(trusted, store, store.root, python);
  a.label = store.worktree ? "the worktree (--trust-worktree)" : "the trusted ref " + store.describe();
  // The trusted ref's build first, then its export's harness_path: never
  // the project folder's (trusted_paths.h), unless a person trusts it.
  if (!trusted_bin.empty()) {
    a.exe_dirs.push_back(trusted_bin);
    a.readable.push_back(trusted_bin.parent_path());
  }
  for (const auto& h : project.harness_path) a.exe_dirs.push_back(store.root / h);
  // What its own children look up: PATH without the worktree's folders (the
  // agent's shell may have put one first).
  const char* path = std::getenv("PATH");
  a.env["PATH"] = trusted_search_path(path ? path : "", trusted_ground(project, store, trusted_bin.empty() ? trusted_bin : trusted_bin.parent_path()));
  return a;
}

ArmContext worktree_context(const Project& project, const GateStore& store, const std::filesystem::path& python) {
  ArmContext a = base_context(project, store, project.dir, python);
  a.label = "WORKTREE";
  for (const auto& h : project.harness_path) a.exe_dirs.push_back(project.dir / h);
  return a;
}

ArmContext revision_context(const Project& project, const GateStore& store, const RevisionBuild& build,
                            const std::filesystem::path& python) {
  ArmContext a = base_context(project, store, build.src, python);
  a.label = "revision " + build.sha.substr(0, 12);
  if (!build.bin.empty()) a.exe_dirs.push_back(build.bin);
  for (const auto& h : project.harness_path) a.exe_dirs.push_back(build.src / h);
  if (!build.build.empty()) a.readable.push_back(build.build);
  return a;
}

}  // namespace densefeed
