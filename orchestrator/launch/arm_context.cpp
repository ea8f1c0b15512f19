#include "arm_context.h"

#include <cstdlib>
#include <stdexcept>

#include "process_runner.h"

namespace densefeed {
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
