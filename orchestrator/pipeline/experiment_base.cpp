// The base arm at its revision, shared by the stages that run the base
// (experiment_steps.h base_revision_arm): one build, one context, one
// record of what its export check found.
#include "experiment_steps.h"

#include "arms.h"
#include "ledger.h"

namespace densefeed {

const RevisionBuild& base_revision_arm(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options, ExperimentRun& run) {
  if (run.base_build) return *run.base_build;
  run.base_build = build_revision(*out.gate, options.project, out.base_sha, options.workspace, options.sandbox, &run.executor);
  const RevisionBuild& b = *run.base_build;
  for (const auto& e : b.tampered) ledger.record_tamper(e);
  run.revision_dirs.push_back(b.src.parent_path());
  const auto hidden = out.base_arm.hidden;
  out.base_arm = revision_context(options.project, options.store, b, out.base_arm.python);
  out.base_arm.hidden = hidden;
  out.base_arm.cache_dir = arm_cache_dir(options.workspace, b.src.parent_path().filename().string(), "base");
  return b;
}

}  // namespace densefeed
