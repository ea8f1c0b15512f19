#include "bench_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "command_template.h"
#include "error.h"
#include "gate_runner.h"
#include "process_runner.h"
#include "untrusted_launch.h"

namespace densefeed {
namespace {

// Reads samples.json, checking every field: harness output is untrusted.
ArmRound read_samples(const std::filesystem::path& path) {
  // Not followed if a link: it may loop or name a FIFO that never ends.
  std::error_code ec;
  if (const auto type = std::filesystem::symlink_status(path, ec).type();
      type != std::filesystem::file_type::regular && type != std::filesystem::file_type::not_found) {
    const std::string what = type == std::filesystem::file_type::symlink ? "a symbolic link"
                             : ec                                         ? ec.message()
                                                                          : "not a regular file";
    throw std::runtime_error(fmt::format("{}: not a file the harness wrote ({})", path.string(), what));
  }
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
  if (doc["unit"] != "ms") {
    throw std::runtime_error(fmt::format("{}: unit {}, expected \"ms\"", path.string(), doc["unit"].dump()));
  }
  ArmRound round;
  for (std::size_t i = 0; i < doc["samples"].size(); ++i) {
    const auto& v = doc["samples"][i];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0) {
      throw std::runtime_error(fmt::format("{}: samples[{}] = {} is not a positive finite number", path.string(), i, v.dump()));
    }
    round.samples_ms.push_back(v.get<double>());
  }
  if (round.samples_ms.empty()) throw std::runtime_error(fmt::format("{}: no samples", path.string()));
  if (doc.contains("sm_clock_mhz")) {
    if (!doc["sm_clock_mhz"].is_number() || doc["sm_clock_mhz"].get<double>() <= 0) {
      throw std::runtime_error(fmt::format("{}: sm_clock_mhz must be a positive number", path.string()));
    }
    round.sm_clock_mhz = doc["sm_clock_mhz"].get<double>();
  }
  if (doc.contains("throttled")) {
    if (!doc["throttled"].is_number_unsigned() || doc["throttled"].get<std::size_t>() > round.samples_ms.size()) {
      throw std::runtime_error(fmt::format("{}: throttled must be a count of at most the samples", path.string()));
    }
    round.throttled = doc["throttled"].get<std::size_t>();
  }
  return round;
}

}  // namespace

