// kv_overlap_driver: the kv-overlap gate's frozen benchmark driver (README,
// "Timings the candidate cannot forge"; kernels/common/driver.h). Built only
// from files the gate freezes, like kv_overlap_reference: it fills the KV
// cache with the frozen values (kv_values.h), loads the arm's
// libkv_overlap_kernel.so and times densefeed_kv_overlap_run
// (kv_overlap_kernel.h), one prefill_kv run per iteration, with
// std::chrono::steady_clock around the call.
//
//   kv_overlap_driver [--steps 20] [--step-us 1000] [--host-us 50] [--switch-steps 5]
//                     [--chunks 16] [--chunk-elems 4096] [--chunk-us 400]
//                     [--submit-us 150] [--window 2]
//
// The flags mean what the harness's do (kv_overlap --help). Bench mode only;
// the seed and the output folder are DENSEFEED_SEED and DENSEFEED_OUT; the
// arm's parameter variant goes to the kernel. The kernel's threads (the
// transfer thread, the simulated streams) end within each call. Writes
// samples.json, timed.json, timed/K/ and kv.npy [chunks, chunk_elems] float32.
// Exit codes: 0 success, 1 the kernel or a check failed, 2 bad argument.
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "driver.h"
#include "harness_args.h"
#include "kv_overlap_kernel.h"
#include "kv_values.h"

namespace {

namespace kv = densefeed::kv_overlap;

// A time in microseconds: a decimal integer in [0, 10^6], as the harness takes it.
std::uint64_t parse_us(std::string_view flag, const std::string& text) {
  const std::optional<std::uint64_t> v = densefeed::parse_u64(text);
  if (!v || *v > 1'000'000) {
    throw std::invalid_argument(fmt::format("{}: expected microseconds, an integer in [0, 1000000], got '{}'", flag, text));
  }
  return *v;
}

void run(int argc, char** argv) {
  densefeed::Driver driver;
  CLI::App app{"kv_overlap_driver: the kv-overlap gate's benchmark driver", "kv_overlap_driver"};
  std::string steps = "20", step_us = "1000", host_us = "50", switch_steps = "5", chunks = "16", chunk_elems = "4096",
              chunk_us = "400", submit_us = "150", window = "2";
  app.add_option("--steps", steps, "prefill steps");
  app.add_option("--step-us", step_us, "kernel time per step, us");
  app.add_option("--host-us", host_us, "host work per step under the lock, us");
  app.add_option("--switch-steps", switch_steps, "whole steps held before a waiting thread gets the lock");
  app.add_option("--chunks", chunks, "KV chunks");
  app.add_option("--chunk-elems", chunk_elems, "float32 elements per chunk");
  app.add_option("--chunk-us", chunk_us, "copy time per chunk, us");
  app.add_option("--submit-us", submit_us, "CPU time of one submission under the lock, us");
  app.add_option("--window", window, "chunks in flight on the copy stream at most");
  std::vector<std::string> args = densefeed::cli11_args(argc, argv);
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    throw std::invalid_argument(e.what());
  }
  const std::string variant = driver.param("variant");
  char error[512] = {};
  densefeed_kv_overlap_problem problem{};
  problem.abi = DENSEFEED_KV_OVERLAP_ABI;
  problem.variant = variant.c_str();
  try {
    problem.steps = densefeed::parse_positive_arg("--steps", steps);
    problem.switch_steps = densefeed::parse_positive_arg("--switch-steps", switch_steps);
    problem.chunks = densefeed::parse_positive_arg("--chunks", chunks);
    problem.chunk_elems = densefeed::parse_positive_arg("--chunk-elems", chunk_elems);
    problem.window = densefeed::parse_positive_arg("--window", window);
  } catch (const densefeed::HarnessArgError& e) {
    throw std::invalid_argument(e.what());
  }
  problem.step_us = parse_us("--step-us", step_us);
  problem.host_us = parse_us("--host-us", host_us);
  problem.chunk_us = parse_us("--chunk-us", chunk_us);
  problem.submit_us = parse_us("--submit-us", submit_us);
  if (problem.chunks * problem.chunk_elems > (std::uint64_t{1} << 28)) {
    throw std::invalid_argument(fmt::format("--chunks/--chunk-elems: {} x {} float32 is over the 1 GiB this driver allows",
                                            problem.chunks, problem.chunk_elems));
  }
  const std::size_t n = problem.chunks * problem.chunk_elems;
  std::vector<float> source(n), received(n, std::numeric_limits<float>::quiet_NaN());
  kv::fill_kv(driver.seed(), problem.chunks, problem.chunk_elems, source);
  problem.kv_source = source.data();
  problem.kv_received = received.data();
  problem.error = error;
  problem.error_size = sizeof error;
  auto* kernel = driver.load_kernel_as<densefeed_kv_overlap_fn>();
  densefeed::TimingOptions options;
  // Each iteration's own input set (its seed from densefeed), drawn outside
  // the timed region into the same buffer.
  options.prepare = [&](std::uint64_t seed) { kv::fill_kv(seed, problem.chunks, problem.chunk_elems, source); };
  options.flush = [&] { std::fill(received.begin(), received.end(), std::numeric_limits<float>::quiet_NaN()); };
  const std::size_t rows = problem.chunks, cols = problem.chunk_elems;
  driver.time(
      [&] {
        if (const int rc = kernel(&problem); rc != 0) {
          error[sizeof error - 1] = '\0';
          throw densefeed::DriverError(fmt::format("densefeed_kv_overlap_run returned {}: {}", rc, error));
        }
      },
      [&] { return std::vector{densefeed::TimedOutput::f32("kv", received, {rows, cols})}; }, options);
}

}  // namespace

int main(int argc, char** argv) {
  return densefeed::driver_main("kv_overlap_driver", [&] { run(argc, argv); });
}
