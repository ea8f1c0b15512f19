// affine_chain: harness of the context-parallel state-passing kernel (issue 2),
// speaking the harness protocol of DESIGN.md.
//
//   affine_chain --path unpartitioned|partitioned --precision fp64|ieee|tf32|tf32-rn|tf32x3
//                --T N [--seq-lens "3000,4000,3240"] [--shards N] [--heads H]
//                [--dim-k K] [--dim-v V] [--chunk 64] --regime long-memory|fast-decay
//                [--seed S] [--out DIR] [--device cpu|cuda]
//                [--mma-accumulate residual|fp32|tensor-core]
//
// gate  (DENSEFEED_MODE unset or gate): writes DIR/final_state.npy, shape
//       [sequences, H, K, V], float32 (float64 for --precision fp64).
// bench: writes DIR/samples.json, one time in ms per timed iteration, and the
//        last timed iteration's DIR/final_state.npy (as in gate mode).
// --device cuda (built only with CUDA): the same path on the GPU
//        (affine_chain_gpu.h); K = 128, V a multiple of 32, not fp64; bench
//        samples are kernel times from CUDA events. --mma-accumulate (cuda
//        only, default residual): how the TF32 precisions sum their MMA k-steps
//        (affine_chain_cuda.h, MmaAccumulate).
// Exit codes: 0 success, 2 bad argument or environment, 3 internal failure.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "affine_chain.h"
#if defined(DENSEFEED_AFFINE_CHAIN_CUDA)
#include "affine_chain_gpu.h"
#endif
#include "harness_args.h"
#include "harness_env.h"
#include "npy_writer.h"
#include "session_serve.h"
#include "samples_writer.h"

namespace {

namespace ac = densefeed::affine_chain;

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
  std::string path;
  std::string precision;
  std::string tokens;
  std::string seq_lens;
  std::string shards = "1";
  std::string heads = "1";
  std::string dim_k = "128";
  std::string dim_v = "128";
  std::string chunk = "64";
  std::string regime;
  std::string seed;
  std::string out;
  std::string device = "cpu";
  std::string mma_accumulate;
};

struct Config {
  bool cuda = false;
  std::string mma_accumulate = "residual";  // validated: residual, fp32 or tensor-core
  ac::CpPath path = ac::CpPath::unpartitioned;
  ac::Precision precision = ac::Precision::fp64;
  ac::Layout layout;
  std::size_t heads = 1;
  ac::InputSpec inputs;
  std::filesystem::path out;
  densefeed::HarnessEnv env;
};

Config resolve(const RawArgs& raw, const densefeed::HarnessEnv& env) {
  Config c;
  c.env = env;
#if defined(DENSEFEED_AFFINE_CHAIN_CUDA)
  c.cuda = raw.device == "cuda";
#else
  if (raw.device == "cuda") throw UsageError("--device cuda: CUDA path not built");
#endif
  if (raw.device != "cpu" && raw.device != "cuda") {
    throw UsageError(fmt::format("--device: expected cpu or cuda, got '{}'", raw.device));
  }
  const auto path = ac::parse_path(raw.path);
  if (!path) {
    throw UsageError(
        fmt::format("--path: expected unpartitioned or partitioned, got '{}'", raw.path));
  }
  c.path = *path;
  const auto precision = ac::parse_precision(raw.precision);
  if (!precision) {
    throw UsageError(fmt::format(
        "--precision: expected fp64, ieee, tf32, tf32-rn or tf32x3, got '{}'", raw.precision));
  }
  c.precision = *precision;
  const auto regime = ac::parse_regime(raw.regime);
  if (!regime) {
    throw UsageError(
        fmt::format("--regime: expected long-memory or fast-decay, got '{}'", raw.regime));
  }
  const std::size_t total = densefeed::parse_positive_arg("--T", raw.tokens);
  c.layout.seq_lens = densefeed::parse_seq_lens_arg(raw.seq_lens, total);
  c.layout.shards = densefeed::parse_positive_arg("--shards", raw.shards);
  c.layout.chunk = densefeed::parse_positive_arg("--chunk", raw.chunk);
  c.heads = densefeed::parse_positive_arg("--heads", raw.heads);
  if (c.path == ac::CpPath::unpartitioned && c.layout.shards != 1) {
    throw UsageError(fmt::format(
        "--shards: the unpartitioned path runs on 1 shard, got {} (use --path partitioned)",
        c.layout.shards));
  }
  if (total % c.layout.shards != 0) {
    throw UsageError(
        fmt::format("--shards: expected a divisor of --T = {}, got {}", total, c.layout.shards));
  }
  c.inputs.regime = *regime;
  c.inputs.dim_k = densefeed::parse_positive_arg("--dim-k", raw.dim_k);
  c.inputs.dim_v = densefeed::parse_positive_arg("--dim-v", raw.dim_v);
  if (!raw.mma_accumulate.empty()) {
    if (raw.mma_accumulate != "residual" && raw.mma_accumulate != "fp32" &&
        raw.mma_accumulate != "tensor-core") {
      throw UsageError(fmt::format(
          "--mma-accumulate: expected residual, fp32 or tensor-core, got '{}'", raw.mma_accumulate));
    }
    if (!c.cuda) throw UsageError("--mma-accumulate: applies to --device cuda only");
    c.mma_accumulate = raw.mma_accumulate;
  }
  if (c.cuda) {
    if (c.precision == ac::Precision::fp64) {
      throw UsageError("--precision fp64: runs on the CPU only (--device cpu)");
    }
    if (c.inputs.dim_k != 128) {
      throw UsageError(fmt::format("--dim-k: --device cuda supports 128, got {}", c.inputs.dim_k));
    }
    if (c.inputs.dim_v % 32 != 0) {
      throw UsageError(
          fmt::format("--dim-v: --device cuda supports a multiple of 32, got {}", c.inputs.dim_v));
    }
  }
  c.inputs.seed = densefeed::seed_arg(raw.seed, env);
  c.out = densefeed::out_arg(raw.out, env);
  if (env.mode != densefeed::HarnessMode::gate && env.mode != densefeed::HarnessMode::bench) {
    throw UsageError(fmt::format("DENSEFEED_MODE={}: affine_chain supports gate and bench",
                                 densefeed::to_string(env.mode)));
  }
  // Remaining layout checks (e.g. sizes) through the same code the run uses.
  try {
    (void)ac::plan_chunks(c.layout);
  } catch (const ac::LayoutError& e) {
    throw UsageError(fmt::format("--seq-lens/--shards/--chunk: {}", e.what()));
  }
  return c;
}

