// kv_overlap: harness of the KV-transfer case (DESIGN.md, second worked case;
// issue 5), speaking the harness protocol of DESIGN.md. A serving process is
// modelled on the CPU (no GPU; serving_model.h says how): a prefill loop whose
// dispatch spins on a completion counter, and a KV transfer thread, sharing an
// interpreter-style lock. Times are wall times (std::chrono::steady_clock).
//
//   kv_overlap --variant hold|release [--scenario prefill|prefill_kv|both]
//              [--steps 20] [--step-us 1000] [--host-us 50] [--switch-steps 5]
//              [--chunks 16] [--chunk-elems 4096] [--chunk-us 400]
//              [--submit-us 150] [--window 2] [--reps 7] [--seed S] [--out DIR]
//
//   --variant       hold: dispatch keeps the lock while it spins (the bug);
//                   release: dispatch releases it for the wait (the fix)
//   --steps         prefill steps, one kernel each, of --step-us on the compute stream
//   --host-us       host work per step under the lock, before dispatch
//   --switch-steps  whole steps the main thread holds the lock before it hands
//                   it to a waiting thread (CPython's 5 ms switch interval, in steps)
//   --chunks        KV chunks of --chunk-elems float32, each --chunk-us on the copy stream
//   --submit-us     CPU time of one chunk's submission, under the lock
//   --window        chunks in flight on the copy stream at most
//   --reps          acceptance repetitions of each scenario
//   --seed          KV values' seed (default DENSEFEED_SEED; gate and bench need one,
//                   trace and acceptance use 0 without)
// Defaults: a 20 ms prefill (20 x 1 ms) and a 6.4 ms transfer (16 x 0.4 ms)
// that fits inside it when the lock lets the submissions through; an
// acceptance run takes about 0.4 s.
//
// Scenarios: prefill (the loop alone), prefill_kv (the loop while the transfer
// runs; it ends when both the loop and the last chunk's copy have ended).
//
// gate  (DENSEFEED_MODE unset or gate): runs prefill_kv once; writes DIR/kv.npy,
//       shape [chunks, chunk_elems], float32: the KV buffer the transfer filled
//       (poisoned with NaN first).
// bench: runs prefill_kv DENSEFEED_WARMUP + DENSEFEED_ITERS times; writes
//        DIR/samples.json (one prefill_kv time in ms per timed iteration) and
//        the last timed iteration's DIR/kv.npy, as in gate mode.
// trace: runs each --scenario (default prefill_kv; both: prefill, then
//        prefill_kv) once untraced, then once traced; writes DIR/trace.json in
//        Chrome Trace Event Format as PyTorch's profiler writes it. Lanes: main
//        thread (prefill, prefill_step, dispatch, cudaLaunchKernel,
//        dispatch_wait [args.holds_lock], lock_handoff), kv transfer thread
//        (lock_wait, kv_submit, cudaMemcpyAsync), GPU 0 stream 7 (compute:
//        prefill_kernel) and stream 20 (copy: kv_transfer); runtime calls and
//        device ops share args.correlation.
// acceptance: one invocation measures both scenarios (--scenario narrows it):
//        one untraced warm-up of each, then --reps rounds of prefill then
//        prefill_kv; writes DIR/metrics.json:
//          {"prefill_ms": [...], "prefill_kv_ms": [...], "prefill_kv_loop_ms": [...]}
//        prefill_kv_loop_ms: the prefill loop alone inside the prefill_kv runs.
// Exit codes: 0 success, 2 bad argument or environment, 3 internal failure.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "harness_args.h"
#include "harness_env.h"
#include "kv_values.h"
#include "npy_writer.h"
#include "session_serve.h"
#include "samples_writer.h"
#include "serving_model.h"
#include "trace_recorder.h"

#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace {

namespace kv = densefeed::kv_overlap;

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;
constexpr int kExitInternal = 3;

// A bad argument: the message starts with the flag's name.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The arguments exactly as given; parsed and checked by resolve().
struct RawArgs {
  std::string variant;
  std::string scenario;
  std::string steps = "20";
  std::string step_us = "1000";
  std::string host_us = "50";
  std::string switch_steps = "5";
  std::string chunks = "16";
  std::string chunk_elems = "4096";
  std::string chunk_us = "400";
  std::string submit_us = "150";
  std::string window = "2";
  std::string reps = "7";
  std::string seed;
  std::string out;
};

