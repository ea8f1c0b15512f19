#include "gate_verify.h"

#include <fmt/format.h>

#include "error.h"
#include "gate_lock.h"

namespace densefeed {

bool GateVerification::ok() const {
  for (const auto& g : gates) {
    if (!g.problems.empty()) return false;
  }
  return tampered.empty();
}

void GateVerification::add_export(const GateStore& store) {
  trusted = store.describe();
  tampered = store.tampered;
}

GateVerification verify_gates(const Project& project, const GateStore& worktree) {
  const auto lock = read_lock(worktree);
  const auto names = list_gates(worktree);
  if (names.empty()) {
    throw InputError(worktree.gate_dir().string(), {}, "",
                     fmt::format("no gates (*.yaml) in the project's gates folder ({} in {})", worktree.gates,
                                 project.config_file().string()));
  }
  GateVerification v;
  for (const auto& name : names) {
    auto problems = check_locked_file(worktree, lock, worktree.gate_rel(name));
    if (problems.empty()) {
      auto frozen = check_frozen_files(worktree, lock, load_gate(worktree, name));
      problems.insert(problems.end(), frozen.begin(), frozen.end());
    }
    v.gates.push_back({name, std::move(problems)});
  }
  return v;
}

}  // namespace densefeed
