#include "acceptance_runner.h"

#include <chrono>
#include <fstream>

#include <fmt/format.h>

#include "harness_command.h"
#include "acceptance.h"
#include "error.h"
#include "process_runner.h"
#include "executor.h"
#include "untrusted_launch.h"

namespace densefeed {

AcceptanceRecord run_acceptance(const nlohmann::ordered_json& acceptance, const nlohmann::ordered_json& params,
                                const AcceptanceOptions& options) {
  AcceptanceRecord r;
  r.started_at = utc_now();
  const auto start = std::chrono::steady_clock::now();
  const std::string statistic = acceptance.value("statistic", "median");
  std::vector<Criterion> criteria;
  for (const auto& c : acceptance.at("criteria")) criteria.push_back(parse_criterion(c.get<std::string>()));

  std::error_code ec;
  std::filesystem::remove_all(options.work_dir, ec);
  std::filesystem::create_directories(options.work_dir / "out", ec);
  if (ec) throw InfraError(fmt::format("{}: cannot create the acceptance folder: {}", options.work_dir.string(), ec.message()));

  HarnessCall call;
  call.mode = ProtocolMode::acceptance;
  call.arm = &options.candidate;
  call.command = acceptance.at("command").get<std::vector<std::string>>();
  call.values = {nlohmann::ordered_json::object(), params, options.seed, (options.work_dir / "out").string()};
  call.dir = options.work_dir;
  call.out = options.work_dir / "out";
  call.timeout = harness_timeout(acceptance.value("timeout_s", 600.0));
  call.limits = options.limits;
  call.sandbox = options.sandbox;
  Launch launch;
  launch.untrusted = harness_command(call);
  const UntrustedCommand& spec = launch.untrusted;
  AllocationRequest request;
  request.name = "acceptance";
  request.gpus = options.gpus;
  request.stage = "acceptance";
  request.resources = options.resources;
  // A long run a scheduler may preempt: requeued once (slurm_executor.h).
  request.resumable = true;
  request.time_limit = std::chrono::duration_cast<std::chrono::seconds>(spec.timeout + std::chrono::milliseconds(999));
  const LaunchResult ran = run_launch(given_or_local(options.executor), launch, request);
  const UntrustedResult& launched = ran.result;
  const auto finish = [&](std::string verdict, std::string reason) {
    r.verdict = std::move(verdict);
    r.reason = std::move(reason);
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  if (!ran.infrastructure.empty()) {
    return finish("error", fmt::format("the acceptance command did not run to an end of its own: {} (an infrastructure failure: "
                                       "error, neither pass nor fail)", ran.infrastructure));
  }
  if (!launched.ok()) {
    return finish("fail", fmt::format("the acceptance command {}; stderr: {}", launched.describe(), file_tail(spec.stderr_path, 6)));
  }
  const auto metrics_path = options.work_dir / "out" / "metrics.json";
  std::ifstream in(metrics_path);
  if (!in) return finish("fail", fmt::format("{}: the acceptance command exited 0 but wrote no metrics.json", metrics_path.string()));
  try {
    r.metrics = nlohmann::ordered_json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    return finish("fail", fmt::format("{}: not JSON: {}", metrics_path.string(), e.what()));
  }
  if (!r.metrics.is_object()) {
    return finish("fail", fmt::format("{}: expected an object {{NAME: number | [numbers]}}", metrics_path.string()));
  }
  bool all = true;
  std::string first_failure;
  for (const auto& c : evaluate_criteria(criteria, r.metrics, statistic)) {
    r.criteria.push_back({c.text, c.statistic, c.lhs, c.rhs, c.passed});
    if (!c.passed && first_failure.empty()) {
      first_failure = c.problem.empty() ? fmt::format("'{}' does not hold: {} vs {}", c.text, c.lhs ? fmt::format("{:.6g}", *c.lhs) : "?",
                                                      c.rhs ? fmt::format("{:.6g}", *c.rhs) : "?")
                                        : fmt::format("'{}': {}", c.text, c.problem);
    }
    all = all && c.passed;
  }
  return finish(all ? "pass" : "fail", all ? "" : first_failure);
}

}  // namespace densefeed