BenchResult run_bench(const GateSpec& gate, const nlohmann::ordered_json& base_params,
                      const nlohmann::ordered_json& candidate_params, const BenchOptions& options) {
  BenchResult result;
  result.sandbox = require_sandbox(options.sandbox);
  const int max_rounds = options.fixed_rounds ? *options.fixed_rounds : gate.bench.looks.back();
  for (std::size_t ci = 0; ci < gate.bench.cases.size(); ++ci) {
    const Case& c = gate.bench.cases[ci];
    BenchCaseResult bc;
    bc.bench_case = c;
    bc.predicted_speedup = options.predicted_speedup;
    if (auto it = options.noise_floor.find(c.label); it != options.noise_floor.end()) {
      bc.calibrated_floor = it->second;
      bc.threshold = std::max(0.01, it->second);
    }
    DecisionInput input;
    input.threshold = bc.threshold;
    input.looks = gate.bench.looks;
    input.seed = options.seed;
    const auto case_start = std::chrono::steady_clock::now();
    for (int round = 0; round < max_rounds; ++round) {
      // ABBA ordering: rounds 0 and 3 (mod 4) start with the base.
      const bool base_first = round % 4 == 0 || round % 4 == 3;
      for (int k = 0; k < 2; ++k) {
        const bool is_base = (k == 0) == base_first;
        const auto dir = options.work_dir / fmt::format("bench-{:02}-round-{:02}-{}", ci, round, is_base ? "base" : "candidate");
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
        std::filesystem::create_directories(dir / "out", ec);
        if (ec) throw InfraError(fmt::format("{}: cannot create: {}", dir.string(), ec.message()));
        const ArmContext& arm = is_base ? options.base : options.candidate;
        UntrustedCommand spec;
        spec.argv = arm_command(gate.candidate_command,
                                {c.values, is_base ? base_params : candidate_params, options.seed, (dir / "out").string()}, arm);
        spec.arm = &arm;
        spec.env["DENSEFEED_MODE"] = "bench";
        spec.env["DENSEFEED_CASE"] = c.values.dump();
        spec.env["DENSEFEED_SEED"] = std::to_string(options.seed);
        spec.env["DENSEFEED_OUT"] = (dir / "out").string();
        spec.env["DENSEFEED_WARMUP"] = std::to_string(gate.bench.warmup);
        spec.env["DENSEFEED_ITERS"] = std::to_string(gate.bench.iters);
        if (!options.gpu.empty()) spec.env["CUDA_VISIBLE_DEVICES"] = options.gpu;
        spec.cwd = dir;
        spec.writable = {dir / "out"};
        spec.readable = options.sandbox_readable;
        spec.stdout_path = dir / "stdout.log";
        spec.stderr_path = dir / "stderr.log";
        spec.timeout = std::chrono::milliseconds(static_cast<long long>(gate.timeout_s * 1000));
        spec.limits = gate.limits;
        spec.sandbox = options.sandbox;
        const UntrustedResult launched = launch_untrusted(spec);
        const ProcessResult& pr = launched.process;
        result.harness_wall_s += pr.wall_s;
        const FailureWho who = is_base ? FailureWho::base : FailureWho::candidate;
        Failure failure{FailureKind::malformed_output, who, {}, {}, "samples.json", "", ""};
        try {
          if (!launched.ok()) {
            failure = failure_value(who, launched);
            const LogTail tail = log_tail(spec.stdout_path, spec.stderr_path, 4);
            throw std::runtime_error(fmt::format("it {}{}", launched.describe(), tail.text.empty() ? "" : "; " + tail.stream + ": " + tail.text));
          }
          (is_base ? bc.base : bc.candidate).push_back(read_samples(dir / "out" / "samples.json"));
          if (auto ref = options.reference_out.find(c.label); !is_base && ref != options.reference_out.end()) {
            for (const auto& out : gate.outputs) {
              const OutputResult o = compare_output(out, c.values, ref->second, dir / "out");
              if (o.comparison.verdict != Verdict::green) {
                failure = o.failure;
                failure.who = who;
                throw std::runtime_error(fmt::format("round {}: what was timed is not what was gated: {}: {}", round,
                                                     out.name, o.comparison.reason));
              }
            }
          }
        } catch (const std::runtime_error& e) {
          result.verdict = is_base ? Verdict::error : Verdict::red;
          result.failure = failure;
          result.reason = fmt::format("case {}: the {} arm in bench mode: {}", c.label, is_base ? "base" : "candidate", e.what());
          return result;
        }
      }
      input.base = bc.base;
      input.candidate = bc.candidate;
      if (!options.fixed_rounds && should_stop(input)) break;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - case_start).count();
      if (elapsed > gate.bench.max_seconds_per_case && round + 1 < max_rounds) {
        bc.capped = true;
        break;
      }
    }
    bc.decision = decide(input);
    if (bc.capped) {
      bc.decision.verdict = BenchVerdict::inconclusive;
      bc.decision.reason = fmt::format("inconclusive: the case's wall-time cap of {} s was reached after {} rounds ({})",
                                       gate.bench.max_seconds_per_case, bc.base.size(), bc.decision.reason);
    }
    if (bc.predicted_speedup && *bc.predicted_speedup > 0 && bc.decision.speedup > 0) {
      bc.prediction_error = bc.decision.speedup / *bc.predicted_speedup - 1;
    }
    result.cases.push_back(std::move(bc));
  }
  return result;
}

}  // namespace densefeed
