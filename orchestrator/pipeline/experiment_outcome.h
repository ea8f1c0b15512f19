// The values of one experiment's run: what it is given (RunOptions) and
// what it found (ExperimentOutcome). Their own header so that the steps of
// execute_experiment (experiment_steps.h) read them without including the
// runner.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_runner.h"
#include "arm_context.h"
#include "case_filter.h"
#include "environment.h"
#include "executor_factory.h"
#include "experiment_record.h"
#include "gate_runner.h"
#include "gate_spec.h"
#include "gate_store.h"
#include "manifest.h"
#include "project.h"
#include "provenance.h"
#include "trace_checks.h"
#include "trace_stage.h"
#include "workspace.h"

namespace densefeed {

struct ExperimentOutcome;

struct RunOptions {
  Project project;      // the user's repository and its densefeed.yaml
  GateStore store;      // the gates, lock and frozen files this run trusts
  Workspace workspace;  // the ledger and what is written next to it
  std::string profile = "quick";
  std::optional<std::uint64_t> seed;  // drawn fresh (std::random_device) when absent
  int jobs = 1;
  bool bench = true;
  std::vector<std::string> gpus;  // CUDA_VISIBLE_DEVICES values for the gate's case jobs; empty: CPU
  // Candidate and base commands (and revision builds) under bwrap when it
  // can start (sandbox.h); false: --no-sandbox.
  bool sandbox = true;
  // What runs every job of the run (executor.h): the gate's cases, the
  // bench's allocation, sessions, traces, revision builds. The CLI's
  // --executor (executor_factory.h make_executor); a test passes a fake.
  std::shared_ptr<Executor> executor = make_local_executor();
  // The bench's measurement budget per case, seconds, in place of the
  // gate's bench.max_seconds_per_case (run --bench-seconds); unset: the gate's.
  std::optional<double> bench_budget_s;
  // Told after each arm's warm-up and each paired round of the bench (a
  // terminal's progress line); the run folder's progress.jsonl gets them too.
  std::function<void(const BenchProgress&)> on_bench_progress;
  // Told as the gate starts, as each of its processes ends and as each
  // stage ends (run_progress.h); the run folder's progress.jsonl gets them too.
  std::function<void(const RunProgress&)> on_progress;
  // Told once the experiment is recorded and before any stage runs (its id,
  // gate and arms are known): a terminal prints the report's header then.
  std::function<void(const ExperimentOutcome&)> on_started;
  // run --case (issue 30): only the profile's cases (and bench cases) one of
  // these matches; empty: all of them. Recorded with the experiment.
  std::vector<CaseFilter> cases;
  // The experiment this one replays or narrows (run --failing-of ID,
  // densefeed narrow) and the step it is of it ("replay", "rerun 2 of 3",
  // ...); recorded as experiments.parent_id and step.
  std::optional<std::int64_t> parent_id;
  std::string step;
  // run --failing-of ID --candidate-param K=V: candidate params set over the
  // manifest's for this replay (validated against the gate's params as the
  // manifest's are; the record keeps the params as run).
  nlohmann::ordered_json candidate_param_overrides = nlohmann::ordered_json::object();
  // densefeed narrow's commit bisection: the candidate at this revision (a
  // commit sha) in place of the manifest's; '' = the manifest's.
  std::string candidate_revision;
  // false: no trace stage (densefeed narrow's steps judge the gate only).
  bool trace = true;
  // Replays and densefeed narrow's steps: a revision candidate's compile
  // cache is an empty one of this experiment's own (never its revision's,
  // which holds what the first run wrote), so that nothing a candidate
  // wrote there tells it a rerun from a first run.
  bool isolated_candidate_cache = false;
};

// Whether the run is of its gate's whole profile: neither --case nor a
// replay or narrowing step of another experiment. Only such a run gets a
// benchmark (experiment_bench.cpp) and a promotion (promotion.cpp reads
// the same from the record: parent_id, case_filter).
inline bool runs_whole_profile(const RunOptions& options) { return options.cases.empty() && !options.parent_id; }

struct ExperimentOutcome {
  std::int64_t experiment_id = 0;
  Manifest manifest;
  std::optional<GateSpec> gate;  // absent when the gate file itself failed its lock
  nlohmann::ordered_json candidate_params;
  nlohmann::ordered_json base_params;
  std::string gate_sha256;
  std::vector<std::string> lock_problems;  // non-empty: red before any case ran
  bool gate_unlocked = false;              // a trusted file (the gate, one it freezes) is not in gates.lock at all
  Provenance provenance;
  std::string profile;
  std::uint64_t seed = 0;
  std::string candidate_sha;  // the commit (for WORKTREE: HEAD, see worktree_dirty)
  std::string base_sha;
  bool worktree_dirty = false;
  BaseOrigin base_origin;     // who wrote the base (judged by prepare, with the ledger's promotions by record_prepared)
  std::filesystem::path candidate_bin;  // a revision's harness folder; empty for WORKTREE
  // Where each arm's commands run from: the reference from the gate store;
  // WORKTREE arms from the project folder (set by prepare); revision arms
  // from their build (set by execute once built).
  ArmContext reference_arm;
  ArmContext candidate_arm;
  ArmContext base_arm;
  GateResult gate_result;
  std::optional<BenchResult> bench;  // set only when the gate was green
  Environment environment;            // collected when the bench runs
  std::string bench_skipped;          // why the bench did not run
  std::vector<TraceCheck> trace_checks;  // the manifest's, parsed when it was prepared
  std::optional<TraceStageResult> trace; // set only when the gate was green and the manifest has a trace section
  std::string trace_skipped;             // why the trace stage did not run
  std::string executor = "local";     // Executor::name() of what ran its jobs (RunOptions::executor)
  Verdict verdict = Verdict::green;   // gate verdict, then the bench's if it failed to run
  std::filesystem::path work_dir;     // harness folders and logs
  // Whether untrusted commands ran sandboxed: on, off (--no-sandbox), or
  // unavailable with bwrap's reason (the report warns once).
  SandboxStatus sandbox;
  double wall_s = 0;
  // The ledger's typed record of the experiment (experiment_record.h), read
  // back once it is finished (run_experiment): what the report's verdict,
  // exit code and JSON document say.
  std::optional<ExperimentRecord> record;
  // RunOptions::parent_id, step and cases (their texts), as recorded.
  std::optional<std::int64_t> parent_id;
  std::string step;
  std::vector<std::string> case_filter;
  // The candidate as run is the base (a replay's --candidate-param made it
  // so): the bench stage is skipped, saying why.
  bool bench_is_noise = false;
};

}  // namespace densefeed
