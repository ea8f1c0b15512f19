// What the benchmark stage measured (bench_runner.h runs it): per bench case
// both arms' rounds, densefeed's own wall times, the sequential decision and
// the timing cross-checks that failed. Plain values: the ledger stores them,
// the printers read them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_statistics.h"
#include "case_grid.h"
#include "failure.h"
#include "sandbox.h"
#include "timing_checks.h"
#include "verdict.h"

namespace densefeed {

// Decision `d`'s guards as the ledger stores them (bench_cases.guards) and
// every printer writes them: a JSON array of their names (to_string of
// BenchGuard), in guards_of's order; [] when none held.
inline nlohmann::ordered_json guards_json(const Decision& d) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const auto g : guards_of(d)) a.push_back(to_string(g));
  return a;
}

struct BenchCaseResult {
  Case bench_case;
  std::string unit = "ms";
  std::vector<ArmRound> base;       // per round
  std::vector<ArmRound> candidate;
  Decision decision;                // verdict, speedup with its interval, p, rounds
  double threshold = 0.01;          // the noise threshold used (fraction): max(1 %, calibrated_floor)
  std::optional<double> calibrated_floor;  // the latest `bench calibrate` floor on this host, if any
  bool capped = false;              // the wall-time cap stopped it: inconclusive
  std::optional<double> predicted_speedup;  // from the manifest
  std::optional<double> prediction_error;   // measured / predicted - 1
  std::string timing = "candidate";         // who took the samples: "driver" (the gate's trusted driver) or "candidate"
  std::vector<RoundWall> base_walls;        // per round, as densefeed measured each arm's process
  std::vector<RoundWall> candidate_walls;
  std::vector<TimingFlag> flags;            // densefeed's cross-checks that failed (timing_checks.h)
  nlohmann::ordered_json checks = nlohmann::ordered_json::object();  // their figures: wall fits, work, ceilings used
  double base_warmup_s = 0, candidate_warmup_s = 0;  // each arm's warm-up call, wall seconds (checks.warmup)
  double budget_s = 0;       // the measurement budget, seconds of timed rounds (checks.budget)
  // An undecided case: rounds and seconds more the noise seen would need
  // (Decision::more_rounds at the mean round's wall time; -1: none would).
  int more_rounds = 0;
  std::optional<double> more_seconds;
};

struct BenchResult {
  // The stage itself: red when the candidate failed to run, error when the
  // base did (or could not be built). The per-case verdicts (faster, slower,
  // same, inconclusive) are in cases[i].decision.
  Verdict verdict = Verdict::green;
  std::string reason;
  Failure failure;  // the same as a value (none when green)
  std::vector<BenchCaseResult> cases;
  double harness_wall_s = 0;
  SandboxStatus sandbox;  // whether both arms' commands ran sandboxed, and if not why
  // Where its rounds ran (executor.h): "local", or the Slurm job(s) that held
  // the benchmark, "slurm job 42 on node1" (two, "; "-joined, after a retry).
  std::string placement;
  // A stop (densefeed cancel, SIGTERM/SIGINT) ended it before every case
  // decided: verdict stays green (nothing failed) and the cases hold the
  // rounds they had; the ledger records the stage `interrupted`.
  bool interrupted = false;
};

}  // namespace densefeed
