#include "revision.h"

#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "process_runner.h"

namespace densefeed {
namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

std::string resolve_revision(const std::filesystem::path& root, const std::string& revision) {
  // "--end-of-options" keeps a revision such as "--output=x" from being read as an option.
  const auto out = capture_output({"git", "-C", root.string(), "rev-parse", "--verify", "--quiet", "--end-of-options",
                                   revision + "^{commit}"},
                                  root);
  if (!out || first_line(*out).size() != 40) {
    throw std::runtime_error(fmt::format("'{}' names no commit in the git repository at {}", revision, root.string()));
  }
  return first_line(*out);
}

std::string head_commit(const std::filesystem::path& root) {
  const auto out = capture_output({"git", "-C", root.string(), "rev-parse", "--verify", "--quiet", "HEAD"}, root);
  return out ? first_line(*out) : "";
}

bool worktree_dirty(const std::filesystem::path& root) {
  const auto out = capture_output({"git", "-C", root.string(), "status", "--porcelain", "--untracked-files=no"}, root);
  return out && !out->empty();
}

std::vector<std::string> changed_at_revision(const std::filesystem::path& root, const std::string& sha,
                                             const std::vector<std::string>& paths) {
  if (paths.empty()) return {};
  std::vector<std::string> argv = {"git", "-C", root.string(), "diff", "--name-only", "--no-renames", sha, "--"};
  argv.insert(argv.end(), paths.begin(), paths.end());
  const auto out = capture_output(argv, root);
  if (!out) throw std::runtime_error(fmt::format("git diff of {} against the checkout at {} failed", sha, root.string()));
  std::vector<std::string> changed;
  std::istringstream lines(*out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) changed.push_back(line);
  }
  return changed;
}

void export_revision(const std::filesystem::path& root, const std::string& sha, const std::filesystem::path& dest) {
  std::filesystem::create_directories(dest);
  const auto tar = dest.parent_path() / (dest.filename().string() + ".tar");
  if (!capture_output({"git", "-C", root.string(), "archive", "--format=tar", "-o", tar.string(), sha}, root)) {
    throw std::runtime_error(fmt::format("git archive of {} failed", sha));
  }
  const bool extracted = capture_output({"tar", "-xf", tar.string(), "-C", dest.string()}, dest).has_value();
  std::error_code ec;
  std::filesystem::remove(tar, ec);
  if (!extracted) throw std::runtime_error(fmt::format("extracting {} into {} failed", sha, dest.string()));
}

}  // namespace densefeed
