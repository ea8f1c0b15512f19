#include "bench_runner.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "command_template.h"
#include "error.h"
#include "process_runner.h"
#include "statistics.h"

namespace densefeed {
namespace {

struct Samples {
  std::string unit;
  std::vector<double> values;
};

// Reads samples.json, checking every field: harness output is untrusted.
Samples read_samples(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("{}: missing (the harness wrote no samples)", path.string()));
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(fmt::format("{}: not JSON: {}", path.string(), e.what()));
  }
  if (!doc.is_object() || !doc.contains("unit") || !doc["unit"].is_string() || !doc.contains("samples") ||
      !doc["samples"].is_array()) {
    throw std::runtime_error(fmt::format("{}: expected {{\"unit\": \"ms\", \"samples\": [numbers...]}}", path.string()));
  }
  Samples s;
  s.unit = doc["unit"].get<std::string>();
  if (s.unit != "ms") throw std::runtime_error(fmt::format("{}: unit '{}', expected 'ms'", path.string(), s.unit));
  for (std::size_t i = 0; i < doc["samples"].size(); ++i) {
    const auto& v = doc["samples"][i];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0) {
      throw std::runtime_error(fmt::format("{}: samples[{}] = {} is not a positive finite number", path.string(), i, v.dump()));
    }
    s.values.push_back(v.get<double>());
  }
  if (s.values.empty()) throw std::runtime_error(fmt::format("{}: no samples", path.string()));
  return s;
}

}  // namespace

BenchResult run_bench(const GateSpec& gate, const nlohmann::ordered_json& base_params,
                      const nlohmann::ordered_json& candidate_params, const BenchOptions& options) {
  BenchResult result;
  for (std::size_t ci = 0; ci < gate.bench.cases.size(); ++ci) {
    const Case& c = gate.bench.cases[ci];
    BenchCaseResult bc;
    bc.bench_case = c;
    for (int round = 0; round < gate.bench.rounds; ++round) {
      // ABBA ordering: rounds 0 and 3 (mod 4) start with the base.
      const bool base_first = round % 4 == 0 || round % 4 == 3;
      std::vector<double> medians(2);
      for (int k = 0; k < 2; ++k) {
        const bool is_base = (k == 0) == base_first;
        const auto dir = options.work_dir / fmt::format("bench-{:02}-round-{:02}-{}", ci, round, is_base ? "base" : "candidate");
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
        std::filesystem::create_directories(dir / "out", ec);
        if (ec) throw InfraError(fmt::format("{}: cannot create: {}", dir.string(), ec.message()));
        ProcessSpec spec;
        spec.argv = render_command(gate.candidate_command,
                                   {c.values, is_base ? base_params : candidate_params, options.seed, (dir / "out").string()});
        spec.exe_dir = is_base ? options.base_exe_dir : options.candidate_exe_dir;
        spec.env = {{"DENSEFEED_MODE", "bench"},
                    {"DENSEFEED_CASE", c.values.dump()},
                    {"DENSEFEED_SEED", std::to_string(options.seed)},
                    {"DENSEFEED_OUT", (dir / "out").string()},
                    {"DENSEFEED_WARMUP", std::to_string(gate.bench.warmup)},
                    {"DENSEFEED_ITERS", std::to_string(gate.bench.iters)}};
        spec.cwd = dir;
        spec.stdout_path = dir / "stdout.log";
        spec.stderr_path = dir / "stderr.log";
        spec.timeout = std::chrono::milliseconds(static_cast<long long>(gate.timeout_s * 1000));
        const ProcessResult pr = run_process(spec);
        result.harness_wall_s += pr.wall_s;
        const char* arm = is_base ? "base" : "candidate";
        try {
          if (!pr.ok()) {
            throw std::runtime_error(fmt::format("{}; stderr: {}", pr.describe(), file_tail(dir / "stderr.log", 4)));
          }
          Samples s = read_samples(dir / "out" / "samples.json");
          auto& stats = is_base ? bc.base : bc.candidate;
          stats.samples.insert(stats.samples.end(), s.values.begin(), s.values.end());
          medians[is_base ? 0 : 1] = median(s.values);
        } catch (const std::runtime_error& e) {
          result.verdict = is_base ? Verdict::error : Verdict::red;
          result.reason = fmt::format("case {}: the {} arm in bench mode: {}", c.label, arm, e.what());
          return result;
        }
      }
      bc.round_speedups.push_back(medians[0] / medians[1]);
    }
    for (auto* arm : {&bc.base, &bc.candidate}) {
      arm->median = median(arm->samples);
      arm->relative_iqr = relative_iqr(arm->samples);
    }
    bc.speedup = median(bc.round_speedups);
    bc.speedup_min = *std::min_element(bc.round_speedups.begin(), bc.round_speedups.end());
    bc.speedup_max = *std::max_element(bc.round_speedups.begin(), bc.round_speedups.end());
    result.cases.push_back(std::move(bc));
  }
  return result;
}

}  // namespace densefeed
