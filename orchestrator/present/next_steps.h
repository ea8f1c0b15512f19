// The `next` field of a verdict document: the cheapest experiments that would
// narrow down why a result is what it is, derived from the result alone —
// which cases are red and along which case key, how a harness process
// failed, how wide a benchmark interval is, which trace check failed — so an
// agent changes one thing at a time instead of guessing.
//
// The derivation reads ResultFacts, a plain summary that both a fresh run
// (ExperimentOutcome) and a ledger record (Ledger::show) fill, so that
// `densefeed run --json` and `densefeed status --json` give the same advice.
#pragma once

#include "arm_context.h"
#include "base_origin.h"
#include "experiment_state.h"
#include "bench_statistics.h"
#include "failure.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace densefeed {

struct ExperimentOutcome;
struct GateSpec;

struct MetricFact {
  std::string output;
  std::string metric;  // rel_l2 | max_abs | elementwise | max_ulp
  double value = 0;    // NaN when undefined (NaN/Inf in the output)
  double bound = 0;
  bool passed = true;
  std::uint64_t violations = 0;  // elements beyond an elementwise bound
  std::vector<std::size_t> worst_index;  // multi-index of the largest |candidate - reference|
  std::optional<std::int64_t> first_failing_slice;  // along the output's partition axis
};

struct CaseFact {
  std::size_t index = 0;          // position in the profile: the run folder candidate-NNN
  std::string label;              // "regime=long-memory T=8192 shards=64"
  nlohmann::ordered_json values;  // the case as an object
  std::string verdict;            // green | red | error
  std::string reason;                // for people only: never parsed
  Failure failure;                   // how it failed, as a value (the rules read this)
  std::vector<MetricFact> metrics;  // every output's
};

struct BenchFact {
  std::string label;
  std::string verdict;  // faster | slower | same | inconclusive
  std::string reason;   // the decision in words (bench_statistics.h Decision::reason): for people only, never parsed
  double speedup = 1, lo = 1, hi = 1;  // base time / candidate time and its interval
  double threshold = 0.01;             // noise threshold (fraction)
  bool capped = false;                 // the wall-time cap ended it
  std::int64_t rounds = 0;
  std::optional<double> predicted_speedup;
  std::optional<double> prediction_error;  // measured / predicted - 1
  // The guards that held the decision back (bench_statistics.h BenchGuard);
  // nullopt for a case recorded before the ledger kept them (version 8).
  std::optional<std::vector<BenchGuard>> guards;
  double base_spread = 0, candidate_spread = 0;  // each arm's IQR / median (fraction)
};

struct TraceFact {
  std::string arm;  // candidate | base
  std::int64_t index = 0;  // position in the manifest's trace checks
  std::string kind;        // overlap | exposed | share
  bool passed = true;
  std::optional<double> value, bound;
  nlohmann::ordered_json details;  // the intervals involved (µs from the trace's start)
};

// A gate parameter a manifest may set, with its allowed values (null: any).
struct ParamFact {
  std::string name;
  nlohmann::ordered_json enum_values;
};

struct ResultFacts {
  std::int64_t experiment_id = 0;
  ExperimentState state = ExperimentState::finished;  // the ledger's (experiment_state.h)
  std::string state_detail;        // why (interrupted, rejected, cancelled)
  std::string gate;
  std::string gate_verdict = "pending";  // green | red | error | pending
  std::string gate_reason;
  std::vector<std::string> lock_problems;  // non-empty: red before any case ran (text for people)
  // The gate stage's own failure (failure.h) when no case ran: a lock whose
  // metric says what (unlocked | worktree | own_commits), a build
  // (infrastructure, metric build).
  Failure gate_failure;
  bool gate_unlocked = false;              // the gate stage's failure: lock, the gate file not in gates.lock at all
  std::vector<CaseFact> cases;
  std::vector<ParamFact> params;            // declared by the gate
  nlohmann::ordered_json candidate_params;  // as run (object)
  std::string bench_status;                 // measured | skipped | red | error | none
  std::string bench_reason;
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
  // profile | trace-intervals | ask-review | trusted-base | promote | add-acceptance
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

// The facts of a ledger record (Ledger::show). `gate` (may be null) supplies
// the declared parameters and the candidate command; `work_dir` is the
// experiment's run folder (LEDGER-runs/ID).
ResultFacts facts_from_record(const nlohmann::ordered_json& record, const GateSpec* gate,
                              const std::filesystem::path& work_dir);

}  // namespace densefeed
