// What of the folders a sandbox shows must be covered again, or must stop
// the launch (issue 25, no channels), found by walking them before each
// sandboxed command starts (untrusted_launch.h):
//   - every ledger in them, not only the one in use: a file named *.db
//     (and its -wal, -shm, -journal) with its workspace (workspace.h: its
//     -runs, -builds, -exports, -calibrations and -caches folders); any
//     folder named *-exports or *-caches; a folder named *-runs that holds a
//     folder named by a number (an experiment's run folder) even where its
//     ledger is gone, and beside such a folder named STEM-*, the files named
//     STEM.* (a ledger of any suffix: ci/results.sqlite beside
//     ci/results-runs). A second ledger in the project tree (README's CI
//     layout, ci/ledger.db) holds reference outputs a candidate could copy.
//   - unix sockets (a server of the host, or one the agent left listening
//     in its tree): a sandboxed command can connect to a socket it is shown,
//     whatever namespaces it has, so the launch refuses (InfraError, exit 3)
//     naming it. A socket made after the walk is not found: what a person
//     runs next to densefeed in the project folder stays their own concern.
// Not entered: links (not followed, as bwrap does not show their targets)
// and folders in `skip` (already hidden). Cost: one readdir per folder (no
// stat where the file system gives entry types), per sandboxed launch:
// densefeed's own repository with its build folder (about 2,300 entries)
// 10 to 45 ms on a 2-core builder under load, experiments/fla-intracard-cp
// (69 entries) 0.3 to 0.5 ms.
#pragma once

#include <cstddef>
#include <filesystem>
#include <vector>

namespace densefeed {

struct ShownTree {
  std::vector<std::filesystem::path> hidden;   // ledgers found and their workspace's folders and files, to cover
  std::vector<std::filesystem::path> sockets;  // unix sockets found, in walk order
  std::size_t entries = 0;                     // entries looked at
};

// Walks every folder of `roots` (links and what does not exist are
// skipped) and below, not entering the folders of `skip`. Never throws for
// an unreadable folder (it is not shown either: bwrap binds what is there,
// and what the user cannot read the sandbox cannot).
ShownTree scan_shown_tree(const std::vector<std::filesystem::path>& roots, const std::vector<std::filesystem::path>& skip);

}  // namespace densefeed
