// kda_decode_reference: the reference of the kda-decode gate (issue 6), one
// Kimi Delta Attention decode step in fp64 (reference.h gives the math and its
// upstream source), speaking the harness protocol of DESIGN.md. Built only from
// files the gate freezes (bf16.h, inputs, reference, kernels/common), so no edit
// of the candidate can change it.
//
//   kda_decode_reference [--batch B] [--heads 64] [--dim 128] [--seed S] [--out DIR]
//
// It serves harness sessions (kernels/common/session_serve.h) as the
// candidate's harness does: with DENSEFEED_SESSION=1 each request's case
// gives --batch, --heads and --dim (keys batch, H, D); otherwise one case,
// from its flags or DENSEFEED_CASE.
//
// gate (DENSEFEED_MODE unset or gate; there is no other mode): writes
//      DIR/o.npy      [B, H, V]    float64
//      DIR/state.npy  [B, H, K, V] float64 (K = V = --dim)
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
#include "inputs.h"
#include "npy_writer.h"
#include "reference.h"
#include "session_serve.h"

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

struct RawArgs {
  std::string batch;
  std::string heads = "64";
  std::string dim = "128";
  std::string seed;
  std::string out;
};

struct Config {
  kd::InputSpec spec;
  std::filesystem::path out;
};

Config resolve(const RawArgs& raw, const densefeed::HarnessEnv& env) {
  if (env.mode != densefeed::HarnessMode::gate) {
    throw UsageError(fmt::format("DENSEFEED_MODE={}: kda_decode_reference supports gate only",
                                 densefeed::to_string(env.mode)));
  }
  Config c;
  c.spec.batch = densefeed::parse_positive_arg("--batch", raw.batch);
  c.spec.heads = densefeed::parse_positive_arg("--heads", raw.heads);
  c.spec.dim_k = densefeed::parse_positive_arg("--dim", raw.dim);
  c.spec.dim_v = c.spec.dim_k;
  c.spec.seed = densefeed::seed_arg(raw.seed, env);
  c.out = densefeed::out_arg(raw.out, env);
  return c;
}

// Head by head, so only the outputs are ever held whole; both poisoned with
// NaN first so that an element the run failed to write fails the gate.
void run_gate(const Config& c) {
  const std::size_t B = c.spec.batch, H = c.spec.heads, K = c.spec.dim_k, V = c.spec.dim_v;
  std::vector<double> o(B * H * V, std::numeric_limits<double>::quiet_NaN());
  std::vector<double> state(B * H * K * V, std::numeric_limits<double>::quiet_NaN());
  std::vector<kd::HeadParams> params;
  params.reserve(H);
  for (std::size_t h = 0; h < H; ++h) params.push_back(kd::head_params(c.spec, h));
  // Heads are independent and each writes its own slices: threads change
  // nothing but the time.
  kd::parallel_over(B * H, [&](std::size_t first, std::size_t last) {
    kd::HeadInputs in;
    for (std::size_t bh = first; bh < last; ++bh) {
      kd::head_inputs(c.spec, bh / H, bh % H, in);
      kd::reference_head_step(params[bh % H], in, &o[bh * V], &state[bh * K * V]);
    }
  });
  const std::vector<std::size_t> o_shape = {B, H, V};
  const std::vector<std::size_t> s_shape = {B, H, K, V};
  densefeed::write_npy(c.out / "o.npy", o, o_shape);
  densefeed::write_npy(c.out / "state.npy", state, s_shape);
}

// The gate's case keys and the flags they stand for (gates/kda-decode.yaml).
const std::vector<std::pair<std::string, std::string>> kCaseFlags = {
    {"batch", "--batch"}, {"H", "--heads"}, {"D", "--dim"}};

// One case: `own` as argv[1..], `env` the protocol's variables (the
// process's, or a session request's). Throws UsageError for a bad argument.
void run_case(const std::vector<std::string>& own, const densefeed::HarnessEnv& env) {
  CLI::App app{"kda_decode_reference: the kda-decode gate's reference, one KDA decode step in fp64 (CPU)",
               "kda_decode_reference"};
  RawArgs raw;
  app.add_option("--batch", raw.batch, "B, decode batch (sequences); in a session, the case's batch")->required();
  app.add_option("--heads", raw.heads, "H, heads");
  app.add_option("--dim", raw.dim, "K = V, head dimension");
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
  run_gate(config);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    densefeed::serve_case_flags(argc, argv, kCaseFlags, run_case);
    return kExitOk;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kda_decode_reference: %s\n", e.what());
    return kExitBadInput;
  } catch (const densefeed::HarnessEnvError& e) {  // a malformed request or DENSEFEED_* variable
    std::fprintf(stderr, "kda_decode_reference: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kda_decode_reference: internal failure: %s\n", e.what());
    return kExitInternal;
  }
}
