#include "provenance.h"

#include "arm_replay.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "revision.h"
#include "sha256.h"

namespace densefeed {
namespace {

std::string hash_or_note(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) return "missing";
  try {
    return sha256_file(p);
  } catch (const std::exception&) {
    return "unreadable";
  }
}

}  // namespace

Provenance read_provenance(const Project& project, const GateStore& store, const GateSpec* gate,
                           const ArmContext* reference, const ArmContext* candidate,
                           const nlohmann::ordered_json& candidate_params) {
  Provenance p;
  p.project = project.dir.string();
  p.repository = project.repo_top.string();
  p.gate_store = store.describe();
  p.trusted_ref = store.ref;
  p.trusted_commit = store.worktree ? "" : store.commit;
  p.trust_worktree = store.worktree;
  // Through its recorded form, so that `run` holds exactly what a reader of
  // the record gets back (arm_replay.h).
  if (candidate) p.candidate_arm = arm_from_replay_json(arm_replay_json(*candidate));
  if (reference) p.reference_arm = arm_from_replay_json(arm_replay_json(*reference));
  if (!project.in_git()) {
    p.notes.push_back("not a git repository");
  } else {
    p.commit = head_commit(project.dir);
    const auto changed = uncommitted_files(project.dir);
    p.dirty = !changed.empty();
    if (p.dirty) {
      p.notes.push_back(fmt::format("uncommitted changes to tracked files ({}{})",
                                    fmt::join(changed.begin(), changed.begin() + std::min<std::size_t>(changed.size(), 5), ", "),
                                    changed.size() > 5 ? ", ..." : ""));
    }
  }
  if (store.worktree) p.notes.push_back("the gate store is the worktree (--trust-worktree), not the trusted ref");
  if (gate == nullptr) return p;
  std::vector<std::string> trusted = {store.gate_rel(gate->name), store.lock_rel()};
  trusted.insert(trusted.end(), gate->freezes.begin(), gate->freezes.end());
  for (const auto& rel : trusted) p.frozen_sha256[rel] = hash_or_note(store.path(rel));
  if (const auto differ = worktree_differences(project, store, trusted); !differ.empty()) {
    p.notes.push_back(fmt::format("the worktree's copies of {} differ from the gate store ({}): the run used the gate store's",
                                  fmt::join(differ, ", "), store.describe()));
  }
  const auto first_case = gate->cases.empty() ? nlohmann::ordered_json::object() : gate->cases.front().values;
  // A trusted program (the reference's, the bench driver's) is the trusted
  // ref's export's or its build's (trusted_arm.h refuses anything else):
  // should one ever lie elsewhere in the project folder, whoever can write
  // the worktree could have replaced it. Said, so that nobody reads the
  // frozen files as a guarantee about it.
  const auto under = [](const std::filesystem::path& path, const std::filesystem::path& dir) {
    const auto rel = path.lexically_normal().lexically_relative(dir.lexically_normal());
    return !rel.empty() && *rel.begin() != "..";
  };
  const auto trusted_program = [&](const std::filesystem::path& program, const char* what) {
    if (store.worktree || program.empty() || under(program, store.root) || !under(program, project.dir)) return;
    for (const auto& dir : reference->readable) {
      if (under(program, dir)) return;  // the trusted ref's build, densefeed's own module folder
    }
    p.notes.push_back(fmt::format("{}'s program {} is not in the trusted ref: it is the worktree's build, hashed here, but "
                                  "not built from the frozen files by densefeed",
                                  what, std::filesystem::relative(program, project.dir).string()));
  };
  for (const auto& [command, arm, params] :
       {std::tuple{&gate->reference_command, reference, nlohmann::ordered_json::object()},
        std::tuple{&gate->candidate_command, candidate, candidate_params}}) {
    if (arm == nullptr || command->empty()) continue;
    try {
      const auto rendered = arm_command(*command, {first_case, params, 0, "OUT"}, *arm);
      const auto program = command_program(rendered, *arm);
      if (!program.empty()) p.harness_sha256[program.string()] = hash_or_note(program);
      if (arm == reference) trusted_program(program, "the reference");
    } catch (const std::exception&) {
      // A command that cannot be rendered fails when it runs; provenance only records.
    }
  }
  // The benchmark's timer and what it loads: the frozen driver's program
  // (rendered in the trusted context, as it runs) and the candidate's kernel,
  // the library or module the driver will load from the candidate's tree.
  if (const auto& d = gate->bench.driver; d && reference != nullptr && !d->command.empty()) {
    try {
      const auto rendered = arm_command(d->command, {first_case, nlohmann::ordered_json::object(), 0, "OUT"}, *reference);
      const auto program = command_program(rendered, *reference);
      if (!program.empty()) p.harness_sha256[program.string()] = hash_or_note(program);
      trusted_program(program, "the bench driver");
    } catch (const std::exception&) {
    }
    if (candidate != nullptr) {
      std::error_code ec;
      if (!d->library.empty()) {
        // The first of the arm's bin folders that holds it (kernels/common/driver.h).
        for (const auto& dir : candidate->exe_dirs) {
          if (std::filesystem::is_regular_file(dir / d->library, ec)) {
            p.harness_sha256[(dir / d->library).string()] = hash_or_note(dir / d->library);
            break;
          }
        }
      } else if (!d->module.empty()) {
        // What Python imports for that name from that folder: a package
        // (NAME/__init__.py) before a module (NAME.py), as its path finder
        // looks (importlib's FileFinder), so a package beside the module is
        // the file hashed, not the module it shadows.
        auto rel = d->module;
        std::replace(rel.begin(), rel.end(), '.', '/');
        const auto base = candidate->project / d->path;
        const auto package = base / rel / "__init__.py";
        const auto file = std::filesystem::is_regular_file(package, ec) ? package : base / (rel + ".py");
        p.harness_sha256[file.lexically_normal().string()] = hash_or_note(file);
      }
    }
  }
  return p;
}

nlohmann::ordered_json provenance_json(const Provenance& p) {
  return {{"project", p.project},          {"repository", p.repository},         {"commit", p.commit},
          {"clean", p.clean()},            {"dirty", p.dirty},                   {"gate_store", p.gate_store},
          {"trusted_ref", p.trusted_ref},  {"trusted_commit", p.trusted_commit}, {"trust_worktree", p.trust_worktree},
          {"notes", p.notes},              {"harness_sha256", p.harness_sha256}, {"frozen_sha256", p.frozen_sha256},
          {"candidate_arm", p.candidate_arm ? arm_replay_json(*p.candidate_arm) : nlohmann::ordered_json(nullptr)},
          {"reference_arm", p.reference_arm ? arm_replay_json(*p.reference_arm) : nlohmann::ordered_json(nullptr)}};
}

}  // namespace densefeed
