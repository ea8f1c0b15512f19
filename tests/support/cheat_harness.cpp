// A harness written to cheat, one way per --mode, to prove that the gate
// catches each known way around it (issue 3). Speaks the harness protocol:
// writes y.npy into --out. The reference is y_i = scale * sin(seed * 1e-3 + i)
// in float64; an honest candidate writes the same in float32.
//
//   cheat_harness --role reference|candidate [--mode MODE] --n N --scale S
//                 [--ref-fault none|nan] [--slowdown F] --seed SEED --out DIR
// In bench mode (DENSEFEED_MODE=bench) it times 200 * F evaluations of y per
// iteration and writes samples.json.
#include <csignal>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <chrono>
#include <thread>

#include <unistd.h>
#include <vector>

#include "npy_writer.h"

namespace {

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback = "") {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return fallback;
}

bool power_of_two(std::size_t n) { return n && !(n & (n - 1)); }

}  // namespace

int main(int argc, char** argv) {
  const std::string role = arg(argc, argv, "--role");
  const std::string mode = arg(argc, argv, "--mode", "honest");
  const std::size_t n = std::stoul(arg(argc, argv, "--n"));
  const double scale = std::stod(arg(argc, argv, "--scale", "1"));
  // Bench mode only: how many times the work is repeated per iteration, so a
  // candidate can be planted slower by a known factor.
  const double slowdown = std::stod(arg(argc, argv, "--slowdown", "1"));
  std::uint64_t seed = std::stoull(arg(argc, argv, "--seed"));
  const std::filesystem::path out = arg(argc, argv, "--out");
  const auto file = out / "y.npy";

  if (role == "reference") {
    std::vector<double> y(n);
    for (std::size_t i = 0; i < n; ++i) y[i] = scale * std::sin(static_cast<double>(seed) * 1e-3 + static_cast<double>(i));
    if (arg(argc, argv, "--ref-fault", "none") == "nan") y[n / 2] = NAN;
    densefeed::write_npy(file, std::span<const double>(y), std::vector<std::size_t>{n});
    return 0;
  }

  if (mode == "crash") std::raise(SIGSEGV);
  if (mode == "hang") {
    // In DENSEFEED_OUT, the one folder a sandboxed harness may write: proof
    // that it started (its pid is its sandbox's, so tests find it by its
    // command line).
    std::ofstream(out / "hang.pid") << ::getpid() << "\n";
    std::signal(SIGTERM, SIG_IGN);
    std::this_thread::sleep_for(std::chrono::hours(1));
  }
  if (mode == "exit-nonzero") return 7;
  if (mode == "no-output") return 0;
  if (mode == "fixed-seed") seed = 42;  // precomputed for one seed

  std::vector<float> y(n);
  const auto compute = [&] {
    for (std::size_t i = 0; i < n; ++i) {
      y[i] = static_cast<float>(scale * std::sin(static_cast<double>(seed) * 1e-3 + static_cast<double>(i)));
    }
  };
  const char* mode_env = std::getenv("DENSEFEED_MODE");
  if (mode == "hang-bench-round-2" && mode_env && std::string(mode_env) == "bench") {
    // Counts its bench calls in the arm's cache folder (XDG_CACHE_HOME):
    // the warm-up call, round 1, then round 2 hangs as `hang` does, so a
    // test can stop densefeed with one timed round recorded.
    const char* cache = std::getenv("XDG_CACHE_HOME");
    const std::filesystem::path count_file = std::filesystem::path(cache ? cache : out.string()) / "cheat-bench-calls";
    std::filesystem::create_directories(count_file.parent_path());
    int calls = 0;
    std::ifstream(count_file) >> calls;
    std::ofstream(count_file) << ++calls << "\n";
    if (calls >= 3) {
      std::ofstream(out / "hang.pid") << ::getpid() << "\n";
      std::signal(SIGTERM, SIG_IGN);
      std::this_thread::sleep_for(std::chrono::hours(1));
    }
  }
  if (mode_env && std::string(mode_env) == "bench") {
    // Per-iteration times of the computation, warm-up discarded.
    const int warmup = std::atoi(std::getenv("DENSEFEED_WARMUP") ? std::getenv("DENSEFEED_WARMUP") : "1");
    const int iters = std::atoi(std::getenv("DENSEFEED_ITERS") ? std::getenv("DENSEFEED_ITERS") : "5");
    std::ofstream samples(out / "samples.json");
    samples << "{\"unit\": \"ms\", \"samples\": [";
    for (int k = -warmup; k < iters; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      const int reps = static_cast<int>(std::lround(200 * slowdown));
      for (int rep = 0; rep < reps; ++rep) compute();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (k >= 0) samples << (k ? ", " : "") << ms;
    }
    samples << "]}\n";
    // What was timed is what is checked: the last iteration's output. The
    // bench-differs cheat is honest when gated and wrong when benchmarked.
    if (mode == "bench-differs") std::fill(y.begin(), y.end(), 0.0f);
    densefeed::write_npy(file, std::span<const float>(y), std::vector<std::size_t>{n});
    return 0;
  }
  compute();
  if (mode == "nan") y[n / 3] = NAN;
  if (mode == "zeros") std::fill(y.begin(), y.end(), 0.0f);
  if (mode == "few-wrong") {
    for (std::size_t i : {std::size_t{1}, n / 2, n - 1}) y[i] += 1e-3f;
  }
  if (mode == "pow2-only" && !power_of_two(n)) {
    for (std::size_t i = power_of_two(n) ? n : n / 2; i < n; ++i) y[i] = 0;  // the tail is never computed
  }
  if (mode == "wrong-dtype") {
    std::vector<double> wide(y.begin(), y.end());
    densefeed::write_npy(file, std::span<const double>(wide), std::vector<std::size_t>{n});
    return 0;
  }
  if (mode == "wrong-shape") {
    densefeed::write_npy(file, std::span<const float>(y.data(), n - 1), std::vector<std::size_t>{n - 1});
    return 0;
  }
  densefeed::write_npy(file, std::span<const float>(y), std::vector<std::size_t>{n});
  if (mode == "truncated") std::filesystem::resize_file(file, std::filesystem::file_size(file) - 6);
  return 0;
}
