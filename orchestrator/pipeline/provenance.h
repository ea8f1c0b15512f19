// Where a gate run's trusted inputs came from, recorded beside its verdict so
// that a reviewer can tell a run against the trusted ref's committed gates
// from one against an edited copy (the lock only proves that gates and frozen
// files match gates.lock, and a lock can be rewritten).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arm_context.h"
#include "gate_spec.h"
#include "gate_store.h"
#include "project.h"

namespace densefeed {

struct Provenance {
  std::string project;        // the project folder
  std::string repository;     // its git repository's top ("" outside git)
  std::string commit;         // the project's HEAD ("" outside git)
  std::string gate_store;     // GateStore::describe(): "main at 1a2b..." or the worktree
  std::string trusted_ref;    // the ref's name
  std::string trusted_commit; // the commit the gate store was read from ("" for a worktree store outside git)
  bool trust_worktree = false;  // --trust-worktree
  // Reasons to look closer: tracked files with uncommitted changes, gate, lock
  // or frozen files that differ between the worktree and the gate store, "not
  // a git repository", --trust-worktree, a reference's or bench driver's
  // program that is the worktree's build rather than the trusted ref's.
  std::vector<std::string> notes;
  bool dirty = false;         // tracked files under the project folder differ from HEAD
  // sha256 of each program the gate's commands run: a harness script (not
  // its interpreter) or an executable, by path; with a bench driver also its
  // program and the candidate's kernel it loads (the library from the arm's
  // bin folders, or the module's .py file from the arm's tree).
  std::map<std::string, std::string> harness_sha256;
  // sha256 of the gate file, the lock and every frozen file, as the gate store has them.
  std::map<std::string, std::string> frozen_sha256;
  // Where the candidate's commands ran from (arm_replay.h): the next steps'
  // rerun commands are built from it, in `run` and from the record alike.
  std::optional<ArmContext> candidate_arm;
  // Where the reference's commands ran from (the trusted ref's export):
  // densefeed repro prints a case's reference command from it (issue 30).
  std::optional<ArmContext> reference_arm;

  bool clean() const { return !commit.empty() && !dirty && notes.empty(); }
};

// Reads git (read-only commands) for the project and hashes the programs the
// reference and candidate commands of `gate` run, as rendered for the first
// of `cases` (one rendering suffices: argv[0] and scripts do not depend on
// the case in any gate that makes sense; a per-case script is hashed per
// rendering all the same). Never throws for a missing git or repository:
// that is recorded instead.
Provenance read_provenance(const Project& project, const GateStore& store, const GateSpec* gate,
                           const ArmContext* reference, const ArmContext* candidate,
                           const nlohmann::ordered_json& candidate_params);

nlohmann::ordered_json provenance_json(const Provenance& p);

}  // namespace densefeed