// Gate: every head's final states into one [sequences, H, K, V] array, poisoned
// with NaN first so an element the run failed to write fails the gate.
template <typename T>
void run_gate(const Config& c) {
  const std::size_t S = c.layout.seq_lens.size();
  const std::size_t H = c.heads;
  const std::size_t kv = c.inputs.dim_k * c.inputs.dim_v;
  std::vector<T> out(S * H * kv, std::numeric_limits<T>::quiet_NaN());
  for (std::size_t h = 0; h < H; ++h) {
    const ac::PreparedHead head = ac::prepare_head(c.inputs, c.layout, c.path, c.precision, h);
    const std::vector<double> finals = ac::run_prepared(head);
    for (std::size_t s = 0; s < S; ++s) {
      for (std::size_t i = 0; i < kv; ++i) {
        out[(s * H + h) * kv + i] = static_cast<T>(finals[s * kv + i]);
      }
    }
  }
  const std::vector<std::size_t> shape = {S, H, c.inputs.dim_k, c.inputs.dim_v};
  densefeed::write_npy(c.out / "final_state.npy", out, shape);
}

// Bench: per head, inputs and chunk pairs are built untimed, then the path runs
// warmup + iters times; sample i is the sum over heads of iteration i's time
// (std::chrono::steady_clock), so only one head's chunk pairs are ever held.
// The last timed iteration's final states are written as in gate mode
// (final_state.npy): densefeed checks that what was timed is what was gated.
template <typename T>
void run_bench(const Config& c) {
  std::vector<double> samples(c.env.iters, 0.0);
  const std::size_t S = c.layout.seq_lens.size();
  const std::size_t H = c.heads;
  const std::size_t kv = c.inputs.dim_k * c.inputs.dim_v;
  std::vector<T> out(S * H * kv, std::numeric_limits<T>::quiet_NaN());
  for (std::size_t h = 0; h < c.heads; ++h) {
    const ac::PreparedHead head = ac::prepare_head(c.inputs, c.layout, c.path, c.precision, h);
    for (unsigned it = 0; it < c.env.warmup + c.env.iters; ++it) {
      const auto start = std::chrono::steady_clock::now();
      const std::vector<double> finals = ac::run_prepared(head);
      const auto stop = std::chrono::steady_clock::now();
      // A result nobody reads could be optimised away; NaN would mean a broken run.
      if (finals.empty() || std::isnan(finals.front())) {
        throw std::runtime_error("bench iteration produced no final state");
      }
      if (it >= c.env.warmup) {
        samples[it - c.env.warmup] +=
            std::chrono::duration<double, std::milli>(stop - start).count();
      }
      if (it + 1 == c.env.warmup + c.env.iters) {
        for (std::size_t s = 0; s < S; ++s) {
          for (std::size_t i = 0; i < kv; ++i) out[(s * H + h) * kv + i] = static_cast<T>(finals[s * kv + i]);
        }
      }
    }
  }
  densefeed::write_samples_json(c.out / "samples.json", samples);
  const std::vector<std::size_t> shape = {S, H, c.inputs.dim_k, c.inputs.dim_v};
  densefeed::write_npy(c.out / "final_state.npy", out, shape);
}

#if defined(DENSEFEED_AFFINE_CHAIN_CUDA)
ac::cuda::MmaAccumulate accumulate(const Config& c) {
  if (c.mma_accumulate == "fp32") return ac::cuda::MmaAccumulate::fp32;
  if (c.mma_accumulate == "tensor-core") return ac::cuda::MmaAccumulate::tensor_core;
  return ac::cuda::MmaAccumulate::residual;
}

