// The pieces of run_bench (bench_runner.h), in the order it takes them for
// each bench case: the case started (its threshold, reference, input-set
// pool), its paired rounds (bench_round.cpp: both arms, ABBA order), the
// guards after each round (decided, or capped), the case decided with
// densefeed's own cross-checks of its timings (bench_case.cpp). What the
// cases of one run_bench share is a BenchRun; one case while its rounds run
// is a BenchCaseRun.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_result.h"
#include "bench_options.h"
#include "gate_spec.h"
#include "harness_command.h"
#include "bench_statistics.h"
#include "executor.h"
#include "session.h"
#include "timing_checks.h"

namespace densefeed {

class Executor;

// One arm's round as it was launched: by the benchmark's allocation, or as
// a request to the arm's session.
struct ArmLaunch {
  LaunchResult ran;
  std::string session_failure;  // why the session's request failed ('' = answered ok, or no session)
  SessionAnswer answer;         // a session's answer: where its files went, their hashes
};

// Runs one arm's round (bench_runner.cpp: the allocation, or the arm's
// session): `call` as built for the round (harness_command.h), its
// iterations.
using ArmRunner = std::function<ArmLaunch(const HarnessCall& call, bool is_base, int iters)>;

struct BenchRun {
  const GateSpec& gate;
  const nlohmann::ordered_json& base_params;
  const nlohmann::ordered_json& candidate_params;
  const BenchOptions& options;
  std::string executor;    // Executor::name() of what runs the allocation
  bool assigns_gpus;       // Executor::assigns_gpus(): CUDA_VISIBLE_DEVICES is densefeed's to set
  bool driven;             // the gate's trusted driver times both arms
  // The clock outside the kernel's process (outside_clock.h): a driver's
  // rounds on this machine are bracketed by densefeed's own timestamps, and
  // those decide; the driver's samples are kept as a cross-check. A Slurm
  // job's driver runs on another machine, beyond a socket's reach: there
  // the driver's in-process samples decide, as before issue 26.
  bool outside;
  bool sessions;           // each arm's session serves every round
  int max_rounds;
  ArmRunner run_arm;
  // The rounds' orders of input sets: unknown to either arm until its round
  // starts (std::random_device, not the run's seed).
  std::mt19937_64& draw;
  BenchResult& result;     // what the stage found so far; its verdict, failure and reason when a round ends it
  // Under a scheduler: runs launches inside the benchmark's allocation
  // (held_allocation.h), for its input sets' references; nullptr locally.
  Executor* held = nullptr;
};

struct BenchCaseRun {
  std::size_t index = 0;  // into gate.bench.cases
  const Case* bench_case = nullptr;
  BenchCaseResult bc;
  // The gate stage's reference outputs of this case (same seed); unset:
  // not checked (calibration, BenchOptions::reference_out empty).
  std::optional<std::filesystem::path> gate_reference;
  // The driver's input sets (input_sets.h): a pool per case from a seed of
  // densefeed's own (pool_seed, std::random_device via BenchRun::draw; never
  // the run's seed, which the arms see), a fresh random order of distinct
  // sets of it every timed round; the reference's outputs of each set a
  // timed iteration of the candidate used, run once per set (the run's
  // seed's, for a driver that records no sets, is the gate stage's).
  std::uint64_t pool_seed = 0;
  std::vector<std::uint64_t> pool;
  std::map<std::uint64_t, std::filesystem::path> set_reference;
  std::size_t reference_runs = 0;
  double reference_wall_s = 0;
  bool rotated = false;  // a timed round drew its input sets from the pool
  DecisionInput input;
  std::chrono::steady_clock::time_point start;
  std::vector<ClockRoundSamples> clock_rounds[2];         // base, candidate
  std::size_t bounded_counts[2][2] = {{0, 0}, {0, 0}};    // per arm: samples raised, lowered to the outside clock's bounds
  std::vector<double> own_overhead_ms[2];  // per arm and round: the median of its own empty brackets
  std::vector<double> least_empty;         // the empty brackets (ms) of the round of either arm with the least median so far
  int long_factor = 2;
  double warmup_s[2] = {0, 0};  // each arm's warm-up call (base, candidate), wall seconds
  double budget_s = 600;        // the measurement budget: seconds of timed rounds (BenchOptions::budget_s or the gate's)
  // Rounds run again because an arm's wall time was far above its others'
  // (a late compile): what each was, at most kMaxLateReruns per case.
  nlohmann::ordered_json late_rounds = nlohmann::ordered_json::array();
};

// How many rounds of one case may be run again as late (rerun_late_round).
constexpr int kMaxLateReruns = 2;
// A round is late when an arm's wall time is more than this many times the
// median of its earlier rounds of the same length (at least two of them):
// ours, far above the round-to-round spread of a warm process (a few %),
// as far below a late compile (the H200's FLA run: 176 s against 2.4 s).
constexpr double kLateRoundFactor = 3;

// The case gate.bench.cases[ci] before its first round. Throws InfraError
// when it was not gated in this run (reference_out given without it).
BenchCaseRun start_bench_case(const BenchRun& run, std::size_t ci);

// Each arm's warm-up call, base first, before the case's first timed round
// (bench_round.cpp): its wall time kept in c.warmup_s, its samples not;
// outside the measurement budget, at most the gate's
// bench.max_warmup_seconds. false: the stage ended (run.result says why).
bool warm_up_arms(BenchRun& run, BenchCaseRun& c);

// After round `round`: when an arm's wall time in it was late (more than
// kLateRoundFactor x the median of its earlier rounds of the same length)
// and fewer than kMaxLateReruns rounds were run again, the round is taken
// out of both arms (so the pairs stay paired), recorded in c.late_rounds,
// and true is returned: the caller runs it again.
bool rerun_late_round(BenchCaseRun& c, int round, bool outside);

// What the case has reached after `round` + 1 rounds, for
// BenchOptions::progress.
void report_round(const BenchRun& run, const BenchCaseRun& c, int round);

// Round `round` of the case, both arms (ABBA: rounds 0 and 3 mod 4 start
// with the base), each launched, read and checked (bench_round.cpp). false:
// the stage ended (run.result's verdict, failure and reason say why; the
// case is not kept). Throws InfraError for densefeed's own failures.
bool run_paired_round(BenchRun& run, BenchCaseRun& c, int round);

// The guards after a round: true when the case stops here, decided (not
// with fixed_rounds) or at its wall-time cap (bc.capped).
bool round_ends_case(const BenchRun& run, BenchCaseRun& c, int round);

// The case's decision once its rounds ended, with densefeed's own
// cross-checks of its timings (timing_checks.h) as flags and their figures
// in bc.checks; `freeze`: how the other arm's session was held still, when
// sessions ran.
void decide_bench_case(const BenchRun& run, BenchCaseRun& c, const std::optional<std::string>& freeze);

}  // namespace densefeed
