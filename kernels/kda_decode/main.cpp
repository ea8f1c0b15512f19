// kda_decode: harness of one Kimi Delta Attention decode step (issue 6),
// speaking the harness protocol of DESIGN.md.
//
//   kda_decode --version v0|v3 [--device cpu|cuda] [--batch B] [--heads 64] [--dim 128]
//              [--seed S] [--out DIR]
//
// It serves harness sessions (kernels/common/session_serve.h): with
// DENSEFEED_SESSION=1 each request's case gives --batch, --heads and --dim
// (keys batch, H, D) and its seed and output folder, and one process runs
// every case; otherwise it runs one case, from its flags or DENSEFEED_CASE.
//
// gate  (DENSEFEED_MODE unset or gate): writes DIR/o.npy [B, H, V] and
//       DIR/state.npy [B, H, K, V], float32 (K = V = --dim), after poisoning
//       both with NaN.
// bench: writes DIR/samples.json, one time in ms per timed iteration (CPU:
//        std::chrono::steady_clock around the whole batch's step; CUDA: CUDA
//        events around the kernel, the L2 cache flushed before each), and the
//        last timed iteration's o.npy and state.npy (as in gate mode).
// KDA_DECODE_FAULT=skip-decay (tests only) sets the gate's lower bound to 0, so
// no row of the state decays: a deliberately wrong candidate the gate must
// call red. The harness says so on stderr.
// Exit codes: 0 success, 2 bad argument or environment (also --device cuda in
// a build without CUDA), 3 internal failure.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "decode_cpu.h"
#include "harness_args.h"
#include "harness_env.h"
#include "inputs.h"
#include "npy_writer.h"
#include "samples_writer.h"
#include "session_serve.h"
#if DENSEFEED_KDA_HAVE_CUDA
#include "cuda_path.h"
#endif