// Gate on the GPU: every head prepared and uploaded, then one run of all heads.
void run_gate_cuda(const Config& c) {
  ac::GpuCase gpu(c.inputs, c.layout, c.path, c.precision, c.heads, accumulate(c));
  (void)gpu.run();
  const std::vector<std::size_t> shape = {c.layout.seq_lens.size(), c.heads, c.inputs.dim_k,
                                          c.inputs.dim_v};
  densefeed::write_npy(c.out / "final_state.npy", gpu.finals(), shape);
}

// Bench on the GPU: preparation and upload untimed; sample i is run i's kernel
// time over all heads from CUDA events (first event to last); the last timed
// run's final states are written as in gate mode.
void run_bench_cuda(const Config& c) {
  ac::GpuCase gpu(c.inputs, c.layout, c.path, c.precision, c.heads, accumulate(c));
  std::vector<double> samples;
  for (unsigned it = 0; it < c.env.warmup + c.env.iters; ++it) {
    const auto t = gpu.run();
    if (it >= c.env.warmup) samples.push_back(t.total_ms);
  }
  densefeed::write_samples_json(c.out / "samples.json", samples);
  const std::vector<std::size_t> shape = {c.layout.seq_lens.size(), c.heads, c.inputs.dim_k,
                                          c.inputs.dim_v};
  densefeed::write_npy(c.out / "final_state.npy", gpu.finals(), shape);
}
#endif

// One case: `own` as argv[1..], `env` the protocol's variables (the
// process's, or a session request's). Throws UsageError for a bad argument.
int run_case(const std::vector<std::string>& own, const densefeed::HarnessEnv& env) {
  CLI::App app{"affine_chain: context-parallel state passing of a gated-delta-rule layer (CPU, CUDA)",
               "affine_chain"};
  RawArgs raw;
  app.add_option("--path", raw.path, "unpartitioned | partitioned")->required();
  app.add_option("--precision", raw.precision,
                 "chain/merge products: fp64 | ieee | tf32 | tf32-rn | tf32x3 "
                 "(the unpartitioned fp32 path is IEEE whatever the precision)")
      ->required();
  app.add_option("--T", raw.tokens, "total tokens")->required();
  app.add_option("--seq-lens", raw.seq_lens,
                 "comma-separated sequence lengths summing to T (empty: one sequence)");
  app.add_option("--shards", raw.shards, "CP shards (partitioned), a divisor of T");
  app.add_option("--heads", raw.heads, "heads");
  app.add_option("--dim-k", raw.dim_k, "K, key dimension");
  app.add_option("--dim-v", raw.dim_v, "V, value dimension");
  app.add_option("--chunk", raw.chunk, "tokens per chunk");
  app.add_option("--regime", raw.regime, "long-memory | fast-decay")->required();
  app.add_option("--seed", raw.seed, "u64 input seed (default: DENSEFEED_SEED)");
  app.add_option("--out", raw.out, "output directory (default: DENSEFEED_OUT)");
  app.add_option("--device", raw.device, "cpu | cuda");
  app.add_option("--mma-accumulate", raw.mma_accumulate,
                 "cuda, TF32 precisions: residual (default) | fp32 | tensor-core");
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
#if defined(DENSEFEED_AFFINE_CHAIN_CUDA)
  if (config.cuda) {
    if (config.env.mode == densefeed::HarnessMode::bench) run_bench_cuda(config);
    else run_gate_cuda(config);
    return kExitOk;
  }
#endif
  if (config.env.mode == densefeed::HarnessMode::bench) {
    if (config.precision == ac::Precision::fp64) run_bench<double>(config);
    else run_bench<float>(config);
  } else if (config.precision == ac::Precision::fp64) {
    run_gate<double>(config);
  } else {
    run_gate<float>(config);
  }
  return kExitOk;
}

// The gate's case keys and the flags they stand for (gates/cp-affine-chain.yaml): main serves
// sessions (session_serve.h), each request's case giving these flags; outside
// one it runs a single case from its flags or DENSEFEED_CASE.
const std::vector<std::pair<std::string, std::string>> kCaseFlags = {
    {"T", "--T"}, {"seq_lens", "--seq-lens"}, {"H", "--heads"}, {"K", "--dim-k"}, {"V", "--dim-v"},
    {"regime", "--regime"}, {"shards", "--shards"}};

}  // namespace

int main(int argc, char** argv) {
  try {
    densefeed::serve_case_flags(argc, argv, kCaseFlags, run_case);
    return kExitOk;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "affine_chain: %s\n", e.what());
    return kExitBadInput;
  } catch (const densefeed::HarnessEnvError& e) {  // a malformed request or DENSEFEED_* variable
    std::fprintf(stderr, "affine_chain: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "affine_chain: internal failure: %s\n", e.what());
    return kExitInternal;
  }
}
