// The one typed record of an experiment as the ledger holds it: the manifest
// it ran, its state and events, every stage's outcome (experiment_summary.h),
// the gate's cases with their metrics, the benchmark's cases with their
// decision and guards, the trace findings, the acceptance runs, the reviews
// and the promotion. Ledger::record(id) fills it (store/ledger_record.cpp:
// the one place rows become values); the verdict document that `run --json`,
// `status --json` and `ledger show --json` print (experiment_document.h), the
// next steps (next_steps.h) and the trend tables read it and nothing else.
// Plain values; numbers the ledger left NULL are NaN (doubles) or nullopt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_statistics.h"
#include "environment.h"
#include "experiment_summary.h"
#include "failure.h"

namespace densefeed {

// One output's metric of one gate case (gate_metrics).
struct MetricRow {
  std::string output;
  std::string metric;  // rel_l2 | max_abs | elementwise | max_ulp
  double value = 0;    // NaN when undefined (NaN/Inf in the output)
  double bound = 0;
  bool passed = true;
  std::uint64_t violations = 0;          // elements beyond an elementwise bound
  std::vector<std::size_t> worst_index;  // multi-index of the largest |candidate - reference|
  std::optional<std::int64_t> first_failing_slice;  // along the output's partition axis
};

// One case of the gate run (gate_cases).
struct GateCaseRow {
  std::size_t index = 0;          // position in the profile: the run folder candidate-NNN
  std::string label;              // "regime=long-memory T=8192 shards=64"
  nlohmann::ordered_json values;  // the case as an object
  std::string verdict;            // green | red | error
  std::string reason;             // for people only: never parsed
  Failure failure;                // how it failed, as a value (the rules read this)
  std::vector<MetricRow> metrics;  // every output's
  std::optional<std::int64_t> parts;  // parts its work was cut into (gate_result.h CaseResult::parts); unset: unknown
};

// The gate run (gate_runs); absent until the gate stage recorded one.
struct GateRunRow {
  std::string gate;                 // the gate's name as run
  std::string verdict = "pending";  // green | red | error
  std::string reason;
  std::string profile;
  std::string seed;                        // decimal u64
  std::string gate_sha256;                 // of the gate file as run
  std::vector<std::string> lock_problems;  // non-empty: red before any case ran (text for people)
  nlohmann::ordered_json provenance;       // provenance.h provenance_json, as recorded (null: none)
  std::optional<double> wall_s;            // the whole stage, seconds
  std::string sandbox;                     // how the harnesses were confined ('': not recorded)
  std::vector<GateCaseRow> cases;          // in profile order
};

// One interleaved round of a bench case: each arm's samples, in ms.
struct BenchRoundSamples {
  std::vector<double> base_ms, candidate_ms;
};

// One bench case (bench_cases): the decision and its figures.
struct BenchCaseRow {
  std::string label;
  std::string verdict;  // faster | slower | same | inconclusive
  std::string reason;   // the decision in words (bench_statistics.h Decision::reason): for people only, never parsed
  double speedup = 1, lo = 1, hi = 1;  // base time / candidate time and its interval (NaN: none)
  double threshold = 0.01;             // noise threshold (fraction)
  bool capped = false;                 // the wall-time cap ended it
  std::int64_t rounds = 0;
  std::optional<double> predicted_speedup;
  std::optional<double> prediction_error;  // measured / predicted - 1
  // The guards that held the decision back (bench_statistics.h BenchGuard);
  // nullopt for a case recorded before the ledger kept them (version 8).
  std::optional<std::vector<BenchGuard>> guards;
  double base_spread = 0, candidate_spread = 0;  // each arm's IQR / median (fraction; NaN: none)
  std::string unit = "ms";
  double ci_confidence = 0;  // the interval's confidence at the look that decided (fraction)
  double p_value = 1;
  double base_median = 0, candidate_median = 0;  // in unit (NaN: none)
  std::string timing = "candidate";  // who took the samples: driver (the gate's trusted driver) or candidate
  nlohmann::ordered_json timing_flags = nlohmann::ordered_json::array();   // timing_checks.h flags, as recorded
  nlohmann::ordered_json timing_checks = nlohmann::ordered_json::object();  // their figures, as recorded
  std::vector<BenchRoundSamples> samples;  // per round, in order (rounds_json)
  // Each arm's warm-up call, wall seconds (timing_checks.warmup; unset for
  // a case recorded before issue 29 kept them).
  std::optional<double> base_warmup_s, candidate_warmup_s;
  // The measurement budget (seconds of timed rounds) and, for an undecided
  // case, the rounds and seconds more the noise seen would need
  // (timing_checks.budget; more_rounds -1: none would; unset: not recorded).
  std::optional<double> budget_s;
  std::optional<std::int64_t> more_rounds;
  std::optional<double> more_seconds;
};

// One trace check's finding on one arm (trace_findings).
struct TraceFindingRow {
  std::string arm;         // candidate | base
  std::int64_t index = 0;  // position in the manifest's trace checks
  std::string kind;        // overlap | exposed | share
  bool passed = true;
  std::optional<double> value, bound;
  nlohmann::ordered_json details;  // the intervals involved (µs from the trace's start)
  nlohmann::ordered_json check;    // the check as the manifest wrote it
  std::string trace_file;
};

// One acceptance run (acceptance_runs, with its criteria).
struct AcceptanceRow {
  std::int64_t id = 0;     // acceptance_runs.id
  std::string started_at;  // UTC, ISO 8601
  std::string verdict;  // green | red | error | started | interrupted
  std::string reason;
  nlohmann::ordered_json criteria = nlohmann::ordered_json::array();  // [{criterion, statistic, lhs, rhs, passed}]
};

// One event of the experiment (experiment_events), oldest first.
struct EventRow {
  std::string event;  // experiment_state.h ExperimentEvent's name
  std::string owner, owner_host;
  std::optional<std::int64_t> owner_pid;
  std::string detail;  // why (interrupted, rejected, cancelled): for people only
  std::string at;      // UTC, ISO 8601
};

// One review decision (reviews), oldest first.
struct ReviewRow {
  std::string category, decision, reviewer, note;  // decision: accept | reject
  std::string reviewed_at;                         // UTC, ISO 8601
};

// An arm as the manifest named it and the run resolved it.
struct ArmRow {
  std::string revision;  // as written (WORKTREE, a ref, a sha)
  std::string sha;       // the commit it resolved to ('' for a worktree)
  nlohmann::ordered_json params = nlohmann::ordered_json::object();
};

// What densefeed narrow concluded (narrowings; pipeline/narrow.h).
struct NarrowingRow {
  std::string layer;       // precision-of-partitioning | precision | partitioned-algorithm | commit | input-regime | nondeterminism | algorithm-or-inputs | undetermined
  std::string conclusion;  // the sentence, for people
  nlohmann::ordered_json result = nlohmann::ordered_json::object();  // schemas/narrow.schema.json
  std::string recorded_at;
};

struct ExperimentRecord {
  ExperimentSummary summary;  // id, name, gate, state, verdict, every stage's outcome, base_origin
  std::string manifest_path, manifest_sha256, author, hypothesis, predicted_effect;
  ArmRow candidate, base;
  std::vector<std::string> risk;  // declared risk categories
  bool has_acceptance = false;    // acceptance criteria were pre-registered in the manifest
  // The manifest's acceptance section as recorded (command, criteria,
  // statistic; null: none): what promote runs.
  nlohmann::ordered_json acceptance;
  std::vector<EventRow> events;
  std::optional<GateRunRow> gate_run;
  std::vector<BenchCaseRow> bench_cases;
  std::vector<TraceFindingRow> trace_findings;
  std::vector<AcceptanceRow> acceptance_runs;  // oldest first
  std::vector<ReviewRow> reviews;  // oldest first
  nlohmann::ordered_json categories = nlohmann::ordered_json::object();  // category -> latest decision ("none": not yet)
  nlohmann::ordered_json promotion;                                      // null, or {id, promoted_by, promoted_at}
  // Issue 30: the experiment this one replays or narrows (run --failing-of,
  // densefeed narrow) and which step of it this is; the run's --case filters
  // (empty: every case of its profile); the experiments that replay or
  // narrow this one, {id, step}, oldest first.
  std::optional<std::int64_t> parent_id;
  std::string step;
  std::vector<std::string> case_filter;
  std::vector<std::pair<std::int64_t, std::string>> children;
  std::vector<NarrowingRow> narrowings;  // densefeed narrow's conclusions about it, oldest first
  // The machine and build its benchmark ran on (environments, the latest
  // row); nullopt: no benchmark was recorded. `clocks`: the SM clocks the
  // harnesses reported, MHz, as recorded ({} when none).
  std::optional<Environment> environment;
  nlohmann::ordered_json clocks = nlohmann::ordered_json::object();

  std::int64_t id() const { return summary.id; }
  // The manifest's acceptance criteria as written, before any result (empty: none).
  nlohmann::ordered_json acceptance_criteria() const {
    return acceptance.is_object() && acceptance.contains("criteria") && acceptance["criteria"].is_array() ? acceptance["criteria"]
                                                                                                            : nlohmann::ordered_json::array();
  }
  // The gate run's verdict, or "pending" when there is none yet.
  std::string gate_verdict() const { return gate_run ? gate_run->verdict : "pending"; }
};

}  // namespace densefeed
