// affine_chain_reference: the reference of the cp-affine-chain gate (issue 2),
// the unpartitioned path in fp64, speaking the harness protocol of DESIGN.md.
// Built only from files the gate freezes (reference, chunk_plan, chunk_pairs,
// inputs, kernels/common), so no edit of the candidate can change it.
//
//   affine_chain_reference --T N [--seq-lens "3000,4000,3240"] [--heads H]
//                          [--dim-k K] [--dim-v V] [--chunk 64]
//                          --regime long-memory|fast-decay [--seed S] [--out DIR]
//
// gate (DENSEFEED_MODE unset or gate; there is no other mode): writes
//      DIR/final_state.npy, shape [sequences, H, K, V], float64, the same bytes as
//      `affine_chain --path unpartitioned --precision fp64` with these arguments.
// Exit codes: 0 success, 2 bad argument or environment, 3 internal failure.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "harness_args.h"
#include "harness_env.h"
#include "npy_writer.h"
#include "session_serve.h"
#include "reference.h"

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
  std::string tokens;
  std::string seq_lens;
  std::string heads = "1";
  std::string dim_k = "128";
  std::string dim_v = "128";
  std::string chunk = "64";
  std::string regime;
  std::string seed;
  std::string out;
};

struct Config {
  ac::Layout layout;  // one shard
  std::size_t heads = 1;
  ac::InputSpec inputs;
  std::filesystem::path out;
};

Config resolve(const RawArgs& raw, const densefeed::HarnessEnv& env) {
  if (env.mode != densefeed::HarnessMode::gate) {
    throw UsageError(fmt::format("DENSEFEED_MODE={}: affine_chain_reference supports gate only",
                                 densefeed::to_string(env.mode)));
  }
  Config c;
  const auto regime = ac::parse_regime(raw.regime);
  if (!regime) {
    throw UsageError(
        fmt::format("--regime: expected long-memory or fast-decay, got '{}'", raw.regime));
  }
  const std::size_t total = densefeed::parse_positive_arg("--T", raw.tokens);
  c.layout.seq_lens = densefeed::parse_seq_lens_arg(raw.seq_lens, total);
  c.layout.shards = 1;
  c.layout.chunk = densefeed::parse_positive_arg("--chunk", raw.chunk);
  c.heads = densefeed::parse_positive_arg("--heads", raw.heads);
  c.inputs.regime = *regime;
  c.inputs.dim_k = densefeed::parse_positive_arg("--dim-k", raw.dim_k);
  c.inputs.dim_v = densefeed::parse_positive_arg("--dim-v", raw.dim_v);
  c.inputs.seed = densefeed::seed_arg(raw.seed, env);
  c.out = densefeed::out_arg(raw.out, env);
  // Remaining layout checks through the same code the run uses.
  try {
    (void)ac::plan_chunks(c.layout);
  } catch (const ac::LayoutError& e) {
    throw UsageError(fmt::format("--seq-lens/--chunk: {}", e.what()));
  }
  return c;
}

// Every head's final states into one [sequences, H, K, V] fp64 array, poisoned
// with NaN first so an element the run failed to write fails the gate.
void run_gate(const Config& c) {
  const std::size_t S = c.layout.seq_lens.size();
  const std::size_t H = c.heads;
  const std::size_t kv = c.inputs.dim_k * c.inputs.dim_v;
  std::vector<double> out(S * H * kv, std::numeric_limits<double>::quiet_NaN());
  for (std::size_t h = 0; h < H; ++h) {
    const ac::ReferenceHead head = ac::prepare_reference_head(c.inputs, c.layout, h);
    const std::vector<double> finals = ac::run_reference(head);
    for (std::size_t s = 0; s < S; ++s) {
      for (std::size_t i = 0; i < kv; ++i) out[(s * H + h) * kv + i] = finals[s * kv + i];
    }
  }
  const std::vector<std::size_t> shape = {S, H, c.inputs.dim_k, c.inputs.dim_v};
  densefeed::write_npy(c.out / "final_state.npy", out, shape);
}

// One case: `own` as argv[1..], `env` the protocol's variables (the
// process's, or a session request's). Throws UsageError for a bad argument.
int run_case(const std::vector<std::string>& own, const densefeed::HarnessEnv& env) {
  CLI::App app{"affine_chain_reference: the cp-affine-chain gate's reference, the unpartitioned "
               "path in fp64 (CPU)",
               "affine_chain_reference"};
  RawArgs raw;
  app.add_option("--T", raw.tokens, "total tokens")->required();
  app.add_option("--seq-lens", raw.seq_lens,
                 "comma-separated sequence lengths summing to T (empty: one sequence)");
  app.add_option("--heads", raw.heads, "heads");
  app.add_option("--dim-k", raw.dim_k, "K, key dimension");
  app.add_option("--dim-v", raw.dim_v, "V, value dimension");
  app.add_option("--chunk", raw.chunk, "tokens per chunk");
  app.add_option("--regime", raw.regime, "long-memory | fast-decay")->required();
  app.add_option("--seed", raw.seed, "u64 input seed (default: DENSEFEED_SEED)");
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
  run_gate(config);
  return kExitOk;
}

// The gate's case keys and the flags they stand for (gates/cp-affine-chain.yaml): main serves
// sessions (session_serve.h), each request's case giving these flags; outside
// one it runs a single case from its flags or DENSEFEED_CASE.
const std::vector<std::pair<std::string, std::string>> kCaseFlags = {
    {"T", "--T"}, {"seq_lens", "--seq-lens"}, {"H", "--heads"}, {"K", "--dim-k"}, {"V", "--dim-v"},
    {"regime", "--regime"}};

}  // namespace

int main(int argc, char** argv) {
  try {
    densefeed::serve_case_flags(argc, argv, kCaseFlags, run_case);
    return kExitOk;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "affine_chain_reference: %s\n", e.what());
    return kExitBadInput;
  } catch (const densefeed::HarnessEnvError& e) {  // a malformed request or DENSEFEED_* variable
    std::fprintf(stderr, "affine_chain_reference: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "affine_chain_reference: internal failure: %s\n", e.what());
    return kExitInternal;
  }
}
