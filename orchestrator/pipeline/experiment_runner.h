// The pipeline of one experiment: validate -> lock check -> gate -> (green
// only) bench -> ledger. Data flows one way; the ledger is written by the
// Ledger alone.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_runner.h"
#include "arm_context.h"
#include "environment.h"
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
};

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
};

class Ledger;
enum class ExperimentEvent;

// Runs a manifest end to end: prepare, record (state `started` by this
// run), execute, record `finished`. Throws InputError before writing anything
// to the ledger when the manifest (or the gate it names) is bad; InfraError
// when densefeed itself fails. A red or error verdict is returned, not thrown.
ExperimentOutcome run_experiment(const std::filesystem::path& manifest_path, const RunOptions& options);

// Everything that can be refused as bad input, without touching the ledger:
// the gate's lock, parameters, revisions (resolved to commits), the profile.
// Returns the outcome's inputs (experiment_id 0). Throws InputError.
ExperimentOutcome prepare_experiment(Manifest manifest, const RunOptions& options);

// Records a prepared experiment with its first event (queued by submit,
// started by a run or worker). Returns its id.
// Records the prepared experiment with `first` as its first event; judges
// its base with the ledger's promoted candidates first (prepared.base_origin:
// a base at a promoted candidate is BaseOriginKind::promoted).
std::int64_t record_prepared(Ledger& ledger, ExperimentOutcome& prepared, ExperimentEvent first, const std::string& owner);

// Runs the stages of a prepared, recorded experiment (out.experiment_id set)
// and records their results; fills `out`.
void execute_experiment(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options);

}  // namespace densefeed
