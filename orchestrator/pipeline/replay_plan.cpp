#include "replay_plan.h"

#include <fmt/format.h>

#include "case_filter.h"
#include "error.h"
#include "manifest.h"
#include "sha256.h"

namespace densefeed {

std::string replay_manifest(const ExperimentRecord& e, const RunOptions& options, const std::string& manifest) {
  const std::filesystem::path& ledger = options.workspace.ledger;
  const std::filesystem::path& project_dir = options.project.dir;
  if (!manifest.empty()) {
    // Another experiment's manifest would record its results against this one.
    const Manifest m = load_manifest(manifest, options.store, options.project);
    if (m.gate != e.summary.gate || m.candidate.revision != e.candidate.revision) {
      throw InputError(manifest, {}, "gate",
                       fmt::format("experiment {} ran gate {} with candidate revision {}; this manifest names gate {} and revision {}: "
                                   "a replay of it must run what it ran",
                                   e.id(), e.summary.gate, e.candidate.revision, m.gate, m.candidate.revision));
    }
    return manifest;
  }
  std::filesystem::path path = e.manifest_path;
  if (!std::filesystem::exists(path) && path.is_relative()) path = project_dir / path;
  if (!std::filesystem::exists(path) || sha256_file(path) != e.manifest_sha256) {
    throw InputError(ledger.string(), {}, fmt::format("experiment {}", e.id()),
                     fmt::format("its manifest {} is gone or changed since it ran (sha256 {}): give the manifest to replay it "
                                 "(densefeed run MANIFEST --failing-of {})",
                                 e.manifest_path, e.manifest_sha256.substr(0, 12), e.id()));
  }
  return path.string();
}

void plan_replay(const ExperimentRecord& e, const std::filesystem::path& ledger, RunOptions& options, bool seed_given, bool profile_given) {
  const std::string where = fmt::format("experiment {}", e.id());
  if (!e.gate_run) throw InputError(ledger.string(), {}, where, "it has no gate run to replay");
  if (options.cases.empty()) {
    for (const auto& c : e.gate_run->cases) {
      if (c.verdict != "green") options.cases.push_back(parse_case_filter(c.label));
    }
    if (options.cases.empty()) {
      throw InputError(ledger.string(), {}, where, "none of its cases is red: there is nothing failing to replay (--case names cases to run)");
    }
  }
  if (!seed_given) {
    try {
      options.seed = std::stoull(e.gate_run->seed);
    } catch (const std::exception&) {
      throw InputError(ledger.string(), {}, where, fmt::format("its recorded seed '{}' is not a u64", e.gate_run->seed));
    }
  }
  if (!profile_given && !e.gate_run->profile.empty()) options.profile = e.gate_run->profile;
  options.parent_id = e.id();
  if (options.step.empty()) {
    options.step = options.candidate_param_overrides.empty() ? "replay" : "replay with " + options.candidate_param_overrides.dump();
  }
}

}  // namespace densefeed
