#include "trace_stage.h"

#include <chrono>

#include <fmt/format.h>

#include "harness_command.h"
#include "error.h"
#include "process_runner.h"
#include "executor.h"
#include "untrusted_launch.h"

namespace densefeed {
namespace {

// The trace a harness left in `out`, in the order of preference.
std::filesystem::path find_trace(const std::filesystem::path& out) {
  for (const char* name : {"trace.json", "trace.json.gz", "trace.sqlite"}) {
    if (std::filesystem::is_regular_file(out / name)) return out / name;
  }
  return {};
}

}  // namespace

TraceStageResult run_trace_stage(const nlohmann::ordered_json& trace, const std::vector<TraceCheck>& checks,
                                 const nlohmann::ordered_json& candidate_params, const nlohmann::ordered_json& base_params,
                                 const TraceStageOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  TraceStageResult result;
  result.sandbox = require_sandbox(options.sandbox);
  std::vector<std::string> arms = {"candidate", "base"};
  if (trace.contains("arms")) arms = trace["arms"].get<std::vector<std::string>>();
  for (const auto& arm : arms) {
    TraceArmResult r;
    r.arm = arm;
    const bool is_base = arm == "base";
    const auto dir = options.work_dir / ("trace-" + arm);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::create_directories(dir / "out", ec);
    if (ec) throw InfraError(fmt::format("{}: cannot create the trace folder: {}", dir.string(), ec.message()));
    const ArmContext& context = is_base ? options.base : options.candidate;
    HarnessCall call;
    call.mode = ProtocolMode::trace;
    call.arm = &context;
    call.command = trace.at("command").get<std::vector<std::string>>();
    call.values = {nlohmann::ordered_json::object(), is_base ? base_params : candidate_params, options.seed, (dir / "out").string()};
    call.dir = dir;
    call.out = dir / "out";
    call.readable = options.readable;
    call.timeout = harness_timeout(trace.value("timeout_s", 600.0));
    call.limits = options.limits;
    call.sandbox = options.sandbox;
    Launch launch;
    launch.untrusted = harness_command(call);
    const UntrustedCommand& spec = launch.untrusted;
    AllocationRequest request;
    request.name = "trace-" + arm;
    request.gpus = options.gpus;
    request.stage = "trace";
    request.resources = options.resources;
    request.time_limit = std::chrono::duration_cast<std::chrono::seconds>(spec.timeout + std::chrono::milliseconds(999));
    const LaunchResult ran = run_launch(given_or_local(options.executor), launch, request);
    const UntrustedResult& launched = ran.result;
    const ProcessResult& p = launched.process;
    const FailureWho who = is_base ? FailureWho::base : FailureWho::candidate;
    Failure failure;
    if (!ran.infrastructure.empty()) {
      // Not the command's failure: the stage is error, never red or green.
      r.failure = fmt::format("the {}'s trace command did not run to an end of its own: {}", arm, ran.infrastructure);
      if (result.verdict != Verdict::error) {
        result.verdict = Verdict::error;
        result.reason = r.failure + " (an infrastructure failure: error)";
        result.failure = {FailureKind::infrastructure, FailureWho::densefeed, {}, {}, "", "", ran.infrastructure};
      }
      result.arms.push_back(std::move(r));
      continue;
    }
    if (!launched.ok()) {
      failure = failure_value(who, launched);
      r.failure = fmt::format("the {}'s trace command {}; stderr: {}", arm, launched.describe(), file_tail(spec.stderr_path, 6));
    } else if ((r.trace_file = find_trace(dir / "out")).empty()) {
      failure = {FailureKind::missing_output, who, {}, {}, "trace.json", "", ""};
      r.failure = fmt::format("the {}'s trace command exited 0 but wrote no trace.json, trace.json.gz or trace.sqlite in {}", arm,
                              (dir / "out").string());
    } else {
      try {
        r.report = check_trace({r.trace_file}, checks);
        r.ran = true;
      } catch (const InputError& e) {
        // The trace is the harness's output: unreadable is the harness's defect.
        failure = {FailureKind::malformed_output, who, {}, {}, r.trace_file.filename().string(), "", ""};
        r.failure = fmt::format("the {}'s trace is unreadable: {}", arm, e.what());
      }
    }
    if (!is_base && result.verdict == Verdict::green) {
      if (!r.ran) {
        result.verdict = Verdict::red;
        result.reason = r.failure;
        result.failure = failure;
      } else if (!r.report.passed) {
        result.verdict = Verdict::red;
        for (const auto& c : r.report.results) {
          if (c.passed) continue;
          result.reason = fmt::format("trace check {} ({}) failed: {}", c.check.field, to_string(c.check.kind), c.reason);
          result.failure = {FailureKind::tolerance, FailureWho::candidate, {}, {}, "trace", std::string(to_string(c.check.kind)), ""};
          break;
        }
      }
    }
    result.arms.push_back(std::move(r));
  }
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace densefeed
