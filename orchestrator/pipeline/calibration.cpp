#include "calibration.h"

#include <cmath>

#include <fmt/format.h>

#include "statistics.h"

namespace densefeed {

CalibrationResult calibrate(const GateSpec& gate, const nlohmann::ordered_json& params, int comparisons,
                            const std::filesystem::path& work_dir, std::uint64_t seed, const ArmContext& arm,
                            const std::optional<ArmContext>& trusted) {
  CalibrationResult result;
  result.cases.resize(gate.bench.cases.size());
  for (std::size_t c = 0; c < gate.bench.cases.size(); ++c) result.cases[c].case_label = gate.bench.cases[c].label;
  for (int i = 0; i < comparisons; ++i) {
    BenchOptions options;
    options.work_dir = work_dir / fmt::format("comparison-{:03}", i);
    options.seed = seed + static_cast<std::uint64_t>(i);
    options.base = options.candidate = arm;
    options.trusted = trusted;
    const BenchResult bench = run_bench(gate, params, params, options);
    if (bench.verdict != Verdict::green) {
      result.verdict = Verdict::error;
      result.reason = fmt::format("comparison {}: {}", i, bench.reason);
      return result;
    }
    for (std::size_t c = 0; c < bench.cases.size(); ++c) {
      result.cases[c].verdicts.push_back(bench.cases[c].decision.verdict);
      result.cases[c].speedups.push_back(bench.cases[c].decision.speedup);
    }
  }
  for (auto& cc : result.cases) {
    std::vector<double> deviation;
    std::size_t wrong = 0;
    for (std::size_t k = 0; k < cc.speedups.size(); ++k) {
      deviation.push_back(std::fabs(cc.speedups[k] - 1));
      wrong += cc.verdicts[k] == BenchVerdict::faster || cc.verdicts[k] == BenchVerdict::slower;
    }
    if (!deviation.empty()) {
      cc.noise_floor = quantile(deviation, 0.95);
      cc.false_verdict_rate = static_cast<double>(wrong) / static_cast<double>(deviation.size());
    }
  }
  return result;
}

}  // namespace densefeed
