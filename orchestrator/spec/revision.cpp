#include "revision.h"

#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "process_runner.h"
#include "text_lines.h"

namespace densefeed {

std::string resolve_revision(const std::filesystem::path& dir, const std::string& revision) {
  // "--end-of-options" keeps a revision such as "--output=x" from being read as an option.
  const auto out = capture_output({"git", "-C", dir.string(), "rev-parse", "--verify", "--quiet", "--end-of-options",
                                   revision + "^{commit}"},
                                  dir);
  if (!out || first_line(*out).size() != 40) {
    throw std::runtime_error(fmt::format("'{}' names no commit in the git repository at {}", revision, dir.string()));
  }
  return first_line(*out);
}

std::string head_commit(const std::filesystem::path& dir) {
  const auto out = capture_output({"git", "-C", dir.string(), "rev-parse", "--verify", "--quiet", "HEAD"}, dir);
  return out ? first_line(*out) : "";
}

std::vector<std::string> uncommitted_files(const std::filesystem::path& dir) {
  const auto out = capture_output({"git", "-C", dir.string(), "status", "--porcelain", "--untracked-files=no", "--", "."}, dir);
  std::vector<std::string> files;
  if (!out) return files;
  for (const auto& line : nonempty_lines(*out)) {
    if (line.size() > 3) files.push_back(line.substr(3));
  }
  return files;
}

std::string merge_base_of(const std::filesystem::path& dir, const std::string& a, const std::string& b) {
  const auto base = capture_output({"git", "-C", dir.string(), "merge-base", a, b}, dir);
  if (!base || first_line(*base).size() != 40) {
    throw std::runtime_error(fmt::format("{} shares no history with the trusted ref's commit {}", b.substr(0, 12), a.substr(0, 12)));
  }
  return first_line(*base);
}

std::vector<std::string> changed_by_own_commits(const std::filesystem::path& dir, const std::string& trusted_sha,
                                                const std::string& sha, const std::vector<std::string>& paths) {
  if (paths.empty()) return {};
  const std::string base = merge_base_of(dir, trusted_sha, sha);
  std::vector<std::string> argv = {"git", "-C", dir.string(), "diff", "--name-only", "--no-renames", "--relative",
                                   base, sha, "--"};
  argv.insert(argv.end(), paths.begin(), paths.end());
  const auto out = capture_output(argv, dir);
  if (!out) throw std::runtime_error(fmt::format("git diff of {} against its merge base failed", sha.substr(0, 12)));
  return nonempty_lines(*out);
}

std::vector<std::string> changed_between(const std::filesystem::path& dir, const std::string& a, const std::string& b,
                                         const std::vector<std::string>& paths) {
  if (paths.empty()) return {};
  std::vector<std::string> argv = {"git", "-C", dir.string(), "diff", "--name-only", "--no-renames", "--relative", a, b, "--"};
  argv.insert(argv.end(), paths.begin(), paths.end());
  const auto out = capture_output(argv, dir);
  if (!out) throw std::runtime_error(fmt::format("git diff of {} against {} failed", b.substr(0, 12), a.substr(0, 12)));
  return nonempty_lines(*out);
}

void export_revision(const std::filesystem::path& dir, const std::string& prefix, const std::string& sha,
                     const std::filesystem::path& dest) {
  std::filesystem::create_directories(dest);
  const auto tar = dest.parent_path() / (dest.filename().string() + ".tar");
  const std::string tree = prefix.empty() ? sha : sha + ":" + prefix.substr(0, prefix.size() - 1);
  if (!capture_output({"git", "-C", dir.string(), "archive", "--format=tar", "-o", tar.string(), tree}, dir,
                      std::chrono::minutes(10))) {
    throw std::runtime_error(fmt::format("git archive of {} failed (is '{}' in that commit?)", sha.substr(0, 12),
                                         prefix.empty() ? "." : prefix));
  }
  const bool extracted = capture_output({"tar", "-xf", tar.string(), "-C", dest.string()}, dest, std::chrono::minutes(10)).has_value();
  std::error_code ec;
  std::filesystem::remove(tar, ec);
  if (!extracted) throw std::runtime_error(fmt::format("extracting {} into {} failed", sha.substr(0, 12), dest.string()));
}

}  // namespace densefeed
