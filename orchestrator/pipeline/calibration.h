// `densefeed bench calibrate`: the base against itself (A/A), several times,
// to measure this machine's noise floor for a gate's bench cases and how
// often the decision rule calls identical code faster or slower.
#pragma once

#include <functional>
#include <optional>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_runner.h"
#include "gate_spec.h"
#include "gate_store.h"
#include "project.h"
#include "workspace.h"

namespace densefeed {

// Rounds per calibration comparison (fixed: no stopping rule).
constexpr int kCalibrationRounds = 8;

struct CalibrationCase {
  std::string case_label;
  std::vector<BenchVerdict> verdicts;  // one per A/A comparison
  std::vector<double> speedups;
  // 95th percentile (type 7) over the A/A comparisons of max(s, 1/s) - 1,
  // s being a comparison's speedup (the median round's base / candidate
  // ratio over its kCalibrationRounds rounds): a change a whole comparison
  // of the same code shows 1 time in 20, so a band of at least this is what
  // the host's noise hides (issue 29). Not one round's |ratio - 1|: the
  // paired interval already carries a round's noise, and on a loaded host a
  // single round's deviation (159% beside two CPU burners, tests/perf) made
  // a band no real speedup could leave. Not the spread of adaptive
  // comparisons either (before issue 29): those shrink with their rounds.
  double noise_floor = 0;
  double false_verdict_rate = 0;  // fraction of comparisons that ended faster or slower
};

struct CalibrationResult {
  Verdict verdict = Verdict::green;  // error when the harness failed to run
  std::string reason;
  std::vector<CalibrationCase> cases;
};

// Runs `comparisons` A/A benchmarks of `params` (seeds seed, seed+1, ...) in
// folders under work_dir, each with the gate's full sequential decision at
// the 1 % threshold; both arms run from `arm` (the worktree). `trusted` is
// the context a gate's bench.driver runs in (the reference's); required when
// the gate has one.
CalibrationResult calibrate(const GateSpec& gate, const nlohmann::ordered_json& params, int comparisons,
                            const std::filesystem::path& work_dir, std::uint64_t seed, const ArmContext& arm,
                            const std::optional<ArmContext>& trusted = std::nullopt);

// What `densefeed bench calibrate` measured and recorded for one gate.
struct CalibrationRun {
  std::string gate;
  std::string host;                   // this machine (environment.h)
  nlohmann::ordered_json params;      // the gate's parameters, resolved
  int comparisons = 0;
  std::vector<CalibrationCase> cases;  // one per bench case, each recorded in the ledger
};

struct CalibrationRequest {
  std::string gate;                 // gate name in the store
  std::vector<std::string> params;  // NAME=VALUE (a YAML scalar) per parameter; the rest the gate's defaults
  int comparisons = 10;             // A/A comparisons
  // Told before the run when `comparisons` is under 20: the 95th percentile
  // of the noise floor wants about 20 or more. May be empty.
  std::function<void(const std::string&)> warn;
};

// Checks `request.gate` against its lock in `store`, reads --param values as
// a one-line manifest arm (checked as an experiment's are), builds the
// trusted driver arm where the gate has one (trusted_arm.h), runs calibrate()
// in workspace.calibrations()/<start time in ns> and records each case's
// noise floor in the ledger at workspace.ledger. Throws InputError (the gate
// does not match its lock, declares no bench cases, or a --param is not
// NAME=VALUE or not a valid value) and InfraError (the trusted arm cannot be
// built, or a comparison's harness failed: the reason names it).
CalibrationRun calibrate_gate(const CalibrationRequest& request, const Project& project, const GateStore& store,
                              const Workspace& workspace);

}  // namespace densefeed