namespace {

namespace kd = densefeed::kda_decode;

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;
constexpr int kExitInternal = 3;

// A bad argument: the message starts with the flag's name.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Device { cpu, cuda };

struct RawArgs {
  std::string version;
  std::string device = "cpu";
  std::string batch;
  std::string heads = "64";
  std::string dim = "128";
  std::string seed;
  std::string out;
};

struct Config {
  kd::Version version = kd::Version::v3;
  Device device = Device::cpu;
  kd::InputSpec spec;
  kd::StepOptions options;
  std::filesystem::path out;
  densefeed::HarnessEnv env;
};

// KDA_DECODE_FAULT: unset or empty for the real kernel; "skip-decay" for the
// wrong one the tests plant.
kd::StepOptions fault_options() {
  kd::StepOptions options;
  const char* fault = std::getenv("KDA_DECODE_FAULT");
  if (fault == nullptr || *fault == '\0') return options;
  if (std::string(fault) != "skip-decay") {
    throw UsageError(fmt::format("KDA_DECODE_FAULT: expected skip-decay or unset, got '{}'", fault));
  }
  std::fprintf(stderr, "kda_decode: KDA_DECODE_FAULT=skip-decay: the state is NOT decayed (a planted bug)\n");
  options.lower_bound = 0.0f;
  return options;
}

Config resolve(const RawArgs& raw, const densefeed::HarnessEnv& env) {
  Config c;
  c.env = env;
  const auto version = kd::parse_version(raw.version);
  if (!version) throw UsageError(fmt::format("--version: expected v0 or v3, got '{}'", raw.version));
  c.version = *version;
  if (raw.device == "cpu") {
    c.device = Device::cpu;
  } else if (raw.device == "cuda") {
#if DENSEFEED_KDA_HAVE_CUDA
    c.device = Device::cuda;
#else
    throw UsageError("--device cuda: CUDA path not built");
#endif
  } else {
    throw UsageError(fmt::format("--device: expected cpu or cuda, got '{}'", raw.device));
  }
  c.spec.batch = densefeed::parse_positive_arg("--batch", raw.batch);
  c.spec.heads = densefeed::parse_positive_arg("--heads", raw.heads);
  c.spec.dim_k = densefeed::parse_positive_arg("--dim", raw.dim);
  c.spec.dim_v = c.spec.dim_k;
  if (c.device == Device::cuda && c.spec.dim_k != 128) {
    throw UsageError(fmt::format("--dim: the CUDA kernels are written for 128, got {}", c.spec.dim_k));
  }
  c.spec.seed = densefeed::seed_arg(raw.seed, env);
  c.out = densefeed::out_arg(raw.out, env);
  if (env.mode != densefeed::HarnessMode::gate && env.mode != densefeed::HarnessMode::bench) {
    throw UsageError(fmt::format("DENSEFEED_MODE={}: kda_decode supports gate and bench",
                                 densefeed::to_string(env.mode)));
  }
  c.options = fault_options();
  return c;
}

void write_outputs(const Config& c, const std::vector<float>& o, const std::vector<float>& state) {
  const auto& s = c.spec;
  const std::vector<std::size_t> o_shape = {s.batch, s.heads, s.dim_v};
  const std::vector<std::size_t> s_shape = {s.batch, s.heads, s.dim_k, s.dim_v};
  densefeed::write_npy(c.out / "o.npy", o, o_shape);
  densefeed::write_npy(c.out / "state.npy", state, s_shape);
}

void run_cpu(const Config& c, const kd::BatchInputs& in) {
  const auto& s = c.spec;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> o(s.batch * s.heads * s.dim_v, nan);
  std::vector<float> state(s.batch * s.heads * s.dim_k * s.dim_v, nan);
  if (c.env.mode == densefeed::HarnessMode::gate) {
    kd::decode_step_cpu(c.version, in, c.options, o.data(), state.data());
    write_outputs(c, o, state);
    return;
  }
  std::vector<double> samples;
  for (unsigned it = 0; it < c.env.warmup + c.env.iters; ++it) {
    std::fill(o.begin(), o.end(), nan);
    std::fill(state.begin(), state.end(), nan);
    const auto start = std::chrono::steady_clock::now();
    kd::decode_step_cpu(c.version, in, c.options, o.data(), state.data());
    const auto stop = std::chrono::steady_clock::now();
    if (it >= c.env.warmup) samples.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  densefeed::write_samples_json(c.out / "samples.json", samples);
  write_outputs(c, o, state);
}

#if DENSEFEED_KDA_HAVE_CUDA
void run_gpu(const Config& c, const kd::BatchInputs& in) {
  const bool bench = c.env.mode == densefeed::HarnessMode::bench;
  const kd::CudaRunResult r = kd::run_cuda(c.version, in, c.options, bench, c.env.warmup, c.env.iters);
  if (bench) densefeed::write_samples_json(c.out / "samples.json", r.samples_ms);
  write_outputs(c, r.o, r.state);
}
#endif

// The gate's case keys and the flags they stand for (gates/kda-decode.yaml).
const std::vector<std::pair<std::string, std::string>> kCaseFlags = {
    {"batch", "--batch"}, {"H", "--heads"}, {"D", "--dim"}};

// One case: `args` as argv[1..], `env` the protocol's variables (the
// process's, or a session request's). Throws UsageError for a bad argument.
void run_case(const std::vector<std::string>& own, const densefeed::HarnessEnv& env) {
  CLI::App app{"kda_decode: one Kimi Delta Attention decode step (CPU fp32, or CUDA)", "kda_decode"};
  RawArgs raw;
  app.add_option("--version", raw.version,
                 "v0 (fla's tiling: 4 V-tiles of 32, each recomputing normalisation and gate) | "
                 "v3 (tiles merged, computed once)")
      ->required();
  app.add_option("--device", raw.device, "cpu | cuda");
  app.add_option("--batch", raw.batch, "B, decode batch (sequences); in a session, the case's batch")->required();
  app.add_option("--heads", raw.heads, "H, heads");
  app.add_option("--dim", raw.dim, "K = V, head dimension (128 on cuda)");
  app.add_option("--seed", raw.seed, "u64 input seed (default: DENSEFEED_SEED)");
  app.add_option("--out", raw.out, "output directory (default: DENSEFEED_OUT)");
  std::vector<std::string> args = densefeed::cli11_args(own);
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e);
    return;
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
  const kd::BatchInputs in = kd::batch_inputs(config.spec);
  if (config.device == Device::cpu) {
    run_cpu(config, in);
  } else {
#if DENSEFEED_KDA_HAVE_CUDA
    run_gpu(config, in);
#endif
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    densefeed::serve_case_flags(argc, argv, kCaseFlags, run_case);
    return kExitOk;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kda_decode: %s\n", e.what());
    return kExitBadInput;
  } catch (const densefeed::HarnessEnvError& e) {  // a malformed request or DENSEFEED_* variable
    std::fprintf(stderr, "kda_decode: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kda_decode: internal failure: %s\n", e.what());
    return kExitInternal;
  }
}
