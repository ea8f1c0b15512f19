#include "calibration.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "arms.h"
#include "environment.h"
#include "error.h"
#include "gate_lock.h"
#include "ledger.h"
#include "manifest.h"
#include "statistics.h"
#include "sha256.h"
#include "statistics.h"
#include "trusted_arm.h"

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
    // A fixed number of rounds: an A/A on a noisy host never settles inside
    // a 1% band, and its budget would be spent for every comparison.
    options.fixed_rounds = kCalibrationRounds;
    const BenchResult bench = run_bench(gate, params, params, options);
    if (bench.verdict != Verdict::green) {
      result.verdict = Verdict::error;
      result.reason = fmt::format("comparison {}: {}", i, bench.reason);
      return result;
    }
    for (std::size_t c = 0; c < bench.cases.size(); ++c) {
      const BenchCaseResult& bc = bench.cases[c];
      result.cases[c].verdicts.push_back(bc.decision.verdict);
      result.cases[c].speedups.push_back(bc.decision.speedup);
    }
  }
  for (auto& cc : result.cases) {
    std::size_t wrong = 0;
    for (const auto v : cc.verdicts) wrong += v == BenchVerdict::faster || v == BenchVerdict::slower;
    std::vector<double> deviations;
    for (const double s : cc.speedups) {
      if (s > 0 && std::isfinite(s)) deviations.push_back(std::max(s, 1 / s) - 1);
    }
    if (!deviations.empty()) cc.noise_floor = quantile(deviations, 0.95);
    if (!cc.verdicts.empty()) cc.false_verdict_rate = static_cast<double>(wrong) / static_cast<double>(cc.verdicts.size());
  }
  return result;
}

CalibrationRun calibrate_gate(const CalibrationRequest& request, const Project& project, const GateStore& store,
                              const Workspace& workspace) {
  const std::string& name = request.gate;
  const auto lock = read_lock(store);
  auto problems = check_locked_file(store, lock, store.gate_rel(name));
  if (!problems.empty()) throw InputError(problems.front(), {}, "", "the gate does not match its lock; not calibrating");
  const auto gate = load_gate(store, name);
  problems = check_frozen_files(store, lock, gate);
  if (!problems.empty()) throw InputError(problems.front(), {}, "", "the gate does not match its lock; not calibrating");
  if (gate.bench.cases.empty()) throw InputError(gate.file.string(), {}, "bench", "the gate declares no bench cases");
  // --param NAME=VALUE, read as a one-line YAML manifest arm so that
  // types and enums are checked exactly as for an experiment.
  std::string yaml = "experiment: calibrate\nhypothesis: noise floor\npredicted_effect: same\ngate: " + name +
                     "\ncandidate: {revision: WORKTREE, params: {";
  for (std::size_t i = 0; i < request.params.size(); ++i) {
    const auto eq = request.params[i].find('=');
    if (eq == std::string::npos) throw InputError("command line", {}, "--param", "expected NAME=VALUE, got '" + request.params[i] + "'");
    yaml += (i ? ", " : "") + request.params[i].substr(0, eq) + ": " + request.params[i].substr(eq + 1);
  }
  yaml += "}}\nbase: {revision: WORKTREE}\n";
  Manifest m;
  m.doc = parse_yaml(yaml, "--param");
  m.candidate = Arm{"WORKTREE", m.doc.value["candidate"]["params"]};
  CalibrationRun run;
  run.gate = gate.name;
  run.comparisons = request.comparisons;
  run.params = resolve_params(m, "candidate", m.candidate, gate);
  const auto started = std::chrono::system_clock::now().time_since_epoch().count();
  const auto work = workspace.calibrations() / std::to_string(started);
  if (request.comparisons < 20 && request.warn) {
    request.warn(fmt::format("{} comparison(s) give a rough noise floor (its 95th percentile needs about 20 or more); it is "
                             "recorded and used all the same", request.comparisons));
  }
  const bool python_driver = gate.bench.driver && is_python_command(gate.bench.driver->command);
  const auto python = is_python_command(gate.candidate_command) || python_driver ? harness_python(project) : std::filesystem::path();
  // The driver is the trusted ref's (trusted_arm.h), built from it where it must be.
  auto trusted = trusted_arm(gate, project, store, python);
  if (const auto problem = build_trusted_arm(trusted, gate, project, store, workspace, true); !problem.empty()) {
    throw InfraError(problem);
  }
  const auto result = calibrate(gate, run.params, request.comparisons, work, static_cast<std::uint64_t>(started),
                                worktree_context(project, store, python), trusted);
  if (result.verdict != Verdict::green) throw InfraError(result.reason);
  Ledger ledger(workspace.ledger);
  const auto env = collect_environment();
  run.host = env.host;
  for (const auto& c : result.cases) {
    nlohmann::ordered_json verdicts = nlohmann::ordered_json::array();
    for (std::size_t k = 0; k < c.verdicts.size(); ++k) {
      verdicts.push_back({{"verdict", to_string(c.verdicts[k])}, {"speedup", c.speedups[k]}});
    }
    ledger.record_calibration({gate.name, sha256_file(gate.file), c.case_label, env.host, run.params, request.comparisons,
                               c.noise_floor, c.false_verdict_rate, verdicts});
  }
  run.cases = result.cases;
  return run;
}

}  // namespace densefeed
