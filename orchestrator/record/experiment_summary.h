// The one typed record of a recorded experiment: its state, each stage's
// outcome (verdict and typed failure) and its overall verdict, read by one
// function (Ledger::summaries) from stage_outcomes and experiment_outcomes.
// `run`, `status`, `ledger list`, `ledger show`, `next` and the MCP tools
// print this record (to_json; schemas/experiment-summary.schema.json), so
// they cannot disagree about what happened.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exit_code.h"

#include "base_origin.h"
#include "experiment_state.h"
#include "failure.h"

namespace densefeed {

// pending: not recorded yet; skipped: did not run (reason says why);
// unknown: recorded before ledger version 3 without its outcome; started:
// acceptance recorded before it runs; interrupted: killed before its end.
enum class StageVerdict { pending, green, red, error, skipped, unknown, started, interrupted };
const char* to_string(StageVerdict v);
StageVerdict stage_verdict_from(const std::string& text);  // unknown text: unknown

struct StageOutcome {
  std::string stage;  // gate | bench | trace | acceptance
  StageVerdict verdict = StageVerdict::pending;
  Failure failure;
  std::string reason;
  std::optional<double> wall_s;
  std::string recorded_at;
};

struct SpeedupSummary {
  std::string case_label;
  std::string verdict;  // faster | slower | same | inconclusive
  double speedup = 1, lo = 1, hi = 1;
};

struct ExperimentSummary {
  std::int64_t id = 0;
  std::string name, gate, author, submitted_at, profile;
  ExperimentState state = ExperimentState::recorded;  // the latest event (experiment_state.h)
  // The overall verdict: green, red, error, unknown, or pending until the
  // experiment has one (experiment_outcomes).
  std::string verdict = "pending";
  std::string verdict_stage;  // the stage that decided a verdict other than green
  std::string reason;         // why it is not green ('' when green)
  std::vector<StageOutcome> stages;  // gate, bench, trace, acceptance: always four, the latest row of each
  std::vector<SpeedupSummary> speedups;  // only when the gate and bench are green
  bool promoted = false;
  BaseOrigin base_origin;  // who wrote the base; promotion needs --accept-agent-base when is_agent_base(kind)

  const StageOutcome& stage(const std::string& name) const;
};

// {id, name, gate, author, submitted_at, profile, state, verdict,
//  verdict_stage, reason, stages: {gate|bench|trace|acceptance: {verdict,
//  failure: {kind, who, signal?, exit_code?, output?, metric?}, reason,
//  wall_s}}, speedups: [...], promoted, base_origin: {kind, sha, merge_base,
//  changed, changed_count, reason}}
nlohmann::ordered_json to_json(const ExperimentSummary& s);
nlohmann::ordered_json to_json(const Failure& f);

// The exit code of `densefeed status` and `run` for the record
// (common/exit_code.h): kExitNotEnded while it runs, kExitUsage when
// rejected, else its verdict's (an unknown or missing one: kExitError).
int exit_code_of(const ExperimentSummary& s);

}  // namespace densefeed
