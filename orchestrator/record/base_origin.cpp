#include "base_origin.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "revision.h"

namespace densefeed {

const char* to_string(BaseOriginKind k) {
  switch (k) {
    case BaseOriginKind::trusted_ref: return "trusted_ref";
    case BaseOriginKind::promoted: return "promoted";
    case BaseOriginKind::trusted_history: return "trusted_history";
    case BaseOriginKind::agent_commits: return "agent_commits";
    case BaseOriginKind::worktree: return "worktree";
    case BaseOriginKind::unjudged: return "unjudged";
    case BaseOriginKind::unrecorded: return "unrecorded";
  }
  return "unrecorded";
}

BaseOriginKind base_origin_kind_from_string(const std::string& s) {
  for (auto k : {BaseOriginKind::trusted_ref, BaseOriginKind::promoted, BaseOriginKind::trusted_history,
                 BaseOriginKind::agent_commits, BaseOriginKind::worktree, BaseOriginKind::unjudged, BaseOriginKind::unrecorded}) {
    if (s == to_string(k)) return k;
  }
  throw std::invalid_argument(fmt::format("'{}' is not a base origin", s));
}

bool is_agent_base(BaseOriginKind k) {
  return k == BaseOriginKind::agent_commits || k == BaseOriginKind::worktree || k == BaseOriginKind::unjudged;
}

BaseOrigin judge_base(const std::filesystem::path& dir, const std::string& revision, const std::string& sha, bool worktree_dirty,
                      const std::string& trusted_sha) {
  BaseOrigin o;
  o.sha = revision == kWorktree && worktree_dirty ? std::string() : sha;
  if (revision == kWorktree) {
    o.kind = BaseOriginKind::worktree;
    o.reason = "the base is WORKTREE, the checkout the agent writes in: a base the agent can slow down";
    return o;
  }
  if (trusted_sha.empty()) {
    o.kind = BaseOriginKind::unjudged;
    o.reason = "the gate store is the worktree (--trust-worktree), so there is no trusted commit to judge the base by";
    return o;
  }
  if (sha == trusted_sha) {
    o.kind = BaseOriginKind::trusted_ref;
    o.merge_base = sha;
    o.reason = "the base is the trusted ref's commit";
    return o;
  }
  std::vector<std::string> own, differ;
  try {
    o.merge_base = merge_base_of(dir, trusted_sha, sha);
    // Every file: what the kernel runs is not only the kernel's source (a
    // helper it imports, a build flag), so any difference is the agent's.
    own = changed_by_own_commits(dir, trusted_sha, sha, {"."});
    // And against the trusted ref's own files: a commit of the trusted ref's
    // history (a slowed commit later reverted, a branch merged with -s ours)
    // has no commits of its own, but its files are not the trusted ref's, and
    // the agent can write that history.
    differ = changed_between(dir, trusted_sha, sha, {"."});
  } catch (const std::runtime_error& e) {
    o.kind = BaseOriginKind::unjudged;
    o.reason = fmt::format("the base {} cannot be compared with the trusted ref: {}", sha.substr(0, 12), e.what());
    return o;
  }
  const auto& changed = own.empty() ? differ : own;
  o.changed_count = changed.size();
  o.changed.assign(changed.begin(), changed.begin() + static_cast<std::ptrdiff_t>(std::min(changed.size(), kChangedShown)));
  const std::string files = fmt::format("{} file(s): {}{}", o.changed_count, fmt::join(o.changed, ", "), o.changed_count > o.changed.size() ? ", ..." : "");
  if (differ.empty()) {
    o.kind = BaseOriginKind::trusted_history;
    o.reason = fmt::format("the base {}'s files are the trusted ref's (merge base {})", sha.substr(0, 12), o.merge_base.substr(0, 12));
  } else if (!own.empty()) {
    o.kind = BaseOriginKind::agent_commits;
    o.reason = fmt::format("the base {}'s own commits since its merge base {} with the trusted ref change {}", sha.substr(0, 12),
                           o.merge_base.substr(0, 12), files);
  } else {
    o.kind = BaseOriginKind::agent_commits;
    o.reason = fmt::format("the base {} is in the trusted ref's history but its files differ from the trusted ref's in {} (a "
                           "commit the agent could have written there, e.g. one later reverted)",
                           sha.substr(0, 12), files);
  }
  return o;
}

void credit_promoted(BaseOrigin& o, const std::vector<std::string>& promoted_shas) {
  if (o.kind != BaseOriginKind::agent_commits && o.kind != BaseOriginKind::trusted_history) return;
  if (!std::binary_search(promoted_shas.begin(), promoted_shas.end(), o.sha)) return;
  o.kind = BaseOriginKind::promoted;
  o.changed.clear();
  o.changed_count = 0;
  o.reason = "the base is the candidate of an experiment promoted before (its acceptance passed)";
}

nlohmann::ordered_json to_json(const BaseOrigin& o) {
  return {{"kind", to_string(o.kind)}, {"sha", o.sha}, {"merge_base", o.merge_base}, {"changed", o.changed},
          {"changed_count", o.changed_count}, {"reason", o.reason}};
}

BaseOrigin base_origin_from_json(const std::string& kind, const nlohmann::json& detail) {
  BaseOrigin o;
  try {
    o.kind = base_origin_kind_from_string(kind);
  } catch (const std::invalid_argument&) {
    o.kind = BaseOriginKind::unrecorded;
  }
  if (detail.is_object()) {
    o.sha = detail.value("sha", "");
    o.merge_base = detail.value("merge_base", "");
    o.changed = detail.value("changed", std::vector<std::string>{});
    o.changed_count = detail.value("changed_count", o.changed.size());
    o.reason = detail.value("reason", "");
  }
  return o;
}

}  // namespace densefeed
