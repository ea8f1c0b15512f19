// The `next` field of a verdict document: the cheapest experiments that would
// narrow down why a result is what it is, derived from the result alone —
// which cases are red and along which case key, how a harness process
// failed, how wide a benchmark interval is, which trace check failed — so an
// agent changes one thing at a time instead of guessing.
//
// The derivation reads ResultFacts, a plain summary that both a fresh run
// (ExperimentOutcome) and a ledger record (Ledger::record) fill, so that
// `densefeed run --json` and `densefeed status --json` give the same advice.
#pragma once

#include "arm_context.h"
#include "base_origin.h"
#include "experiment_state.h"
#include "bench_statistics.h"
#include "experiment_record.h"
#include "failure.h"
#include "gate_spec.h"
#include "gate_structure.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace densefeed {

struct ExperimentOutcome;
struct GateSpec;

// The facts are the record's rows (experiment_record.h): a fresh run fills
// the same types from its outcome, a ledger record is them.
using MetricFact = MetricRow;
using CaseFact = GateCaseRow;
using BenchFact = BenchCaseRow;
using TraceFact = TraceFindingRow;

// A gate parameter a manifest may set, with its allowed values (null: any).
using ParamFact = ParamSpec;

struct ResultFacts {
  std::int64_t experiment_id = 0;
  ExperimentState state = ExperimentState::finished;  // the ledger's (experiment_state.h)
  std::string state_detail;        // why (interrupted, rejected, cancelled)
  std::string gate;
  std::string manifest_path;  // as the run was given it (a rerun's command names it)
  std::string gate_verdict = "pending";  // green | red | error | pending
  std::string gate_reason;
  std::vector<std::string> lock_problems;  // non-empty: red before any case ran (text for people)
  // What the candidate's tree lacks of the trusted ref's files its command
  // names (GateResult::missing_in_candidate; empty from a ledger record).
  std::vector<std::string> missing_in_candidate;
  // The gate stage's own failure (failure.h) when no case ran: a lock whose
  // metric says what (unlocked | worktree | own_commits), a build
  // (infrastructure, metric build).
  Failure gate_failure;
  bool gate_unlocked = false;              // the gate stage's failure: lock, the gate file not in gates.lock at all
  std::vector<CaseFact> cases;
  std::vector<ParamFact> params;            // declared by the gate
  // What densefeed narrow last concluded about it (a record's narrowings;
  // '' when never narrowed): a settled layer replaces the step that asks
  // for a narrowing.
  std::string narrowed_layer, narrowed_conclusion;
  GateStructure structure;                  // the gate's partition, precision and algorithm params, states (gate_structure.h)
  nlohmann::ordered_json candidate_params;  // as run (object)
  std::string bench_status;                 // measured | skipped | red | error | none
  std::string bench_reason;
  Failure bench_failure;                    // the bench stage's failure as a value (none when measured)
  std::vector<BenchFact> bench;
  std::vector<TraceFact> trace;
  std::vector<std::string> risk;             // declared risk categories
  nlohmann::ordered_json categories;         // category -> latest decision (null: none yet)
  bool has_acceptance = false;               // acceptance criteria were pre-registered
  bool promoted = false;
  // Who wrote the base (base_origin.h): an agent's base makes promotion need
  // a person's --accept-agent-base, so the step is a rerun against a base
  // the agent did not write.
  BaseOrigin base_origin;
  // To rerun one case alone (left empty when unknown).
  std::vector<std::string> candidate_command;  // the gate's argv template
  std::optional<ArmContext> candidate_arm;     // where the candidate ran from (arm_replay.h), as the gate run's provenance recorded it
  bool candidate_from_revision = false;        // a revision whose build folder is not known here
  std::string seed;                            // decimal u64
  std::filesystem::path work_dir;              // LEDGER-runs/ID
  bool sessions = false;                       // the gate's harnesses served sessions: their logs are per session, not per case
  double timeout_s = 0;                        // the gate's per-process limit, s
};

struct NextStep {
  // wait | resubmit | restore-frozen | revert-frozen | fix-build | report-reference |
  // rerun-case | fix-output | isolate-precision | isolate-value | inspect-elements |
  // inspect-case | fix-bench-mode | calibrate | rerun-bench | revise-prediction |
  // profile | trace-intervals | ask-review | trusted-base | promote | add-acceptance |
  // narrow (densefeed narrow ID: densefeed runs the narrowing itself)
  std::string kind;
  std::string suggestion;  // what to run or change, in one sentence
  std::string why;         // what its outcome tells apart
  std::string case_label;  // the case it concerns ('' = none)
  nlohmann::ordered_json set_params = nlohmann::ordered_json::object();  // candidate params of the new manifest
  std::vector<std::string> command;  // argv to run, when there is one
  nlohmann::ordered_json env = nlohmann::ordered_json::object();  // added to the environment of `command`
  std::string cwd;                   // where to run `command` ('' = anywhere)
};

// The steps, cheapest first, at most `max_steps`. Never throws.
std::vector<NextStep> next_steps(const ResultFacts& facts, std::size_t max_steps = 4);

// [{kind, suggestion, why, case?, set_params?, command?, env?, cwd?}] (empty
// fields left out); schemas/run-report.schema.json#/definitions/next.
nlohmann::ordered_json next_steps_json(const std::vector<NextStep>& steps);

// The facts of a run that has just finished (no trace, review or promotion yet).
ResultFacts facts_from_outcome(const ExperimentOutcome& outcome);

// The facts of a ledger record (Ledger::record). `gate` (may be null)
// supplies the declared parameters and the candidate command; `work_dir` is
// the experiment's run folder (LEDGER-runs/ID).
ResultFacts facts_from_record(const ExperimentRecord& record, const GateSpec* gate, const std::filesystem::path& work_dir);

}  // namespace densefeed
