#include "bench_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <functional>
#include <optional>
#include <random>
#include <set>

#include <fmt/format.h>

#include "harness_protocol.h"
#include "bench_work.h"
#include "command_template.h"
#include "error.h"
#include "gate_runner.h"
#include "input_sets.h"
#include "outside_clock.h"
#include "process_runner.h"
#include "sha256.h"
#include "statistics.h"
#include "timing_checks.h"
#include "executor.h"
#include "session.h"
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


// The trusted driver's timed.json, read: one entry per timed iteration, each
// {OUTPUT: sha256 of its .npy file}, and, from a driver that draws an input
// set per iteration (input_sets.h), "input_seeds": the seed of each.
struct TimedRecord {
  nlohmann::json iterations;
  std::optional<std::vector<std::uint64_t>> input_seeds;
};

// Throws std::runtime_error naming the file and what is wrong.
TimedRecord read_timed(const GateSpec& gate, const std::filesystem::path& out_dir, int timed) {
  const auto path = out_dir / "timed.json";
  std::error_code ec;
  if (std::filesystem::symlink_status(path, ec).type() != std::filesystem::file_type::regular) {
    throw std::runtime_error(fmt::format("{}: missing or not a plain file: the driver records every timed iteration's outputs there",
                                         path.string()));
  }
  std::ifstream in(path);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(fmt::format("{}: not JSON: {}", path.string(), e.what()));
  }
  if (!doc.is_object() || !doc.contains("iterations") || !doc["iterations"].is_array()) {
    throw std::runtime_error(fmt::format("{}: expected {{\"iterations\": [{{OUTPUT: sha256}}, ...]}}", path.string()));
  }
  TimedRecord r;
  r.iterations = doc["iterations"];
  if (r.iterations.size() != static_cast<std::size_t>(timed)) {
    throw std::runtime_error(fmt::format("{}: {} iterations recorded, {} were timed", path.string(), r.iterations.size(), timed));
  }
  for (std::size_t k = 0; k < r.iterations.size(); ++k) {
    const auto& e = r.iterations[k];
    if (!e.is_object()) throw std::runtime_error(fmt::format("{}: iterations[{}] is not an object", path.string(), k));
    for (const auto& o : gate.outputs) {
      if (!e.contains(o.name) || !e[o.name].is_string() || e[o.name].get<std::string>().size() != 64) {
        throw std::runtime_error(fmt::format("{}: iterations[{}] has no sha256 for output {}", path.string(), k, o.name));
      }
    }
  }
  if (doc.contains("input_seeds")) {
    const auto& seeds = doc["input_seeds"];
    if (!seeds.is_array() || seeds.size() != r.iterations.size() ||
        !std::all_of(seeds.begin(), seeds.end(), [](const nlohmann::json& v) { return v.is_number_unsigned(); })) {
      throw std::runtime_error(fmt::format("{}: input_seeds must be one u64 seed per timed iteration ({})", path.string(), timed));
    }
    r.input_seeds = seeds.get<std::vector<std::uint64_t>>();
  }
  return r;
}

// Gates the timed iterations of `record`: for each distinct pair of input set
// and outputs, the folder timed/K/ (K its first iteration) must hold those
// files, and they must pass the gate against reference_of(its set's seed)
// (`run_seed` for a driver that records no input sets). So every timed
// iteration's outputs are what was gated, for its own inputs. A driver that
// records input sets must record the ones densefeed drew (`drawn`, the timed
// part). Throws std::runtime_error (and sets *failure) naming the iteration,
// its input set, the file and the check.
void check_timed_outputs(const GateSpec& gate, const Case& c, const std::filesystem::path& out_dir, const TimedRecord& record,
                         const std::vector<std::uint64_t>& drawn, std::uint64_t run_seed,
                         const std::function<std::filesystem::path(std::uint64_t)>& reference_of, Failure* failure) {
  const auto path = out_dir / "timed.json";
  std::error_code ec;
  if (record.input_seeds && *record.input_seeds != drawn) {
    std::size_t k = 0;
    while (k < drawn.size() && k < record.input_seeds->size() && (*record.input_seeds)[k] == drawn[k]) ++k;
    *failure = Failure{FailureKind::malformed_output, FailureWho::candidate, {}, {}, "timed.json", "input_seeds", ""};
    throw std::runtime_error(fmt::format("{}: timed iteration {} records the inputs of seed {}, but densefeed drew seed {} for it: "
                                         "what was timed is not the inputs densefeed chose", path.string(), k,
                                         k < record.input_seeds->size() ? std::to_string((*record.input_seeds)[k]) : "none",
                                         k < drawn.size() ? std::to_string(drawn[k]) : "none"));
  }
  std::set<std::string> seen;  // input set and outputs
  for (std::size_t k = 0; k < record.iterations.size(); ++k) {
    const auto& e = record.iterations[k];
    const std::uint64_t seed = record.input_seeds ? (*record.input_seeds)[k] : run_seed;
    if (!seen.insert(std::to_string(seed) + " " + e.dump()).second) continue;
    const auto dir = out_dir / "timed" / std::to_string(k);
    const std::filesystem::path reference = reference_of(seed);
    for (const auto& o : gate.outputs) {
      const auto file = dir / (o.name + ".npy");
      if (std::filesystem::symlink_status(file, ec).type() != std::filesystem::file_type::regular) {
        throw std::runtime_error(fmt::format("{}: missing or not a plain file (the outputs of timed iteration {})", file.string(), k));
      }
      if (sha256_file(file) != e[o.name].get<std::string>()) {
        throw std::runtime_error(fmt::format("{}: its sha256 is not the one timed.json records for iteration {}", file.string(), k));
      }
      const OutputResult r = compare_output(o, c.values, reference, dir);
      if (r.comparison.verdict != Verdict::green) {
        *failure = r.failure;
        throw std::runtime_error(fmt::format("what was timed is not what was gated: timed iteration {}{}: {}: {}", k,
                                             record.input_seeds ? fmt::format(" (its input set, seed {})", seed) : "", o.name,
                                             r.comparison.reason));
      }
    }
  }
}

