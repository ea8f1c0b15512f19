#include "trusted_arm.h"

#include <fmt/format.h>

#include "error.h"
#include "revision_build.h"
#include "trusted_paths.h"
#include "arms.h"

namespace densefeed {
namespace {

// The gate's trusted commands: its reference and its bench driver.
std::vector<std::pair<std::vector<std::string>, std::string>> trusted_commands(const GateSpec& gate) {
  std::vector<std::pair<std::vector<std::string>, std::string>> out = {{gate.reference_command, "reference.command"}};
  if (gate.bench.driver) out.emplace_back(gate.bench.driver->command, "bench.driver.command");
  return out;
}

bool trusted_uses_python(const GateSpec& gate) {
  for (const auto& [argv, field] : trusted_commands(gate)) {
    if (is_python_command(argv)) return true;
  }
  return false;
}

}  // namespace

bool needs_trusted_build(const GateSpec& gate, const Project& project, const GateStore& store) {
  if (store.worktree || !(gate.build || project.build)) return false;
  const BuildSpec& spec = gate.build ? *gate.build : *project.build;
  if (spec.commands.empty()) return false;
  for (const auto& [argv, field] : trusted_commands(gate)) {
    if (argv.empty() || is_python_command(argv) || argv[0].find('/') != std::string::npos) continue;
    bool in_export = false;
    for (const auto& h : project.harness_path) in_export = in_export || std::filesystem::is_regular_file(store.root / h / argv[0]);
    if (!in_export) return true;
  }
  return false;
}

namespace {

// Checks every trusted command's program against the trusted ground
// (trusted_paths.h). Throws InputError naming the gate file and field.
void check_trusted_programs(const GateSpec& gate, const ArmContext& reference, const TrustedGround& ground) {
  for (const auto& [argv, field] : trusted_commands(gate)) {
    if (is_python_command(argv)) continue;  // its interpreter is trusted_python's
    require_trusted_program(argv, reference.exe_dirs, ground,
                            field == "reference.command" ? "the gate's reference command" : "the gate's bench driver", gate.file,
                            field);
  }
}

}  // namespace

ArmContext trusted_arm(const GateSpec& gate, const Project& project, const GateStore& store, const std::filesystem::path& python) {
  std::filesystem::path trusted_py = python;
  std::vector<std::filesystem::path> path;
  if (trusted_uses_python(gate)) {
    trusted_py = trusted_python(project, store);
    path = trusted_python_path(project, store);
  } else {
    // No trusted Python: the entries the export holds, for what a compiled
    // reference may start; a missing one is nobody's business here.
    for (const auto& p : project.python_path) {
      const auto in_store = store.root / p.lexically_relative(project.dir);
      if (store.worktree) path.push_back(p);
      else if (std::filesystem::is_directory(in_store)) path.push_back(in_store);
    }
  }
  ArmContext arm = reference_context(project, store, trusted_py, path);
  if (!needs_trusted_build(gate, project, store)) check_trusted_programs(gate, arm, trusted_ground(project, store));
  return arm;
}

std::string build_trusted_arm(ArmContext& arm, const GateSpec& gate, const Project& project, const GateStore& store,
                              const Workspace& workspace, bool sandbox, bool* built,
                              std::vector<TamperEvent>* tampered, Executor* executor) {
  if (built) *built = false;
  if (!needs_trusted_build(gate, project, store)) return "";
  const RevisionBuild b = build_revision(gate, project, store.commit, workspace, sandbox, executor);
  if (tampered) tampered->insert(tampered->end(), b.tampered.begin(), b.tampered.end());
  if (!b.ok) {
    return fmt::format("the trusted ref's build at {} (of the gate's reference and driver) failed: {}", store.commit.substr(0, 12),
                       b.failure);
  }
  const auto hidden = arm.hidden;
  const auto cache = arm.cache_dir;
  arm = reference_context(project, store, arm.python, arm.python_path, b.bin);
  arm.hidden = hidden;
  arm.cache_dir = cache;
  if (built) *built = true;
  try {
    check_trusted_programs(gate, arm, trusted_ground(project, store, b.src.parent_path()));
  } catch (const InputError& e) {
    return fmt::format("{} ({}): {}", e.file(), e.field(), e.message());
  }
  return "";
}

}  // namespace densefeed
