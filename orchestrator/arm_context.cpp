#include "arm_context.h"

#include <cstdlib>
#include <stdexcept>

#include "install_paths.h"
#include "process_runner.h"
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

bool is_python_command(const std::vector<std::string>& argv) {
  return !argv.empty() && (argv[0] == "python3" || argv[0] == "python");
}

std::vector<std::string> arm_command(const std::vector<std::string>& argv, TemplateValues values, const ArmContext& arm) {
  values.project = arm.project.string();
  values.gate_dir = arm.gate_dir.string();
  auto out = render_command(argv, values);
  if (is_python_command(argv)) {
    if (arm.python.empty()) throw std::invalid_argument("a python3 command, but no Python interpreter was resolved for " + arm.label);
    out[0] = arm.python.string();
  }
  return out;
}

std::filesystem::path command_program(const std::vector<std::string>& rendered, const ArmContext& arm) {
  if (rendered.empty()) return {};
  const auto exe = resolve_executable(rendered[0], arm.exe_dirs);
  const auto name = std::filesystem::path(rendered[0]).filename().string();
  if (!arm.python.empty() && (exe == arm.python || name.rfind("python", 0) == 0)) {
    for (std::size_t i = 1; i < rendered.size(); ++i) {
      if (rendered[i] == "-m" || rendered[i] == "-c") return {};
      if (!rendered[i].empty() && rendered[i][0] != '-') {
        std::filesystem::path script = rendered[i];
        return std::filesystem::is_regular_file(script) ? script : std::filesystem::path();
      }
    }
    return {};
  }
  return exe;
}


std::filesystem::path arm_cache_dir(const Workspace& workspace, const std::string& key, const std::string& arm) {
  return workspace.caches() / (key + "-" + arm);
}

std::map<std::string, std::string> cache_environment(const std::filesystem::path& cache_dir) {
  if (cache_dir.empty()) return {};
  std::map<std::string, std::string> env = {{"TRITON_CACHE_DIR", (cache_dir / "triton").string()},
                                            {"CUDA_CACHE_PATH", (cache_dir / "cuda").string()},
                                            {"TORCHINDUCTOR_CACHE_DIR", (cache_dir / "inductor").string()},
                                            {"XDG_CACHE_HOME", (cache_dir / "xdg").string()}};
  std::error_code ec;
  for (const auto& [k, v] : env) std::filesystem::create_directories(v, ec);
  return env;
}

std::uintmax_t folder_bytes(const std::filesystem::path& dir) {
  std::uintmax_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

}  // namespace densefeed
