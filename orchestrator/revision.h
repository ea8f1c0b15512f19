// Git revisions of densefeed's checkout: what an experiment's candidate or
// base names (a SHA, branch, tag or "HEAD~1"; "WORKTREE" is the checkout as
// it is). Read-only git commands, started through the process runner.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace densefeed {

inline constexpr const char* kWorktree = "WORKTREE";

// The full commit SHA of `revision` in the repository at `root`. Throws
// std::runtime_error with git's reason when it names no commit (or root is
// not a git checkout).
std::string resolve_revision(const std::filesystem::path& root, const std::string& revision);

// The HEAD commit of `root`, or "" when it is not a git checkout.
std::string head_commit(const std::filesystem::path& root);

// Whether the checkout has uncommitted changes to tracked files (untracked
// files ignored); false when it is not a git checkout.
bool worktree_dirty(const std::filesystem::path& root);

// Of `paths` (relative to root), those whose content at commit `sha` differs
// from densefeed's checkout as it is (`git diff --name-only SHA -- paths`):
// a candidate revision that edits a frozen file. Throws std::runtime_error
// when git fails.
std::vector<std::string> changed_at_revision(const std::filesystem::path& root, const std::string& sha,
                                             const std::vector<std::string>& paths);

// Writes the tree of commit `sha` into the empty folder `dest` (git archive,
// then tar): a clean checkout that never touches the repository's own
// worktrees. Throws std::runtime_error naming the step that failed.
void export_revision(const std::filesystem::path& root, const std::string& sha, const std::filesystem::path& dest);

}  // namespace densefeed
