#include "gate_relock.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error.h"
#include "gate_lock.h"

namespace densefeed {

GateRelock relock_gates(const Project& project, const GateStore& worktree, const GateStore* trusted,
                        const std::vector<std::string>& names) {
  if (trusted) {
    // Only what a person committed on the trusted ref can be locked:
    // the runs read the gate store from there, not from this folder.
    const auto files = files_to_lock(worktree, names);
    const auto differ = worktree_differences(project, *trusted, files);
    if (!differ.empty()) {
      throw InputError(
          worktree.path(worktree.lock_rel()).string(), {}, "",
          fmt::format("not locking: {} {} not committed on the trusted ref ({}) as {} in the project folder; commit "
                      "{} on {} first (git add {} && git commit), then run densefeed gate lock again",
                      fmt::join(differ, ", "), differ.size() == 1 ? "is" : "are", trusted->describe(),
                      differ.size() == 1 ? "it is" : "they are", differ.size() == 1 ? "it" : "them", trusted->ref,
                      fmt::join(differ, " ")));
    }
  }
  GateRelock relock;
  relock.lock_rel = worktree.lock_rel();
  relock.changes = write_lock(worktree, names);
  if (trusted) relock.commit_on = project.trusted_ref;
  return relock;
}

}  // namespace densefeed
