// Who wrote the base an experiment's candidate is compared with (issue 26, "a
// base the agent did not write"). A speedup is a ratio: a base the agent
// wrote (a WORKTREE base, or a commit whose files differ from the trusted
// ref's) can be slowed on purpose, and equal code then
// reads as faster. Such a base still runs, but the record says so and
// promotion needs a person's acceptance of it (promote --accept-agent-base;
// the ledger's promotions trigger enforces it).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace densefeed {

enum class BaseOriginKind {
  trusted_ref,      // the trusted ref's commit, as the gate store exported it
  promoted,         // the candidate commit of an experiment promoted before (its acceptance ran)
  trusted_history,  // another commit whose files are the trusted ref's (git diff with it empty)
  agent_commits,    // a commit whose files differ from the trusted ref's: its own commits after the merge base, or a
                    // commit of the trusted ref's history (reverted since, merged with -s ours) that the agent could write
  worktree,         // WORKTREE: the checkout the agent writes in
  unjudged,         // its history could not be compared with the trusted ref's (no shared history, no trusted commit)
  unrecorded,       // recorded before densefeed judged bases (ledger version < 7)
};
const char* to_string(BaseOriginKind k);
// Throws std::invalid_argument for a name that is not a kind.
BaseOriginKind base_origin_kind_from_string(const std::string& s);

// Whether promoting an experiment with this base needs --accept-agent-base.
bool is_agent_base(BaseOriginKind k);

struct BaseOrigin {
  BaseOriginKind kind = BaseOriginKind::unrecorded;
  std::string sha;                   // the base's commit ("" for WORKTREE with uncommitted changes)
  std::string merge_base;            // with the trusted ref's commit, where known
  std::vector<std::string> changed;  // agent_commits: files its own commits change (relative to the project; at most kChangedShown)
  std::size_t changed_count = 0;     // all of them
  std::string reason;                // for people (never parsed)
};
inline constexpr std::size_t kChangedShown = 20;

// Judges the base: `revision` as the manifest names it, `sha` its resolved
// commit, `trusted_sha` the trusted ref's commit (empty when the gate store
// is the worktree, --trust-worktree). Runs read-only git
// in `dir` (the project folder); never throws for a history git cannot
// compare (unjudged, with git's reason).
BaseOrigin judge_base(const std::filesystem::path& dir, const std::string& revision, const std::string& sha, bool worktree_dirty,
                      const std::string& trusted_sha);

// A judged commit (agent_commits or trusted_history) that is the candidate of
// an experiment promoted before becomes `promoted`: `promoted_shas` sorted,
// as Ledger::promoted_candidate_shas returns them. Other kinds are left.
void credit_promoted(BaseOrigin& o, const std::vector<std::string>& promoted_shas);

// {kind, sha, merge_base, changed: [...], changed_count, reason}, and back
// (an unknown kind is unrecorded).
nlohmann::ordered_json to_json(const BaseOrigin& o);
BaseOrigin base_origin_from_json(const std::string& kind, const nlohmann::json& detail);

}  // namespace densefeed
