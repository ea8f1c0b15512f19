// The trace step of execute_experiment (experiment_steps.h): where the time
// goes, for a green gate whose manifest has a trace section.
#include "experiment_steps.h"

#include "arms.h"
#include "ledger.h"
#include "revision.h"
#include "revision_build.h"
#include "trace_report.h"

namespace densefeed {
namespace {

// One row per check per arm that ran, as the ledger keeps them.
std::vector<TraceFindingRecord> trace_findings(const TraceStageResult& trace, const Manifest& m) {
  std::vector<TraceFindingRecord> findings;
  for (const auto& arm : trace.arms) {
    if (!arm.ran) continue;
    for (std::size_t i = 0; i < arm.report.results.size(); ++i) {
      const auto& r = arm.report.results[i];
      TraceFindingRecord f;
      f.arm = arm.arm;
      f.check_index = static_cast<int>(i);
      f.kind = std::string(to_string(r.check.kind));
      f.check = m.trace["checks"][i];
      f.passed = r.passed;
      f.value = r.value;
      f.bound = r.check.bound;
      f.details = trace_check_json(r);
      f.trace_file = arm.trace_file.string();
      findings.push_back(std::move(f));
    }
  }
  return findings;
}

}  // namespace

void trace_experiment(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options, ExperimentRun& run) {
  const Manifest& m = out.manifest;
  if (m.trace.is_null()) {
    out.trace_skipped = "the manifest has no trace section";
    record_skipped(ledger, out.experiment_id, "trace", out.trace_skipped);
    return;
  }
  if (out.gate_result.verdict != Verdict::green) {
    out.trace_skipped = "the gate is not green";
    record_skipped(ledger, out.experiment_id, "trace", out.trace_skipped);
    return;
  }
  // The base at its revision: the bench's build when the bench ran, else built now.
  if (m.base.revision != kWorktree) base_revision_arm(out, ledger, options, run);
  TraceStageOptions trace_options{out.work_dir, out.seed, out.candidate_arm, out.base_arm};
  trace_options.sandbox = options.sandbox;
  trace_options.limits = out.gate->limits;
  trace_options.gpus = out.gate->gpus;
  trace_options.resources = out.gate->resources.for_stage("trace");
  trace_options.executor = &run.executor;
  trace_options.readable = run.revision_dirs;
  out.trace = run_trace_stage(m.trace, out.trace_checks, out.candidate_params, out.base_params, trace_options);
  StageOutcome stage;
  stage.stage = "trace";
  stage.verdict = stage_verdict_from(to_string(out.trace->verdict));
  stage.failure = out.trace->failure;
  if (out.trace->verdict != Verdict::green && !stage.failure.failed()) stage.failure.kind = FailureKind::unknown;
  stage.reason = out.trace->reason;
  stage.wall_s = out.trace->wall_s;
  ledger.record_trace_findings(out.experiment_id, run.gate_run_id, trace_findings(*out.trace, m), stage);
  out.verdict = worst(out.verdict, out.trace->verdict);
}

}  // namespace densefeed
