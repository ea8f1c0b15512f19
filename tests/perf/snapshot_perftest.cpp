// Prints (does not assert) what a worktree snapshot costs the agent's side
// of a densefeed service submission (worktree_snapshot.h: git ls-files -co
// --exclude-standard, tar of those files, sha256 of the archive): bytes,
// files and the median, min and max wall time of N, for each folder given
// (default: densefeed's own repository, and experiments/fla-intracard-cp,
// whose snapshot is that of the repository holding it).
//
//   snapshot_perftest [N=11] [DIR...]
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "worktree_snapshot.h"

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::max(1, std::stoi(argv[1])) : 11;
  std::vector<std::string> dirs;
  for (int i = 2; i < argc; ++i) dirs.push_back(argv[i]);
  if (dirs.empty()) dirs = {DENSEFEED_SOURCE_DIR, std::string(DENSEFEED_SOURCE_DIR) + "/experiments/fla-intracard-cp"};
  for (const auto& dir : dirs) {
    std::vector<double> ms;
    densefeed::SnapshotFigures f;
    std::size_t bytes = 0;
    for (int i = 0; i < n; ++i) {
      const auto s = densefeed::take_worktree_snapshot(dir, 4096ull << 20, &f);
      bytes = s.tar.size();
      ms.push_back(f.ms);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%s: %zu files, %zu bytes (%.1f MiB) tar; snapshot %.1f ms median of %d (min %.1f, max %.1f)\n", dir.c_str(), f.files, bytes,
                bytes / 1048576.0, ms[ms.size() / 2], n, ms.front(), ms.back());
  }
  return 0;
}
