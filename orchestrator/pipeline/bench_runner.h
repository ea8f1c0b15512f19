// The benchmark stage (runs only after a green gate): the candidate's and the
// base's harnesses on the gate's bench cases, in interleaved rounds (A B, B A,
// B A, A B, ...) so that drift and heat hit both arms alike, until the
// sequential decision of bench_statistics stops it (looks at 9, 15 and 25
// rounds) or the case's wall-time cap is reached. Rounds alternate the
// iteration count (iters, 2 x iters) so that densefeed can fit each arm's
// per-iteration wall time from outside (timing_checks.h). With a gate's
// trusted driver (gate_spec.h BenchDriver) the driver, run from the trusted
// tree, loads each arm's kernel and times it; without one each arm's harness
// times itself and the results say "timed by the candidate".
#pragma once

#include "failure.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_result.h"
#include "bench_statistics.h"
#include "case_grid.h"
#include "arm_context.h"
#include "gate_spec.h"
#include "reference_run.h"
#include "sandbox.h"
#include "timing_checks.h"
#include "verdict.h"

namespace densefeed {

class Executor;

struct BenchOptions {
  std::filesystem::path work_dir;
  std::uint64_t seed = 0;
  ArmContext base;       // where each arm runs from (arm_context.h)
  ArmContext candidate;
  // Noise threshold per bench case label (calibrated floor); the threshold
  // used is max(1 %, this).
  std::map<std::string, double> noise_floor;
  std::optional<double> predicted_speedup;
  // When set, only this many rounds and no decision-driven stop (calibration
  // and tests may fix it).
  std::optional<int> fixed_rounds;
  // The gate's reference outputs per bench case label (same seed): each of the
  // candidate's bench runs must write outputs that pass the gate against them,
  // so what is timed is what was gated. Empty (calibration): not checked.
  std::map<std::string, std::filesystem::path> reference_out;
  // The reference's outputs of a bench case for other seeds: the input sets
  // a driver's timed iterations drew (input_sets.h), one ReferenceRun per
  // seed in order (gate_runner.h run_references). Unset: a driver that draws
  // input sets cannot be gated (InfraError).
  std::function<std::vector<ReferenceRun>(const Case&, const std::vector<std::uint64_t>&)> references;
  // Both arms' commands under bwrap when it can start (sandbox.h): the base
  // is untrusted code as much as the candidate. false: --no-sandbox.
  bool sandbox = true;
  // The agent wrote the base (base_origin.h is_agent_base): a self-timed
  // base's untimed time is then not credited to the candidate (timing_checks.h
  // check_wall_growth).
  bool agent_base = false;
  std::filesystem::path private_dir;  // hidden from the arms; empty: work_dir
  std::vector<std::filesystem::path> sandbox_readable;  // revision folders /tmp or private_dir would hide
  std::string gpu;  // CUDA_VISIBLE_DEVICES for both arms: the benchmark holds this GPU alone ('' = unchanged)
  // The trusted context a gate's driver runs in (the reference's: the trusted
  // ref's export). Needed when the gate declares bench.driver.
  std::optional<ArmContext> trusted;
  // The machine's measured ceilings for the device the arms run on
  // (machine_ceilings.h); absent: the ceiling check is skipped (recorded).
  std::optional<Ceilings> ceilings;
  // What runs the benchmark's allocation (executor.h); nullptr: the
  // process's (executor(), the CLI's --executor). A test passes a scripted one.
  Executor* executor = nullptr;
};

// Runs the gate's driver (or, without one, its candidate command) in bench
// mode for each arm (DENSEFEED_MODE=bench, DENSEFEED_WARMUP, DENSEFEED_ITERS)
// and reads samples.json (schemas/samples.schema.json); with a driver also
// timed.json, and every timed iteration's outputs are gated. Then the
// cross-checks of timing_checks.h: a candidate flagged by one makes the stage
// red (FailureKind::implausible_timing) and its case inconclusive; the base
// flagged makes it error; drift makes a case inconclusive (a slower case
// stays slower: no flag makes a candidate look better); a speedup above
// the gate's max_speedup is flagged beyond_bound (promotion then needs a
// person's acceptance). Throws InfraError only for densefeed's own failures.
BenchResult run_bench(const GateSpec& gate, const nlohmann::ordered_json& base_params,
                      const nlohmann::ordered_json& candidate_params, const BenchOptions& options);

}  // namespace densefeed
