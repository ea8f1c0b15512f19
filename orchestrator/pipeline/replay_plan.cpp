#include "replay_plan.h"

#include <fmt/format.h>

#include "case_filter.h"
#include "error.h"
#include "gate_spec.h"
#include "gate_store.h"
#include "manifest.h"
#include "sha256.h"

namespace densefeed {

std::string replay_manifest(const ExperimentRecord& e, const RunOptions& options, const std::string& manifest) {
  const std::filesystem::path& ledger = options.workspace.ledger;
  const std::filesystem::path& project_dir = options.project.dir;
  if (!manifest.empty()) {
    // Another experiment's manifest would record its results against this one.
    const Manifest m = load_manifest(manifest, options.store, options.project);
    if (m.gate != e.summary.gate || m.candidate.revision != e.candidate.revision || m.candidate.params != e.candidate.params) {
      throw InputError(manifest, {}, m.gate != e.summary.gate ? "gate" : "candidate",
                       fmt::format("experiment {} ran gate {} with candidate revision {} and params {}; this manifest names gate {}, "
                                   "revision {} and params {}: a replay of it must run what it ran",
                                   e.id(), e.summary.gate, e.candidate.revision, e.candidate.params.dump(), m.gate, m.candidate.revision,
                                   m.candidate.params.dump()));
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
  // A replay under another gate file tells nothing of this experiment.
  if (!e.gate_run->gate_sha256.empty()) {
    const GateSpec gate = load_gate(options.store, e.summary.gate);
    if (sha256_file(gate.file) != e.gate_run->gate_sha256) {
      throw InputError(ledger.string(), {}, where,
                       fmt::format("its gate file {} changed since it ran (sha256 {} then): run the manifest again instead", gate.file.string(),
                                   e.gate_run->gate_sha256.substr(0, 12)));
    }
  }
  options.isolated_candidate_cache = true;
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
