#include "gate_store.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "error.h"
#include "export_verify.h"
#include "revision.h"
#include "sha256.h"

namespace densefeed {
namespace {

std::string content_hash(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) return "";
  return sha256_file(p);
}

}  // namespace

std::string GateStore::describe() const {
  if (worktree) return fmt::format("the worktree of {} (--trust-worktree)", root.string());
  return fmt::format("{} at {}", ref, commit.substr(0, 12));
}

void GateStore::rethrow_shown(const InputError& e) const {
  const std::string prefix = root.string() + "/";
  if (worktree || project_dir.empty() || e.file().rfind(prefix, 0) != 0) throw e;
  const auto shown = project_dir / e.file().substr(prefix.size());
  throw InputError(shown.string(), e.mark(), e.field(),
                   fmt::format("{} (as committed on {} at {}: edit it in the project folder and commit it on {})", e.message(), ref,
                               commit.substr(0, 12), ref));
}

GateStore worktree_store(const Project& project) {
  GateStore s;
  s.root = project.dir;
  s.project_dir = project.dir;
  s.gates = project.gates;
  s.ref = project.trusted_ref;
  s.commit = project.in_git() ? head_commit(project.dir) : "";
  s.worktree = true;
  return s;
}

GateStore open_gate_store(const Project& project, const Workspace& workspace, bool trust_worktree) {
  if (trust_worktree) return worktree_store(project);
  if (!project.in_git()) {
    throw InputError(project.config_file().string(), {}, "trusted_ref",
                     fmt::format("{} is in no git repository, so there is no trusted ref to read its gates from: make it "
                                 "one (git init, commit the gates, lock them), or pass --trust-worktree to trust the "
                                 "folder as it is (recorded in provenance)",
                                 project.dir.string()));
  }
  GateStore s;
  s.gates = project.gates;
  s.ref = project.trusted_ref;
  s.project_dir = project.dir;
  try {
    s.commit = resolve_revision(project.dir, project.trusted_ref);
  } catch (const std::runtime_error& e) {
    const std::string pointer = "/trusted_ref";
    if (project.config.value.contains("trusted_ref")) {
      project.config.fail(pointer, fmt::format("the trusted ref '{}' names no commit: {}", project.trusted_ref, e.what()));
    }
    throw InputError(project.config_file().string(), {}, "trusted_ref",
                     fmt::format("the trusted ref '{}' (the default; set trusted_ref in {} to name another) names no commit "
                                 "in the repository at {}",
                                 project.trusted_ref, kProjectFile, project.repo_top.string()));
  }
  const std::string key = s.commit + (project.prefix.empty() ? "" : "-" + sha256_hex(project.prefix).substr(0, 12));
  s.root = workspace.exports() / key;
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(s.root, ec))) {
    ExportCheck check;
    if (std::filesystem::is_symlink(std::filesystem::symlink_status(s.root, ec))) {
      check.tampered.push_back({TamperKind::export_link, s.root.string(),
                                fmt::format("the export folder is a symbolic link to '{}'", std::filesystem::read_symlink(s.root, ec).string()),
                                s.commit});
    } else {
      check = verify_export(project.repo_top, project.prefix, s.commit, s.root);
    }
    if (check.tampered.empty()) return s;
    s.tampered = std::move(check.tampered);
    // Moved aside first (a rename needs only the exports folder writable,
    // whatever was done to the modes inside), then removed as far as it can be.
    const auto aside = workspace.exports() / fmt::format(".{}.tampered.{}", key, ::getpid());
    std::filesystem::remove_all(aside, ec);
    std::filesystem::rename(s.root, aside, ec);
    if (ec) {
      throw InfraError(fmt::format("{} does not match the trusted ref's commit {} ({}) and cannot be moved aside: {}", s.root.string(),
                                   s.commit.substr(0, 12), s.tampered.front().detail, ec.message()));
    }
    std::filesystem::remove_all(aside, ec);
  }
  // Exported beside its final place and renamed: a reader never sees half an export.
  const auto tmp = workspace.exports() / fmt::format(".{}.{}.tmp", key, ::getpid());
  std::filesystem::remove_all(tmp, ec);
  try {
    export_revision(project.repo_top, project.prefix, s.commit, tmp);
  } catch (const std::runtime_error& e) {
    std::filesystem::remove_all(tmp, ec);
    throw InfraError(fmt::format("exporting the trusted ref {} ({}) failed: {}", project.trusted_ref, s.commit.substr(0, 12), e.what()));
  }
  if (const ExportCheck fresh = verify_export(project.repo_top, project.prefix, s.commit, tmp); !fresh.tampered.empty()) {
    std::filesystem::remove_all(tmp, ec);
    throw InfraError(fmt::format("a fresh export of the trusted ref {} ({}) does not match its commit ({}: {}): git attributes "
                                 "(export-subst, eol, filters) rewrite files that densefeed must verify; remove them for the "
                                 "gate store's files",
                                 project.trusted_ref, s.commit.substr(0, 12), fresh.tampered.front().path, fresh.tampered.front().detail));
  }
  std::filesystem::rename(tmp, s.root, ec);
  if (ec) std::filesystem::remove_all(tmp, ec);  // another process exported it first
  return s;
}

std::vector<std::string> worktree_differences(const Project& project, const GateStore& store,
                                              const std::vector<std::string>& rels) {
  std::vector<std::string> differ;
  if (store.worktree) return differ;
  for (const auto& rel : rels) {
    if (content_hash(project.dir / rel) != content_hash(store.path(rel))) differ.push_back(rel);
  }
  return differ;
}

}  // namespace densefeed
