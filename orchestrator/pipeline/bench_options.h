// What run_bench (bench_runner.h) is given: where the arms run from, the
// gate's reference outputs to gate every timed output against, noise
// floors, the machine's ceilings, the executor. Its own header so that the
// pieces of run_bench (bench_case.h) read it without including the runner.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "arm_context.h"
#include "bench_progress.h"
#include "case_grid.h"
#include "reference_run.h"
#include "timing_checks.h"

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
  // The Executor* given (non-null under a scheduler) runs them inside the
  // benchmark's own allocation (held_allocation.h); nullptr: the run's.
  std::function<std::vector<ReferenceRun>(const Case&, const std::vector<std::uint64_t>&, Executor*)> references;
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
  // What runs the benchmark's allocation and sessions (executor.h; the
  // run's, RunOptions::executor); nullptr: this machine's. A test passes a
  // scripted one.
  Executor* executor = nullptr;
  // Called after each arm's warm-up and each paired round (on the bench's
  // thread); unset: nobody watches.
  std::function<void(const BenchProgress&)> progress;
  // The measurement budget per case, seconds, in place of the gate's
  // bench.max_seconds_per_case (run --bench-seconds); unset: the gate's.
  std::optional<double> budget_s;
};

}  // namespace densefeed