struct Config {
  kv::ModelConfig model;
  std::vector<kv::Scenario> scenarios;  // in the order they run
  unsigned reps = 7;
  std::uint64_t seed = 0;
  std::filesystem::path out;
  densefeed::HarnessEnv env;
};

// A time in microseconds: a decimal integer in [0, 10^6].
std::chrono::microseconds parse_us(std::string_view flag, const std::string& text) {
  const std::optional<std::uint64_t> v = densefeed::parse_u64(text);
  if (!v || *v > 1'000'000) {
    throw UsageError(fmt::format("{}: expected microseconds, an integer in [0, 1000000], got '{}'", flag, text));
  }
  return std::chrono::microseconds(static_cast<std::int64_t>(*v));
}

Config resolve(const RawArgs& raw, const densefeed::HarnessEnv& env) {
  Config c;
  c.env = env;
  const auto variant = kv::parse_variant(raw.variant);
  if (!variant) throw UsageError(fmt::format("--variant: expected hold or release, got '{}'", raw.variant));
  c.model.variant = *variant;
  const bool needs_transfer = env.mode == densefeed::HarnessMode::gate || env.mode == densefeed::HarnessMode::bench;
  if (raw.scenario.empty()) {
    if (env.mode == densefeed::HarnessMode::acceptance) {
      c.scenarios = {kv::Scenario::prefill, kv::Scenario::prefill_kv};
    } else {
      c.scenarios = {kv::Scenario::prefill_kv};
    }
  } else if (raw.scenario == "both") {
    c.scenarios = {kv::Scenario::prefill, kv::Scenario::prefill_kv};
  } else if (const auto s = kv::parse_scenario(raw.scenario)) {
    c.scenarios = {*s};
  } else {
    throw UsageError(fmt::format("--scenario: expected prefill, prefill_kv or both, got '{}'", raw.scenario));
  }
  if (needs_transfer && (c.scenarios.size() != 1 || c.scenarios.front() != kv::Scenario::prefill_kv)) {
    throw UsageError(fmt::format("--scenario: DENSEFEED_MODE={} runs the transfer, so prefill_kv only, got '{}'",
                                 densefeed::to_string(env.mode), raw.scenario));
  }
  c.model.steps = densefeed::parse_positive_arg("--steps", raw.steps);
  c.model.step_time = parse_us("--step-us", raw.step_us);
  c.model.host_time = parse_us("--host-us", raw.host_us);
  c.model.switch_steps = densefeed::parse_positive_arg("--switch-steps", raw.switch_steps);
  c.model.chunks = densefeed::parse_positive_arg("--chunks", raw.chunks);
  c.model.chunk_elems = densefeed::parse_positive_arg("--chunk-elems", raw.chunk_elems);
  c.model.chunk_time = parse_us("--chunk-us", raw.chunk_us);
  c.model.submit_time = parse_us("--submit-us", raw.submit_us);
  c.model.window = densefeed::parse_positive_arg("--window", raw.window);
  const std::size_t reps = densefeed::parse_positive_arg("--reps", raw.reps);
  if (reps > 1000) throw UsageError(fmt::format("--reps: expected at most 1000, got {}", reps));
  c.reps = static_cast<unsigned>(reps);
  if (c.model.chunks * c.model.chunk_elems > (std::size_t{1} << 28)) {
    throw UsageError(fmt::format("--chunks/--chunk-elems: {} x {} float32 is over the 1 GiB this harness allows",
                                 c.model.chunks, c.model.chunk_elems));
  }
  c.seed = (needs_transfer || !raw.seed.empty() || env.seed) ? densefeed::seed_arg(raw.seed, env) : 0;
  c.out = densefeed::out_arg(raw.out, env);
  return c;
}

// The KV cache to send and the buffer it lands in, poisoned with NaN so that a
// chunk the transfer did not deliver fails the gate.
struct KvBuffers {
  std::vector<float> source;
  std::vector<float> received;

