// The gate store: the gates, gates.lock and frozen files a run trusts. They
// are read from the trusted ref's commit (a person locks and merges them
// there), exported clean into the workspace, never from whatever is checked
// out; or, when the person running densefeed says --trust-worktree, from the
// project folder as it is (recorded in provenance). The reference runs from
// this tree. Paths are relative to the project folder; "gates/NAME.yaml" is
// spelled here and nowhere else.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "error.h"

#include "project.h"
#include "tamper_event.h"
#include "workspace.h"

namespace densefeed {

struct GateStore {
  std::filesystem::path root;  // the project's tree at the trusted commit (an export), or the project folder
  std::string gates = "gates"; // the gates folder, relative to root
  std::string ref;             // the trusted ref's name ("main")
  std::string commit;          // its commit; for a worktree store HEAD ("" outside git)
  bool worktree = false;       // read from the project folder as it is, not from the trusted ref
  // The project folder, where a person edits what the export holds: errors
  // in a gate read from the export name the file there (shown_path).
  std::filesystem::path project_dir;
  // What open_gate_store found altered in the export it had made earlier
  // (export_verify.h), which it then replaced with a fresh export: the
  // caller that holds the ledger records each (Ledger::record_tamper).
  std::vector<TamperEvent> tampered;

  std::string gate_rel(const std::string& name) const { return gates + "/" + name + ".yaml"; }
  std::string lock_rel() const { return gates + "/gates.lock"; }
  std::filesystem::path path(const std::string& rel) const { return root / rel; }
  std::filesystem::path gate_dir() const { return root / gates; }
  // `rel` as a person finds it: in the project folder (an export's copy is
  // densefeed's, not the file anyone edits).
  std::filesystem::path shown_path(const std::string& rel) const { return (project_dir.empty() ? root : project_dir) / rel; }
  // An InputError about a file of the export, rethrown naming the project
  // folder's file and the commit it was read at ("as committed on main at
  // SHA: edit it in the project folder and commit it on main"); any other
  // error unchanged. For a worktree store: `e` as it is.
  [[noreturn]] void rethrow_shown(const InputError& e) const;
  // "main at 1a2b3c4d5e6f" or "the worktree of PROJECT (--trust-worktree)".
  std::string describe() const;
};

// The project folder as it is (what `gate lock` writes and `gate verify` checks).
GateStore worktree_store(const Project& project);

// The store a run uses: the worktree's when `trust_worktree`, otherwise the
// trusted ref's commit exported (once per commit) into workspace.exports().
// An export found there is verified against the commit before it is used
// (export_verify.h); one that differs is moved aside and removed, exported
// afresh, and what differed is returned in `tampered`. A fresh export is
// verified too. Throws InputError when the project is in no git repository
// (naming --trust-worktree) or the trusted ref names no commit (naming
// densefeed.yaml's trusted_ref); InfraError when the export fails or a fresh
// export does not match its commit (git attributes rewrote files).
GateStore open_gate_store(const Project& project, const Workspace& workspace, bool trust_worktree);

// Of `rels` (paths relative to the project), those whose bytes in the project
// folder differ from the store's (missing on one side counts): e.g. a gate
// edited in the worktree but not committed on the trusted ref.
std::vector<std::string> worktree_differences(const Project& project, const GateStore& store,
                                              const std::vector<std::string>& rels);

}  // namespace densefeed
