// Prints (does not assert) what verifying an export costs per run
// (export_verify.h: git ls-tree of the commit + the git blob id of every
// exported file), median of N with min and max, for densefeed's own
// repository (the whole tree at HEAD) and for experiments/fla-intracard-cp
// (a project folder inside it: a prefix export); and what checking a cached
// build's seal costs (build_seal.h) with the whole repository as its src/.
//
//   export_verify_perftest [N=21] [REPO=the source folder] [FOLDER=/tmp]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "build_seal.h"
#include "export_verify.h"
#include "revision.h"

namespace {

struct Figures {
  double median_ms, min_ms, max_ms;
};

template <class F>
Figures time_it(int n, F f) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front(), ms.back()};
}

}  // namespace

int main(int argc, char** argv) {
  namespace df = densefeed;
  const int n = argc > 1 ? std::stoi(argv[1]) : 21;
  const std::filesystem::path repo = argc > 2 ? argv[2] : DENSEFEED_SOURCE_DIR;
  const std::filesystem::path dir = std::filesystem::path(argc > 3 ? argv[3] : "/tmp") / "densefeed-export-verify-perf";
  std::filesystem::remove_all(dir);
  const std::string sha = df::resolve_revision(repo, "HEAD");
  std::printf("export verification, %d runs each, commit %s of %s\n", n, sha.substr(0, 12).c_str(), repo.string().c_str());
  std::printf("%-34s %7s %10s %10s %10s %8s\n", "export", "files", "median ms", "min ms", "max ms", "events");
  for (const std::string prefix : {std::string(), std::string("experiments/fla-intracard-cp/")}) {
    const auto root = dir / (prefix.empty() ? "whole" : "fla-intracard-cp");
    df::export_revision(repo, prefix, sha, root);
    df::ExportCheck check;
    const Figures f = time_it(n, [&] { check = df::verify_export(repo, prefix, sha, root); });
    std::printf("%-34s %7zu %10.2f %10.2f %10.2f %8zu\n", prefix.empty() ? "densefeed (whole repository)" : prefix.c_str(), check.files,
                f.median_ms, f.min_ms, f.max_ms, check.tampered.size());
  }
  // A cached build whose src/ is the whole repository (and an empty build/).
  const auto build = dir / "build-cache";
  df::export_revision(repo, "", sha, build / "src");
  std::filesystem::create_directories(build / "build");
  const std::string key(32, 'k');
  const Figures w = time_it(std::max(1, n / 4), [&] { df::write_build_seal(build, key); });
  bool ok = true;
  const Figures c = time_it(n, [&] { ok = ok && !df::check_build_seal(build, key, sha); });
  std::printf("build seal over the whole repository as src/: write median %.2f ms, check median %.2f ms (min %.2f, max %.2f)%s\n",
              w.median_ms, c.median_ms, c.min_ms, c.max_ms, ok ? "" : " (MISMATCH)");
  std::filesystem::remove_all(dir);
  return 0;
}