  explicit KvBuffers(const Config& c)
      : source(c.model.chunks * c.model.chunk_elems),
        received(source.size(), std::numeric_limits<float>::quiet_NaN()) {
    kv::fill_kv(c.seed, c.model.chunks, c.model.chunk_elems, source);
  }
  void poison() { std::fill(received.begin(), received.end(), std::numeric_limits<float>::quiet_NaN()); }
};

void write_kv(const Config& c, const KvBuffers& kv) {
  const std::vector<std::size_t> shape = {c.model.chunks, c.model.chunk_elems};
  densefeed::write_npy(c.out / "kv.npy", kv.received, shape);
}

void run_gate(const Config& c) {
  KvBuffers kv(c);
  kv::run_scenario(c.model, kv::Scenario::prefill_kv, kv.source, kv.received, {});
  write_kv(c, kv);
}

void run_bench(const Config& c) {
  KvBuffers kv(c);
  std::vector<double> samples;
  for (unsigned it = 0; it < c.env.warmup + c.env.iters; ++it) {
    kv.poison();
    const kv::ScenarioTimes t = kv::run_scenario(c.model, kv::Scenario::prefill_kv, kv.source, kv.received, {});
    if (it >= c.env.warmup) samples.push_back(t.total_ms);
  }
  densefeed::write_samples_json(c.out / "samples.json", samples);
  write_kv(c, kv);
}

std::int64_t os_thread_id() {
#ifdef __linux__
  return static_cast<std::int64_t>(::syscall(SYS_gettid));
#else
  return 1;
#endif
}

nlohmann::ordered_json config_json(const Config& c) {
  const kv::ModelConfig& m = c.model;
  nlohmann::ordered_json scenarios = nlohmann::ordered_json::array();
  for (kv::Scenario s : c.scenarios) scenarios.push_back(kv::to_string(s));
  return {{"variant", kv::to_string(m.variant)}, {"scenarios", scenarios},
          {"steps", m.steps},                    {"step_us", m.step_time.count()},
          {"host_us", m.host_time.count()},      {"switch_steps", m.switch_steps},
          {"chunks", m.chunks},                  {"chunk_elems", m.chunk_elems},
          {"chunk_us", m.chunk_time.count()},    {"submit_us", m.submit_time.count()},
          {"window", m.window}};
}

void run_trace(const Config& c) {
  KvBuffers kv(c);
  for (kv::Scenario s : c.scenarios) kv::run_scenario(c.model, s, kv.source, kv.received, {});  // warm-up
  kv::TraceRecorder recorder;
#ifdef __linux__
  const std::int64_t pid = static_cast<std::int64_t>(::getpid());
#else
  const std::int64_t pid = 1;
#endif
  recorder.name_process(pid, "kv_overlap serving process");
  recorder.name_process(0, "GPU 0 (simulated)");
  kv::TraceTargets targets;
  targets.recorder = &recorder;
  targets.pid = pid;
  targets.main = &recorder.add_lane(pid, os_thread_id(), "main thread (prefill)", 1, false);
  targets.compute = &recorder.add_lane(0, 7, "stream 7 (compute)", 7, true);
  targets.copy = &recorder.add_lane(0, 20, "stream 20 (copy)", 20, true);
  // Enough room that recording never reallocates inside a run.
  targets.main->events.reserve(c.scenarios.size() * (c.model.steps * 5 + 1));
  targets.compute->events.reserve(c.scenarios.size() * c.model.steps);
  targets.copy->events.reserve(c.model.chunks);
  for (kv::Scenario s : c.scenarios) {
    kv.poison();
    kv::run_scenario(c.model, s, kv.source, kv.received, targets);
  }
  recorder.write(c.out / "trace.json", {{"kv_overlap", config_json(c)}});
}

