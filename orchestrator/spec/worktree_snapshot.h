// A snapshot of an agent's worktree for a densefeed service (issue 28): the
// repository's tracked files and its untracked files that are not ignored
// (git ls-files -co --exclude-standard), as they are on disk now, in a tar
// archive with its sha256. The service makes it a commit of its own clone;
// the agent's checkout itself is never run.
#pragma once

#include <cstdint>
#include <filesystem>

#include "service_wire.h"

namespace densefeed {

struct SnapshotFigures {
  std::size_t files = 0;
  double ms = 0;  // wall time to list, archive and hash, milliseconds
};

// The snapshot of the git repository holding `dir`. Throws InputError when
// `dir` is in no git repository or the archive passes `limit_bytes`
// (naming the limit and the largest files), InfraError when git or tar fail.
WireSnapshot take_worktree_snapshot(const std::filesystem::path& dir, std::uint64_t limit_bytes, SnapshotFigures* figures = nullptr);

}  // namespace densefeed
