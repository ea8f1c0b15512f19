// `densefeed gate lock`: a person re-locks gates in the project folder, and
// only what is committed on the trusted ref (gate_lock.h writes the lock).
#pragma once

#include <string>
#include <vector>

#include "gate_store.h"
#include "project.h"

namespace densefeed {

struct GateRelock {
  std::string lock_rel;              // the lock's path, relative to the project ("gates/gates.lock")
  std::vector<std::string> changes;  // "changed PATH", "added PATH", "removed PATH" (write_lock)
  std::string commit_on;             // the trusted ref the new lock must be committed on; '' with --trust-worktree
};

// Re-locks `names` (every gate when empty) in `worktree` (the project folder
// as it is). `trusted` is the trusted ref's store, or null with
// --trust-worktree: then every file to lock must have the same bytes in the
// project folder as there. Throws InputError naming the lock file and the
// files that differ (and what to run), or a gate that is invalid.
GateRelock relock_gates(const Project& project, const GateStore& worktree, const GateStore* trusted,
                        const std::vector<std::string>& names);

}  // namespace densefeed