double mean_sample(const std::vector<ArmRound>& rounds) {
  double s = 0;
  std::size_t n = 0;
  for (const auto& r : rounds) {
    for (double v : r.samples_ms) s += v, ++n;
  }
  return n ? s / static_cast<double>(n) : 0;
}

std::vector<double> round_medians(const std::vector<ArmRound>& rounds) {
  std::vector<double> m;
  for (const auto& r : rounds) m.push_back(median(r.samples_ms));
  return m;
}

nlohmann::ordered_json fit_json(const WallFit& f) {
  if (!f.fitted) return nullptr;
  return {{"fixed_ms", f.fixed_s * 1e3}, {"per_iteration_ms", f.per_iteration_s * 1e3}, {"per_iteration_se_ms", f.per_iteration_se_s * 1e3}};
}

}  // namespace

BenchResult run_bench(const GateSpec& gate, const nlohmann::ordered_json& base_params,
                      const nlohmann::ordered_json& candidate_params, const BenchOptions& options) {
  BenchResult result;
  result.sandbox = require_sandbox(options.sandbox);
  const bool driven = gate.bench.driver.has_value();
  if (driven && !options.trusted) throw InfraError("the gate's benchmark driver needs the trusted context, which was not given");
  const int max_rounds = options.fixed_rounds ? *options.fixed_rounds : gate.bench.looks.back();
  // Stage failures found after the rounds: the first one decides the stage.
  const auto fail_stage = [&](Verdict v, FailureWho who, const std::string& detail, const std::string& reason) {
    if (result.verdict != Verdict::green) return;
    result.verdict = v;
    result.failure = Failure{FailureKind::implausible_timing, who, {}, {}, "samples.json", "", detail};
    result.reason = reason;
  };
  // The whole benchmark holds one allocation (a Slurm job: one node, its
  // GPUs alone) for all its rounds of both arms: both arms are timed on the
  // same machine, interleaved.
  AllocationRequest request;
  request.name = "bench";
  request.gpus = gate.gpus;
  request.time_limit = std::chrono::seconds(static_cast<long long>(
      std::ceil(static_cast<double>(gate.bench.cases.size()) * (gate.bench.max_seconds_per_case + 2 * gate.timeout_s))));
  Executor& ex = options.executor ? *options.executor : executor();
  const std::unique_ptr<Allocation> allocation = ex.allocate(request);
  // With protocol: session (and no driver, run here) each arm's session
  // serves every round of the benchmark: no process starts inside a round,
  // and each arm stays on the benchmark's GPU throughout.
  const bool sessions = gate.sessions && !driven && ex.name() == "local";
  std::unique_ptr<HarnessSession> arm_sessions[2];  // base, candidate
  // Destroyed before the sessions: both wind down at once.
  struct CloseInputs {
    std::unique_ptr<HarnessSession>* sessions;
    ~CloseInputs() {
      for (int i = 0; i < 2; ++i) {
        if (sessions[i]) sessions[i]->resume(), sessions[i]->close_input();
      }
    }
  } close_inputs{arm_sessions};
  int sessions_started[2] = {0, 0};
  std::string session_failure;  // why the last request failed ('' = answered ok)
  SessionAnswer last_answer;    // the last request's: where its files went, their hashes
  const auto run_in_session = [&](const UntrustedCommand& spec, bool is_base, const nlohmann::ordered_json& case_values,
                                  int iters) {
    auto& session = arm_sessions[is_base ? 0 : 1];
    int& started = sessions_started[is_base ? 0 : 1];
    if (!session || session->ended()) {
      session.reset();
      const auto dir = options.work_dir / fmt::format("bench-session-{}-{}", is_base ? "base" : "candidate", started++);
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      std::filesystem::create_directories(dir, ec);
      Launch launch;
      launch.untrusted = spec;
      UntrustedCommand& c = launch.untrusted;
      for (const char* k : {kCaseEnv, kSeedEnv, kOutEnv, kWarmupEnv, kItersEnv}) c.env.erase(k);
      c.cwd = dir;
      c.writable = {dir / "exchange"};
      c.stdout_path = dir / "stdout.log";
      c.stderr_path = dir / "stderr.log";
      c.timeout = std::chrono::hours(24 * 7);
      session = std::make_unique<HarnessSession>(std::move(launch), dir / "exchange",
                                                 fmt::format("the {}'s session", is_base ? "base" : "candidate"));
    }
    SessionRequest req;
    req.mode = "bench";
    req.case_values = case_values;
    req.seed = options.seed;
    req.warmup = gate.bench.warmup;
    req.iters = iters;
    // The other arm's session is held still while this one's round is
    // timed (HarnessSession::pause): it cannot load the machine under this
    // arm's clock.
    if (auto& other = arm_sessions[is_base ? 1 : 0]) other->pause();
    session->resume();
    const SessionAnswer a = session->request(req, spec.cwd / "out", spec.timeout);
    last_answer = a;
    LaunchResult r;
    r.placement = "local";
    ProcessResult& p = r.result.process;
    p.started = true;
    p.wall_s = a.wall_s;
    p.exit_code = 0;
    session_failure.clear();
    if (!a.ok) {
      session_failure = fmt::format("its session {}", a.failure);
      if (a.kind == FailureKind::timeout) p.timed_out = true, p.timeout_s = gate.timeout_s;
      else if (a.signal) p.signal = *a.signal, p.exit_code = -1;
      else p.exit_code = a.exit_code.value_or(1);
      if (a.kind == FailureKind::infrastructure) r.infrastructure = a.failure;
    }
    if (a.ended) session.reset();
    return r;
  };
  // The rounds' orders of input sets: unknown to either arm until its round
  // starts (std::random_device, not the run's seed).
  std::random_device entropy;
  std::seed_seq draw_seed{entropy(), entropy(), entropy(), entropy()};
  std::mt19937_64 draw(draw_seed);
  for (std::size_t ci = 0; ci < gate.bench.cases.size(); ++ci) {
    const Case& c = gate.bench.cases[ci];
    BenchCaseResult bc;
    bc.bench_case = c;
    bc.timing = driven ? "driver" : "candidate";
    bc.predicted_speedup = options.predicted_speedup;
    if (auto it = options.noise_floor.find(c.label); it != options.noise_floor.end()) {
      bc.calibrated_floor = it->second;
      bc.threshold = std::max(0.01, it->second);
    }
    const auto ref = options.reference_out.find(c.label);
    if (!options.reference_out.empty() && ref == options.reference_out.end()) {
      throw InfraError(fmt::format("bench case {} was not gated in this run: every benchmarked case is gated first", c.label));
    }
    // The driver's input sets (input_sets.h): a pool per case, a fresh random
    // order of distinct sets of it every round; the reference's outputs of
    // each set a timed iteration of the candidate used, run once per set (set
    // 0, the run's seed, is the gate stage's).
    const std::vector<std::uint64_t> pool =
        driven ? input_set_seeds(options.seed, input_set_count(gate.bench.warmup, gate.bench.iters)) : std::vector<std::uint64_t>{};
    std::map<std::uint64_t, std::filesystem::path> set_reference;
    if (ref != options.reference_out.end()) set_reference[options.seed] = ref->second;
    std::size_t reference_runs = 0;
    double reference_wall_s = 0;
    bool rotated = false;
    DecisionInput input;
    input.threshold = bc.threshold;
    input.looks = gate.bench.looks;
    input.seed = options.seed;
    const auto case_start = std::chrono::steady_clock::now();
    // The clock outside the kernel's process (outside_clock.h): a driver's
    // rounds on this machine are bracketed by densefeed's own timestamps, and
    // those decide; the driver's samples are kept as a cross-check. A Slurm
    // job's driver runs on another machine, beyond a socket's reach: there
    // the driver's in-process samples decide, as before issue 26.
    const bool outside = driven && ex.name() == "local";
    std::vector<ClockRoundSamples> clock_rounds[2];  // base, candidate
    std::size_t bounded_counts[2][2] = {{0, 0}, {0, 0}};  // per arm: samples raised, lowered to the outside clock's bounds
    std::vector<double> own_overhead_ms[2];  // per arm and round: the median of its own empty brackets
    std::vector<double> least_empty;         // the empty brackets (ms) of the round of either arm with the least median so far
    int long_factor = 2;
    for (int round = 0; round < max_rounds; ++round) {
      // ABBA ordering: rounds 0 and 3 (mod 4) start with the base. Odd rounds
      // run long_factor x iters: the wall time's growth with them is
      // densefeed's own measure of each arm's per-iteration cost. A
      // self-timed benchmark's factor is set by the base's first round
      // (timing_checks.h long_round_factor) so that the wall fit can see an
      // iteration beside a process's start-up; a driven one's stays 2 (the
      // outside clock times every iteration, and the input sets are drawn
      // for 2 x iters).
      const bool base_first = round % 4 == 0 || round % 4 == 3;
      if (round == 1 && !driven && !bc.base_walls.empty()) long_factor = long_round_factor(bc.base_walls.front());
      const int iters = gate.bench.iters * (round % 2 == 0 ? 1 : long_factor);
      for (int k = 0; k < 2; ++k) {
        const bool is_base = (k == 0) == base_first;
        const auto dir = options.work_dir / fmt::format("bench-{:02}-round-{:02}-{}", ci, round, is_base ? "base" : "candidate");
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
        std::filesystem::create_directories(dir / "out", ec);
        if (ec) throw InfraError(fmt::format("{}: cannot create: {}", dir.string(), ec.message()));
        const ArmContext& arm = is_base ? options.base : options.candidate;
        const nlohmann::ordered_json& params = is_base ? base_params : candidate_params;
        UntrustedCommand spec;
        ArmContext driver_arm;
        if (driven) {
          // The driver is trusted code from the trusted tree; the arm's tree
          // is only where its kernel is loaded from. It runs in the same
          // sandbox as the arm's own harness would: it hosts the arm's code.
          const BenchDriver& d = *gate.bench.driver;
          driver_arm = *options.trusted;
          driver_arm.readable.insert(driver_arm.readable.end(), arm.readable.begin(), arm.readable.end());
          driver_arm.hidden.insert(driver_arm.hidden.end(), arm.hidden.begin(), arm.hidden.end());
          // A cache of its own per arm: the arm's kernel compiles into it,
          // so it is neither the reference's (trusted) nor the arm's own
          // harness's (arm_context.h).
          driver_arm.cache_dir = arm.cache_dir.empty() ? std::filesystem::path()
                                                       : arm.cache_dir.parent_path() / (arm.cache_dir.filename().string() + "-driver");
          TemplateValues values;
          values.case_values = c.values;
          values.params = nlohmann::ordered_json::object();
          values.seed = options.seed;
          values.out = (dir / "out").string();
          spec.argv = arm_command(d.command, values, driver_arm);
          spec.arm = &driver_arm;
          nlohmann::ordered_json kernel = d.module.empty() ? nlohmann::ordered_json{{"library", d.library}, {"symbol", d.symbol}}
                                                           : nlohmann::ordered_json{{"module", d.module}, {"function", d.function}};
          spec.env["DENSEFEED_KERNEL"] = kernel.dump();
          spec.env["DENSEFEED_ARM_PROJECT"] = arm.project.string();
          spec.env["DENSEFEED_TRUSTED_PROJECT"] = options.trusted->project.string();
          spec.env["DENSEFEED_PARAMS"] = params.dump();
          std::string kernel_path;
          if (d.module.empty()) {
            // A library is a build product: it is looked up where the arm's
            // own commands' bare names are (a revision's build bin, then the
            // project's harness_path under the arm's tree), in that order.
            for (const auto& dir : arm.exe_dirs) kernel_path += (kernel_path.empty() ? "" : ":") + dir.lexically_normal().string();
          } else {
            // The arm's kernel folder first, then its PYTHONPATH (the
            // project's python.path and densefeed's module folder).
            kernel_path = (arm.project / d.path).lexically_normal().string();
            if (auto p = arm.env.find("PYTHONPATH"); p != arm.env.end()) kernel_path += ":" + p->second;
          }
          spec.env["DENSEFEED_KERNEL_PATH"] = kernel_path;
        } else {
          spec.argv = arm_command(gate.candidate_command, {c.values, params, options.seed, (dir / "out").string()}, arm);
          spec.arm = &arm;
        }
        for (const auto& [k, v] : bench_environment(c.values, options.seed, dir / "out", gate.bench.warmup, iters)) spec.env[k] = v;
        std::vector<std::uint64_t> round_seeds;  // warm-up first, then the timed iterations'
        if (driven) {
          round_seeds = draw_round_seeds(pool, static_cast<std::size_t>(gate.bench.warmup + iters), draw);
          spec.env[kInputSeedsEnv] = input_seeds_value(round_seeds);
        }
        if (!options.gpu.empty() && ex.assigns_gpus()) spec.env["CUDA_VISIBLE_DEVICES"] = options.gpu;
        spec.cwd = dir;
        spec.writable = {dir / "out"};
        spec.readable = options.sandbox_readable;
        spec.stdout_path = dir / "stdout.log";
        spec.stderr_path = dir / "stderr.log";
        spec.timeout = std::chrono::milliseconds(static_cast<long long>(gate.timeout_s * 1000));
        spec.limits = gate.limits;
        spec.sandbox = options.sandbox;
        std::optional<OutsideClock> clock;
        if (outside) {
          clock.emplace();
          spec.clock_fd = clock->child_fd();
          spec.env[kClockFdEnv] = std::to_string(kClockChildFd);
        }
        Launch launch;
        launch.untrusted = spec;
        const LaunchResult ran = sessions ? run_in_session(spec, is_base, c.values, iters) : allocation->run(launch);
        std::optional<ClockRound> clocked;
        if (clock) {
          auto finished = clock->finish();
          clocked = read_clock_round(finished.records, finished.held_open, gate.bench.warmup, iters);
        }
        const UntrustedResult& launched = ran.result;
        const ProcessResult& pr = launched.process;
        if (result.placement.find(ran.placement) == std::string::npos) {
          result.placement += (result.placement.empty() ? "" : "; ") + ran.placement;
        }
        result.harness_wall_s += pr.wall_s;
        const FailureWho who = is_base ? FailureWho::base : FailureWho::candidate;
        Failure failure{FailureKind::malformed_output, who, {}, {}, "samples.json", "", ""};
        try {
          if (!ran.infrastructure.empty()) {
            failure = Failure{FailureKind::infrastructure, FailureWho::densefeed, {}, {}, "", "", ran.infrastructure};
            result.verdict = Verdict::error;
            result.failure = failure;
            result.reason = fmt::format("case {}: the {} arm's round {} did not run to an end of its own: {} (an infrastructure "
                                        "failure: error)", c.label, is_base ? "base" : "candidate", round, ran.infrastructure);
            return result;
          }
          if (!launched.ok() && !session_failure.empty()) {
            failure = failure_value(who, launched);
            failure.detail = session_failure;
            throw std::runtime_error(session_failure);
          }
          if (!launched.ok()) {
            failure = failure_value(who, launched);
            const LogTail tail = log_tail(spec.stdout_path, spec.stderr_path, 4);
            throw std::runtime_error(fmt::format("it {}{}", launched.describe(), tail.text.empty() ? "" : "; " + tail.stream + ": " + tail.text));
          }
          ArmRound r = read_samples(dir / "out" / "samples.json");
          if (r.samples_ms.size() != static_cast<std::size_t>(iters)) {
            throw std::runtime_error(fmt::format("{}: {} samples for the {} iterations it was asked to time (DENSEFEED_ITERS)",
                                                 (dir / "out" / "samples.json").string(), r.samples_ms.size(), iters));
          }
          RoundWall w{pr.wall_s, gate.bench.warmup + iters, iters, 0};
          for (double v : r.samples_ms) w.samples_sum_ms += v;
          if (clocked) {
            if (clocked->error != ClockProtocolError::none) {
              failure = Failure{FailureKind::implausible_timing, who, {}, {}, "", "", fmt::format("clock_protocol: {}", to_string(clocked->error))};
              throw std::runtime_error(fmt::format("round {}: {}", round, clocked->reason));
            }
            // What decides is densefeed's clock; the driver's samples are
            // the cross-check (check_clock_agrees) and the wall checks' claims.
            // The overhead a sample may be short of its bracket by: the
            // empty brackets of the round, of either arm so far, with the
            // least median; the same for both arms (an arm's own would let a
            // kernel that slows its own empty brackets, e.g. with device work
            // queued at load that the empty call waits behind, widen its own
            // lower bound; one arm's own beside the other's least made an A/A
            // of kda-decode on the H200 read 1.038x twice).
            const int a = is_base ? 0 : 1;
            if (least_empty.empty() || median(clocked->empty_ms) < median(least_empty)) least_empty = clocked->empty_ms;
            own_overhead_ms[a].push_back(median(clocked->empty_ms));
            clock_rounds[a].push_back({r.samples_ms, clocked->timed_ms, median(least_empty)});
            // The driver's samples, bounded by densefeed's intervals around
            // them (bound_by_outside_clock): shrunk ones count as what
            // densefeed saw less the brackets' overhead.
            const BoundedSamples bounded = bound_by_outside_clock(r.samples_ms, clocked->timed_ms, least_empty);
            bounded_counts[is_base ? 0 : 1][0] += bounded.raised;
            bounded_counts[is_base ? 0 : 1][1] += bounded.lowered;
            r.samples_ms = bounded.ms;
          }
          (is_base ? bc.base_walls : bc.candidate_walls).push_back(w);
          (is_base ? bc.base : bc.candidate).push_back(std::move(r));
          // The candidate's timed outputs are what was gated; the base's may be
          // as wrong as the base is (it is what the candidate is compared with).
          std::filesystem::path last_reference = ref != options.reference_out.end() ? ref->second : std::filesystem::path();
          if (ref != options.reference_out.end() && !is_base) {
            if (driven) {
              failure = Failure{FailureKind::malformed_output, who, {}, {}, "timed.json", "", ""};
              const TimedRecord record = read_timed(gate, dir / "out", iters);
              const std::vector<std::uint64_t> timed_seeds(round_seeds.begin() + gate.bench.warmup, round_seeds.end());
              if (!record.input_seeds) {
                // The gate's frozen driver, not the candidate, left them out.
                result.verdict = Verdict::error;
                result.failure = Failure{FailureKind::malformed_output, FailureWho::driver, {}, {}, "timed.json", "input_seeds", ""};
                result.reason = fmt::format(
                    "case {}: the gate's driver recorded no input sets in {}: densefeed draws a set of inputs for every "
                    "iteration ({}) so that a kernel caching its results gains nothing, and a driver must build each "
                    "iteration's inputs from its seed (densefeed_driver.Driver.time(inputs=...), driver.h "
                    "TimingOptions::prepare); the bench stage is an error, the candidate is not judged",
                    c.label, (dir / "out" / "timed.json").string(), kInputSeedsEnv);
                return result;
              }
              rotated = true;
              {
                std::vector<std::uint64_t> missing;
                for (std::uint64_t seed : timed_seeds) {
                  if (!set_reference.count(seed) && std::find(missing.begin(), missing.end(), seed) == missing.end()) missing.push_back(seed);
                }
                if (!missing.empty()) {
                  if (!options.references) {
                    throw InfraError(fmt::format("case {}: the driver drew {} input sets but this benchmark cannot run the "
                                                 "reference for them (BenchOptions::references unset)", c.label, missing.size()));
                  }
                  for (const ReferenceRun& run : options.references(c, missing)) {
                    ++reference_runs;
                    reference_wall_s += run.wall_s;
                    if (!run.reason.empty()) {
                      result.verdict = Verdict::error;
                      result.failure = run.failure;
                      result.reason = fmt::format("case {}: {} (the bench stage is an error: the candidate is not judged)",
                                                  c.label, run.reason);
                      return result;
                    }
                    set_reference[run.seed] = run.out;
                  }
                }
                last_reference = set_reference.at(timed_seeds.back());
              }
              check_timed_outputs(gate, c, dir / "out", record, timed_seeds, options.seed,
                                  [&](std::uint64_t seed) { return set_reference.at(seed); }, &failure);
            }
            for (const auto& out : gate.outputs) {
              const OutputResult o = compare_output(out, c.values, last_reference, dir / "out");
              if (o.comparison.verdict != Verdict::green) {
                failure = o.failure;
                failure.who = who;
                throw std::runtime_error(fmt::format("round {}: what was timed is not what was gated: {}: {}", round,
                                                     out.name, o.comparison.reason));
              }
            }
            // What was compared is densefeed's copy (session.h); a file the
            // session kept open and wrote after its answer is still caught.
            if (sessions) {
              if (const auto changed = changed_after_answer(last_answer.answered, last_answer.out_hashes); !changed.empty()) {
                failure = Failure{FailureKind::malformed_output, who, {}, {}, changed, "", "outputs changed after the answer"};
                throw std::runtime_error(fmt::format("round {}: its session changed its output {} after it answered (its sha256 "
                                                     "was taken then): what it answered with is not what it left", round, changed));
              }
            }
          }
          // Every timed iteration's outputs were gated (or, the base's, are
          // not): their hashes stay in timed.json, the files go (one per
          // iteration and output: a large case's would fill the disk).
          std::filesystem::remove_all(dir / "out" / "timed", ec);
        } catch (const std::runtime_error& e) {
          failure.who = who;
          result.verdict = is_base ? Verdict::error : Verdict::red;
          result.failure = failure;
          result.reason = fmt::format("case {}: the {} arm in bench mode: {}", c.label, is_base ? "base" : "candidate", e.what());
          return result;
        }
      }
      input.base = bc.base;
      input.candidate = bc.candidate;
      // A self-timed candidate's faster needs densefeed's own clock to agree
      // (check_wall_confirms): until it does, the runner goes on to its next
      // look, and the cap or the last look ends it inconclusive; not when the
      // wall growth already flags the candidate (more rounds cannot clear it).
      const auto unconfirmed = [&] {
        const double b = mean_sample(bc.base), k = mean_sample(bc.candidate);
        return !driven && decide(input).verdict == BenchVerdict::faster &&
               check_wall_growth(bc.base_walls, bc.candidate_walls, b, k, !options.agent_base).empty() &&
               check_wall_confirms(bc.base_walls, bc.candidate_walls, b, k).has_value();
      };
      if (!options.fixed_rounds && should_stop(input) && !unconfirmed()) break;
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
    // densefeed's own cross-checks of the timings (timing_checks.h).
    for (const auto& [walls, arm] : {std::pair{&bc.base_walls, "base"}, std::pair{&bc.candidate_walls, "candidate"}}) {
      for (auto& f : check_round_sums(*walls, arm)) bc.flags.push_back(std::move(f));
    }
    // The claims the wall checks test are what the driver (or harness)
    // wrote, not densefeed's own clock.
    const auto claimed_mean = [&](int arm, const std::vector<ArmRound>& rounds) {
      if (!outside) return mean_sample(rounds);
      double sum = 0;
      std::size_t n = 0;
      for (const auto& cr : clock_rounds[arm]) {
        for (double v : cr.inside) sum += v, ++n;
      }
      return n ? sum / static_cast<double>(n) : 0.0;
    };
    const double base_claimed = claimed_mean(0, bc.base), candidate_claimed = claimed_mean(1, bc.candidate);
    if (outside) {
      nlohmann::ordered_json overhead = nlohmann::ordered_json::object();
      for (const auto& [arm, name] : {std::pair{0, "base"}, std::pair{1, "candidate"}}) {
        std::vector<double> per_round;
        for (double v : own_overhead_ms[arm]) per_round.push_back(v * 1e3);
        overhead[name] = per_round.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(median(per_round));
        if (auto f = check_clock_agrees(clock_rounds[arm], name)) bc.flags.push_back(std::move(*f));
      }
      bc.checks["outside_clock"] = {{"samples", "the driver's own, bounded by densefeed's outside clock around each (timing_checks.h "
                                                "bound_by_outside_clock): at most the bracket, at least the bracket less its overhead"},
                                    {"bracket_overhead_us", overhead},
                                    {"samples_raised", {{"base", bounded_counts[0][0]}, {"candidate", bounded_counts[1][0]}}},
                                    {"samples_lowered", {{"base", bounded_counts[0][1]}, {"candidate", bounded_counts[1][1]}}},
                                    {"overhead_of", fmt::format("the median over rounds of each round's median of {} empty brackets "
                                                                "(the driver's two writes to the clock socket around its timer, "
                                                                "a device timer's least device call and its sync, with no kernel "
                                                                "call between them); each arm's own, while the bounds use the least "
                                                                "so far of either arm",
                                                                kEmptyBrackets)}};
    } else if (driven) {
      bc.checks["outside_clock"] = fmt::format("not available under the {} executor: the driver's in-process samples decide",
                                               ex.name());
    }
    // Under a trusted driver the untimed work is the driver's own, the same
    // in both arms; a self-timed base the agent wrote credits nothing.
    const bool credit_base_untimed = driven || !options.agent_base;
    for (auto& f : check_wall_growth(bc.base_walls, bc.candidate_walls, base_claimed, candidate_claimed, credit_base_untimed)) {
      bc.flags.push_back(std::move(f));
    }
    if (!driven && bc.decision.verdict == BenchVerdict::faster && bc.flags.empty()) {
      if (auto f = check_wall_confirms(bc.base_walls, bc.candidate_walls, base_claimed, candidate_claimed)) bc.flags.push_back(std::move(*f));
    }
    for (const auto& s : arm_sessions) {
      if (s) bc.checks["freeze"] = s->freeze_mechanism();  // how the other arm's session was held still
    }
    if (driven) {
      bc.checks["inputs"] = {
          {"sets", pool.size()},
          {"gated", rotated},
          {"reference_runs", reference_runs},
          {"reference_wall_s", reference_wall_s},
          {"what", fmt::format("every iteration of a round has an input set of its own, drawn in a random order from {} sets "
                               "(input_sets.h); each timed iteration of the candidate is gated against the reference of its "
                               "set", pool.size())}};
    }
    bc.checks["wall_fit"] = {{"base", fit_json(fit_wall(bc.base_walls))}, {"candidate", fit_json(fit_wall(bc.candidate_walls))},
                             {"base_claimed_ms", base_claimed}, {"candidate_claimed_ms", candidate_claimed},
                             {"long_round_factor", long_factor}};
    std::vector<double> clocks;
    for (std::size_t r = 0; r < bc.base.size() && r < bc.candidate.size(); ++r) {
      if (bc.base[r].sm_clock_mhz) clocks.push_back(*bc.base[r].sm_clock_mhz);
      if (bc.candidate[r].sm_clock_mhz) clocks.push_back(*bc.candidate[r].sm_clock_mhz);
    }
    if (auto d = check_drift(round_medians(bc.base), round_medians(bc.candidate), bc.threshold, clocks)) bc.flags.push_back(std::move(*d));
    if (bc.predicted_speedup && *bc.predicted_speedup > 0 && bc.decision.speedup > 0) {
      bc.prediction_error = bc.decision.speedup / *bc.predicted_speedup - 1;
    }
    result.cases.push_back(std::move(bc));
  }

  // Across cases and against the machine.
  std::vector<CaseTiming> timings;
  for (auto& bc : result.cases) {
    CaseTiming t{bc.bench_case.label, bc.decision.base_median_ms, bc.decision.candidate_median_ms, std::nullopt, std::nullopt};
    if (!gate.bench.work.bytes.empty()) t.bytes = evaluate_work(gate.bench.work.bytes, bc.bench_case.values);
    if (!gate.bench.work.flops.empty()) t.flops = evaluate_work(gate.bench.work.flops, bc.bench_case.values);
    if (t.bytes) bc.checks["bytes"] = *t.bytes;
    if (t.flops) bc.checks["flops"] = *t.flops;
    if (t.bytes || t.flops) {
      if (options.ceilings) {
        bc.checks["ceilings"] = {{"bytes_per_s", options.ceilings->bytes_per_s}, {"flops_per_s", options.ceilings->flops_per_s},
                                 {"source", options.ceilings->source}};
        for (auto& f : check_ceilings(t, *options.ceilings)) bc.flags.push_back(std::move(f));
      } else {
        bc.checks["ceilings"] = "not measured on this machine: run `densefeed machine calibrate`";
      }
    }
    timings.push_back(t);
  }
  for (auto& f : check_flat_timer(timings)) {
    for (auto& bc : result.cases) bc.flags.push_back(f);
  }
  for (auto& bc : result.cases) {
    if (bc.decision.speedup > gate.bench.max_speedup) {
      TimingFlag f;
      f.kind = TimingFlagKind::beyond_bound;
      f.arm = "candidate";
      f.reason = fmt::format("a speedup of {:.4g}x is beyond the gate's bound of {:.4g}x (bench.max_speedup): a person must "
                             "accept it before promotion (densefeed promote --accept-speedup-beyond-bound)",
                             bc.decision.speedup, gate.bench.max_speedup);
      f.figures = {{"speedup", bc.decision.speedup}, {"max_speedup", gate.bench.max_speedup}};
      bc.flags.push_back(std::move(f));
    }
    // What the flags mean for the case and the stage.
    std::set<std::string> worded;  // flag reasons already in the decision's words (two flags may say the same)
    for (const auto& f : bc.flags) {
      if (f.kind == TimingFlagKind::beyond_bound) continue;
      // A flag takes a case's faster or same away, never a slower (as with
      // the guards: nothing may make a candidate look better than slower).
      const bool new_words = worded.insert(f.reason).second;
      if (bc.decision.verdict == BenchVerdict::slower) {
        if (new_words) bc.decision.reason += "; also: " + f.reason;
      } else if (new_words) {
        bc.decision.verdict = BenchVerdict::inconclusive;
        bc.decision.reason = fmt::format("inconclusive: {} ({})", f.reason, bc.decision.reason);
      }
      if (f.kind == TimingFlagKind::drift || f.kind == TimingFlagKind::wall_unreliable || f.kind == TimingFlagKind::wall_unconfirmed) continue;
      const std::string text = fmt::format("case {}: {}", bc.bench_case.label, f.reason);
      if (f.arm == "candidate") {
        fail_stage(Verdict::red, FailureWho::candidate, to_string(f.kind), text);
      } else {
        fail_stage(Verdict::error, driven ? FailureWho::driver : FailureWho::base, to_string(f.kind), text);
      }
    }
  }
  return result;
}

}  // namespace densefeed
