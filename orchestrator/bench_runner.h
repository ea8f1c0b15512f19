// The benchmark stage (runs only after a green gate): the candidate's and the
// base's parameters on the gate's bench cases, in interleaved rounds
// (A B, B A, B A, A B, ...) so that drift and heat hit both arms alike.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "case_grid.h"
#include "gate_spec.h"
#include "verdict.h"

namespace densefeed {

struct ArmStats {
  std::vector<double> samples;  // every iteration of every round, in `unit`
  double median = 0;
  double relative_iqr = 0;      // (q75 - q25) / median
};

struct BenchCaseResult {
  Case bench_case;
  std::string unit = "ms";
  ArmStats base;
  ArmStats candidate;
  std::vector<double> round_speedups;  // per round: median(base) / median(candidate)
  double speedup = 0;                  // median of round_speedups; > 1 means the candidate is faster
  double speedup_min = 0;              // spread over rounds
  double speedup_max = 0;
};

struct BenchResult {
  Verdict verdict = Verdict::green;  // red: the candidate failed to run; error: the base did
  std::string reason;
  std::vector<BenchCaseResult> cases;
  double harness_wall_s = 0;
};

struct BenchOptions {
  std::filesystem::path work_dir;
  std::uint64_t seed = 0;
  std::filesystem::path base_exe_dir;  // a revision's build; empty: densefeed's own
  std::filesystem::path candidate_exe_dir;
};

// Runs the gate's candidate command in bench mode (DENSEFEED_MODE=bench,
// DENSEFEED_WARMUP, DENSEFEED_ITERS) and reads samples.json
// ({"unit": "ms", "samples": [...]}). Throws InfraError only for densefeed's
// own failures.
BenchResult run_bench(const GateSpec& gate, const nlohmann::ordered_json& base_params,
                      const nlohmann::ordered_json& candidate_params, const BenchOptions& options);

}  // namespace densefeed
