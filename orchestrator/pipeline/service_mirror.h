// The service's own clone of a project's repository (ServiceConfig::mirror()):
// candidates are fetched into it read-only from the configured repository,
// a snapshot of an agent's worktree becomes a commit in it, and the trusted
// ref and the project's configuration are always its own — never read from
// where an agent writes. Git runs through the process runner with
// safe.directory=* (the repository belongs to another user) and no prompts.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>

#include "service_config.h"
#include "service_wire.h"

namespace densefeed {

class ServiceMirror {
 public:
  explicit ServiceMirror(ServiceConfig config);

  // Clones the repository on first use; fetches its branches (as
  // refs/remotes/origin/*) and tags; points the trusted branch and the
  // checkout (detached) at the repository's trusted ref. Throws InfraError
  // naming the git step that failed, or InputError (the service's config
  // file, field trusted_ref) when the trusted ref's densefeed.yaml names
  // another trusted ref or is missing.
  void refresh();

  // The commit `revision` names in the fetched repository: a branch of the
  // repository, a tag, a commit SHA, or "HEAD"/"HEAD~N" relative to
  // `agent_head` (the agent's checkout's HEAD, '' when unknown). Throws
  // InputError naming `file` and `field` when it names none.
  std::string resolve(const std::string& revision, const std::string& agent_head, const std::string& file,
                      const std::string& field);

  // Makes `snapshot` (a tar archive of a worktree) a commit whose parent is
  // the agent's HEAD when the repository has it, else the trusted ref's
  // commit; kept reachable as refs/densefeed/snapshots/SHA. `work` is an
  // empty scratch folder. Throws InputError (field "snapshot") when tar
  // refuses the archive, InfraError when git fails.
  std::string commit_snapshot(const WireSnapshot& snapshot, const std::filesystem::path& work, const std::string& who);

  // The manifest text with candidate.revision and base.revision replaced by
  // the commits they name (WORKTREE: `snapshot_commit`), everything else
  // byte for byte. Throws InputError naming `path` and the field: YAML that
  // does not parse, a WORKTREE candidate without a snapshot, a WORKTREE
  // base (the base is a commit the service fetches), a revision that names
  // no commit.
  std::string pin_manifest(const std::string& text, const std::string& path, const std::string& snapshot_commit,
                           const std::string& agent_head);

  const ServiceConfig& config() const { return config_; }

 private:
  ServiceConfig config_;
  std::mutex git_;  // one git command at a time in the clone
};

}  // namespace densefeed
