// Git revisions of a project: what an experiment's candidate or base names
// (a SHA, branch, tag or "HEAD~1"; "WORKTREE" is the project as checked out).
// Read-only git commands, started through the process runner. `dir` is the
// project folder; paths are relative to it (the project may sit in a
// subfolder of its repository).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace densefeed {

inline constexpr const char* kWorktree = "WORKTREE";

// The full commit SHA of `revision` in the repository holding `dir`. Throws
// std::runtime_error with git's reason when it names no commit (or dir is in
// no git repository).
std::string resolve_revision(const std::filesystem::path& dir, const std::string& revision);

// The HEAD commit of the repository holding `dir`, or "" outside git.
std::string head_commit(const std::filesystem::path& dir);

// Whether tracked files under `dir` have uncommitted changes (untracked files
// ignored); false outside git.
std::vector<std::string> uncommitted_files(const std::filesystem::path& dir);
inline bool worktree_dirty(const std::filesystem::path& dir) { return !uncommitted_files(dir).empty(); }

// Of `paths` (relative to dir), those that the candidate's own commits
// change: `git diff --name-only $(git merge-base TRUSTED SHA) SHA -- paths`.
// A branch made before a change on the trusted ref is not blamed for it.
// Throws std::runtime_error when git fails or the two share no history.
std::vector<std::string> changed_by_own_commits(const std::filesystem::path& dir, const std::string& trusted_sha,
                                                const std::string& sha, const std::vector<std::string>& paths);

// The merge base of two commits (`git merge-base A B`). Throws
// std::runtime_error when they share no history.
std::string merge_base_of(const std::filesystem::path& dir, const std::string& a, const std::string& b);

// The files (relative to `dir`, under `paths`) whose content differs between
// commits `a` and `b` (git diff --name-only --no-renames --relative a b),
// whatever history lies between them. Throws std::runtime_error when git
// fails (an unknown commit).
std::vector<std::string> changed_between(const std::filesystem::path& dir, const std::string& a, const std::string& b,
                                         const std::vector<std::string>& paths);

// Writes the tree of the project folder `prefix` ("" or "sub/dir/", relative
// to the top of the repository `repo_top`) at commit `sha` into the empty
// folder `dest` (git archive SHA:PREFIX run at the top, then tar): a clean
// export of the project only, that never touches the repository's worktrees.
// Throws std::runtime_error naming the step that failed.
void export_revision(const std::filesystem::path& repo_top, const std::string& prefix, const std::string& sha,
                     const std::filesystem::path& dest);

}  // namespace densefeed