void run_acceptance(const Config& c) {
  KvBuffers kv(c);
  for (kv::Scenario s : c.scenarios) kv::run_scenario(c.model, s, kv.source, kv.received, {});  // warm-up
  std::vector<double> prefill, prefill_kv, prefill_kv_loop;
  for (unsigned r = 0; r < c.reps; ++r) {
    for (kv::Scenario s : c.scenarios) {
      kv.poison();
      const kv::ScenarioTimes t = kv::run_scenario(c.model, s, kv.source, kv.received, {});
      if (s == kv::Scenario::prefill) {
        prefill.push_back(t.prefill_ms);
      } else {
        prefill_kv.push_back(t.total_ms);
        prefill_kv_loop.push_back(t.prefill_ms);
      }
    }
  }
  nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
  if (!prefill.empty()) metrics["prefill_ms"] = prefill;
  if (!prefill_kv.empty()) {
    metrics["prefill_kv_ms"] = prefill_kv;
    metrics["prefill_kv_loop_ms"] = prefill_kv_loop;
  }
  const std::filesystem::path path = c.out / "metrics.json";
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << metrics.dump(2) << "\n";
  file.close();
  if (!file) throw std::runtime_error(fmt::format("{}: write failed", path.string()));
}

// One case: `own` as argv[1..], `env` the protocol's variables (the
// process's, or a session request's). Throws UsageError for a bad argument.
int run_case(const std::vector<std::string>& own, const densefeed::HarnessEnv& env) {
  CLI::App app{"kv_overlap: a KV transfer beside a prefill loop, sharing an interpreter-style lock (CPU model)",
               "kv_overlap"};
  RawArgs raw;
  app.add_option("--variant", raw.variant, "hold | release: dispatch keeps or releases the lock while it waits")
      ->required();
  app.add_option("--scenario", raw.scenario, "prefill | prefill_kv | both (trace and acceptance)");
  app.add_option("--steps", raw.steps, "prefill steps");
  app.add_option("--step-us", raw.step_us, "kernel time per step, us");
  app.add_option("--host-us", raw.host_us, "host work per step under the lock, us");
  app.add_option("--switch-steps", raw.switch_steps, "whole steps held before a waiting thread gets the lock");
  app.add_option("--chunks", raw.chunks, "KV chunks");
  app.add_option("--chunk-elems", raw.chunk_elems, "float32 elements per chunk");
  app.add_option("--chunk-us", raw.chunk_us, "copy time per chunk, us");
  app.add_option("--submit-us", raw.submit_us, "CPU time of one submission under the lock, us");
  app.add_option("--window", raw.window, "chunks in flight on the copy stream at most");
  app.add_option("--reps", raw.reps, "acceptance repetitions of each scenario");
  app.add_option("--seed", raw.seed, "u64 seed of the KV values (default: DENSEFEED_SEED)");
  app.add_option("--out", raw.out, "output directory (default: DENSEFEED_OUT)");
  std::vector<std::string> args = densefeed::cli11_args(own);
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  Config config;
  try {
    config = resolve(raw, env);
  } catch (const densefeed::HarnessArgError& e) {
    throw UsageError(e.what());
  }
  std::filesystem::create_directories(config.out);
  switch (config.env.mode) {
    case densefeed::HarnessMode::gate: run_gate(config); break;
    case densefeed::HarnessMode::bench: run_bench(config); break;
    case densefeed::HarnessMode::trace: run_trace(config); break;
    case densefeed::HarnessMode::acceptance: run_acceptance(config); break;
  }
  return kExitOk;
}

// The gate's case keys and the flags they stand for (gates/kv-overlap.yaml): main serves
// sessions (session_serve.h), each request's case giving these flags; outside
// one it runs a single case from its flags or DENSEFEED_CASE.
const std::vector<std::pair<std::string, std::string>> kCaseFlags = {
    {"chunks", "--chunks"}, {"chunk_elems", "--chunk-elems"}, {"steps", "--steps"}, {"step_us", "--step-us"},
    {"host_us", "--host-us"}, {"switch_steps", "--switch-steps"}, {"chunk_us", "--chunk-us"},
    {"submit_us", "--submit-us"}, {"window", "--window"}};

}  // namespace

int main(int argc, char** argv) {
  try {
    densefeed::serve_case_flags(argc, argv, kCaseFlags, run_case);
    return kExitOk;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kv_overlap: %s\n", e.what());
    return kExitBadInput;
  } catch (const densefeed::HarnessEnvError& e) {  // a malformed request or DENSEFEED_* variable
    std::fprintf(stderr, "kv_overlap: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kv_overlap: internal failure: %s\n", e.what());
    return kExitInternal;
  }
}
