#include "worktree_snapshot.h"

#include <csignal>

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "error.h"
#include "sha256.h"
#include "tool_run.h"

namespace densefeed {

namespace {

std::vector<std::string> split_nul(const std::string& s) {
  std::vector<std::string> v;
  for (std::size_t at = 0; at < s.size();) {
    const auto end = s.find('\0', at);
    v.push_back(s.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return v;
}

std::string largest_files(const std::filesystem::path& top, const std::vector<std::string>& files) {
  std::vector<std::pair<std::uintmax_t, std::string>> sized;
  for (const auto& f : files) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(top / f, ec);
    if (!ec) sized.emplace_back(n, f);
  }
  std::sort(sized.rbegin(), sized.rend());
  std::string s;
  for (std::size_t i = 0; i < std::min<std::size_t>(3, sized.size()); ++i) {
    s += fmt::format("{}{} ({} bytes)", i ? ", " : "", sized[i].second, sized[i].first);
  }
  return s;
}

}  // namespace

WireSnapshot take_worktree_snapshot(const std::filesystem::path& dir, std::uint64_t limit_bytes, SnapshotFigures* figures) {
  const auto start = std::chrono::steady_clock::now();
  const auto top_r = run_tool({"git", "-C", dir.string(), "rev-parse", "--show-toplevel"}, dir);
  if (!top_r.ok) throw InputError(dir.string(), {}, "", "a WORKTREE candidate is sent as a snapshot of its git repository, and this folder is in none");
  const std::filesystem::path top(top_r.out.substr(0, top_r.out.find('\n')));
  const auto listed = run_tool({"git", "-C", top.string(), "ls-files", "-z", "-c", "-o", "--exclude-standard"}, top);
  if (!listed.ok) throw InfraError("git ls-files failed in " + top.string() + ": " + listed.what());
  std::vector<std::string> files;
  for (auto& f : split_nul(listed.out)) {
    struct stat st{};
    // Deleted tracked files are not sent; neither is what is not a file or a link.
    if (!f.empty() && ::lstat((top / f).c_str(), &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) files.push_back(f);
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  char scratch[] = "/tmp/densefeed-snapshot-XXXXXX";
  if (::mkdtemp(scratch) == nullptr) throw InfraError("cannot make a scratch folder under /tmp");
  const std::filesystem::path tmp(scratch);
  {
    std::ofstream list(tmp / "files", std::ios::binary);
    for (const auto& f : files) list << f << '\0';
  }
  // Sorted names, no owners, one fixed time: the same worktree gives the same bytes.
  const auto tar = run_tool({"tar", "-c", "-f", (tmp / "snapshot.tar").string(), "-C", top.string(), "--null", "--no-recursion",
                             "--sort=name", "--owner=0", "--group=0", "--numeric-owner", "--mtime=@0", "--format=gnu",
                             "-T", (tmp / "files").string()},
                            top, {}, limit_bytes + (1 << 20));
  std::ifstream in(tmp / "snapshot.tar", std::ios::binary);
  WireSnapshot s;
  s.tar.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::filesystem::remove_all(tmp);
  if (!tar.ok || s.tar.size() > limit_bytes) {
    if (s.tar.size() > limit_bytes || tar.signal == SIGXFSZ) {
      throw InputError(top.string(), {}, "",
                       fmt::format("the worktree snapshot passes {} bytes (the service's snapshot_limit_mb); the largest files: {}. "
                                   "Ignore build outputs in .gitignore, or commit and push and submit the commit",
                                   limit_bytes, largest_files(top, files)));
    }
    throw InfraError("tar of the worktree failed: " + tar.what());
  }
  s.sha256 = sha256_hex(s.tar);
  const auto head = run_tool({"git", "-C", top.string(), "rev-parse", "--verify", "-q", "HEAD"}, top);
  if (head.ok) s.head = head.out.substr(0, head.out.find('\n'));
  if (figures) {
    figures->files = files.size();
    figures->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  return s;
}

}  // namespace densefeed
