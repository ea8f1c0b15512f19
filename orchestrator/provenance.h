// Where a gate run's trusted inputs came from, recorded beside its verdict so
// that a reviewer can tell a run against densefeed's committed gates from one
// against an edited or re-locked copy (the lock only proves that gates and
// frozen files match gates/gates.lock, and a lock can be rewritten).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gate_spec.h"

namespace densefeed {

struct Provenance {
  std::string root;           // the densefeed checkout the gate was read from
  std::string commit;         // its git HEAD, "" when it is not a git checkout
  // Gate file, lock and frozen files that differ from HEAD (git status), "not
  // a git checkout", uncommitted changes elsewhere in the checkout, and
  // harnesses built from another checkout: each a reason to look closer.
  std::vector<std::string> uncommitted;
  // sha256 of each harness executable the gate's commands start (argv[0]).
  std::map<std::string, std::string> harness_sha256;

  bool clean() const { return !commit.empty() && uncommitted.empty(); }
};

// Runs git in `root` (read-only commands) and hashes the harness executables.
// Never throws for a missing git or repository: that is recorded instead.
Provenance read_provenance(const std::filesystem::path& root, const GateSpec& gate);

nlohmann::ordered_json provenance_json(const Provenance& p);

}  // namespace densefeed
