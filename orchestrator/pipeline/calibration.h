// `densefeed bench calibrate`: the base against itself (A/A), several times,
// to measure this machine's noise floor for a gate's bench cases and how
// often the decision rule calls identical code faster or slower.
#pragma once

#include <optional>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_runner.h"
#include "gate_spec.h"

namespace densefeed {

struct CalibrationCase {
  std::string case_label;
  std::vector<BenchVerdict> verdicts;  // one per A/A comparison
  std::vector<double> speedups;
  double noise_floor = 0;         // 95th percentile of |speedup - 1| (type-7 quantile)
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

}  // namespace densefeed
