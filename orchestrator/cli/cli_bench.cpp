// bench calibrate: a gate's base against itself, recorded as this machine's
// noise floor (calibration.h).
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calibration.h"
#include "cli.h"

namespace densefeed {
namespace {

void print_calibration(const CalibrationRun& run, bool json) {
  nlohmann::ordered_json doc = {{"gate", run.gate}, {"host", run.host}, {"params", run.params}, {"comparisons", run.comparisons},
                                {"cases", nlohmann::ordered_json::array()}};
  for (const auto& c : run.cases) {
    nlohmann::ordered_json verdicts = nlohmann::ordered_json::array();
    for (std::size_t k = 0; k < c.verdicts.size(); ++k) {
      verdicts.push_back({{"verdict", to_string(c.verdicts[k])}, {"speedup", c.speedups[k]}});
    }
    doc["cases"].push_back({{"case", c.case_label}, {"noise_floor", c.noise_floor},
                            {"false_verdict_rate", c.false_verdict_rate}, {"comparisons", verdicts}});
    if (!json) {
      std::cout << fmt::format("{}: noise floor {:.2f}% (95th percentile of |speedup - 1| over {} A/A comparisons), "
                               "false verdicts {:.0f}%\n",
                               c.case_label, 100 * c.noise_floor, run.comparisons, 100 * c.false_verdict_rate);
    }
  }
  if (json) std::cout << doc.dump(2) << "\n";
}

}  // namespace

std::vector<CliVerb> add_bench_verbs(CLI::App& app, CliContext& ctx) {
  auto* bench_cmd = app.add_subcommand("bench", "benchmark calibration");
  bench_cmd->require_subcommand(1);
  auto* calibrate_cmd = bench_cmd->add_subcommand("calibrate", "run a gate's base against itself and record this machine's noise floor");
  auto request = std::make_shared<CalibrationRequest>();
  calibrate_cmd->add_option("GATE", request->gate, "gate name")->required();
  calibrate_cmd->add_option("--comparisons", request->comparisons, "A/A comparisons")->check(CLI::Range(1, 1000))->capture_default_str();
  calibrate_cmd->add_option("--param", request->params, "NAME=VALUE (a YAML scalar) for a gate parameter; default: the gate's defaults");
  calibrate_cmd->add_option("--ledger", ctx.ledger_text, "SQLite ledger (default: the project's)");
  calibrate_cmd->add_flag("--json", ctx.json, "print JSON");
  request->warn = [](const std::string& warning) { std::cerr << "densefeed: warning: " << warning << "\n"; };
  return {{calibrate_cmd,
           [&ctx, request] {
             print_calibration(calibrate_gate(*request, ctx.project(), ctx.store(), ctx.workspace()), ctx.json);
             return 0;
           },
           StoreUse::always}};
}

}  // namespace densefeed
