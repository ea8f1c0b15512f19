// affine_chain_driver: the cp-affine-chain gate's frozen benchmark driver
// (README, "Timings the candidate cannot forge"; kernels/common/driver.h).
// Built only from files the gate freezes, like affine_chain_reference: it
// prepares one case's inputs as the harness's bench mode does (prepare_head,
// affine_chain.h: the chunk plan, head h's inputs and initial states, every
// chunk reduced to its affine pair in fp64 and rounded to fp32), loads the
// arm's libaffine_chain_kernel.so, and times densefeed_affine_chain_run
// (affine_chain_kernel.h) over all heads per iteration.
//
//   affine_chain_driver --T N [--seq-lens "3000,4000,3240"] [--shards N] [--heads H]
//                       [--dim-k K] [--dim-v V] [--chunk 64] --regime long-memory|fast-decay
//
// Bench mode only; the seed and the output folder are DENSEFEED_SEED and
// DENSEFEED_OUT. The arm's parameters precision and device (DENSEFEED_PARAMS)
// go to the kernel; on device cuda the samples are CUDA event times around
// the call (a build with CUDA). Writes samples.json, timed.json, timed/K/ and
// final_state.npy [sequences, H, K, V] float32, as driver.h says.
// Exit codes: 0 success, 1 the kernel or a check failed, 2 bad argument.
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "affine_chain_kernel.h"
#include "chunk_pairs.h"
#include "chunk_plan.h"
#include "driver.h"
#include "harness_args.h"
#include "inputs.h"
#include "reference.h"
#if defined(DENSEFEED_DRIVER_CUDA)
#include "driver_cuda.h"
#endif

namespace {

namespace ac = densefeed::affine_chain;

struct RawArgs {
  std::string tokens, seq_lens, shards = "1", heads = "1", dim_k = "128", dim_v = "128", chunk = "64", regime;
};

// Every head's inputs, as densefeed_affine_chain_problem lays them out.
struct Inputs {
  std::vector<densefeed_affine_chain_chunk> plan;
  std::vector<float> transitions, contributions;
  std::vector<double> initial_states;
};

Inputs prepare(const ac::InputSpec& spec, const ac::Layout& layout, std::size_t heads) {
  Inputs in;
  const std::vector<ac::Chunk> chunks = ac::plan_chunks(layout);
  for (const ac::Chunk& c : chunks) {
    in.plan.push_back({c.t0, c.count, c.sequence, c.shard, c.begins_sequence ? 1 : 0, c.ends_sequence ? 1 : 0});
  }
  for (std::size_t h = 0; h < heads; ++h) {
    const ac::HeadInputs inputs(spec, h);
    const std::vector<double> s0 = ac::draw_initial_states(inputs, layout.seq_lens.size());
    in.initial_states.insert(in.initial_states.end(), s0.begin(), s0.end());
    for (const ac::Chunk& c : chunks) {
      const ac::AffinePair64 pair = ac::reduce_tokens(inputs.tokens(c.t0, c.count));
      in.transitions.insert(in.transitions.end(), pair.transition.begin(), pair.transition.end());
      in.contributions.insert(in.contributions.end(), pair.contribution.begin(), pair.contribution.end());
    }
  }
  return in;
}

void run(int argc, char** argv) {
  densefeed::Driver driver;
  CLI::App app{"affine_chain_driver: the cp-affine-chain gate's benchmark driver", "affine_chain_driver"};
  RawArgs raw;
  app.add_option("--T", raw.tokens, "total tokens")->required();
  app.add_option("--seq-lens", raw.seq_lens, "comma-separated sequence lengths summing to T (empty: one sequence)");
  app.add_option("--shards", raw.shards, "CP shards, a divisor of T");
  app.add_option("--heads", raw.heads, "heads");
  app.add_option("--dim-k", raw.dim_k, "K, key dimension");
  app.add_option("--dim-v", raw.dim_v, "V, value dimension");
  app.add_option("--chunk", raw.chunk, "tokens per chunk");
  app.add_option("--regime", raw.regime, "long-memory | fast-decay")->required();
  std::vector<std::string> args = densefeed::cli11_args(argc, argv);
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    throw std::invalid_argument(e.what());
  }
  ac::InputSpec spec;
  ac::Layout layout;
  std::size_t heads = 1;
  try {
    const auto regime = ac::parse_regime(raw.regime);
    if (!regime) throw std::invalid_argument(fmt::format("--regime: expected long-memory or fast-decay, got '{}'", raw.regime));
    spec.regime = *regime;
    const std::size_t total = densefeed::parse_positive_arg("--T", raw.tokens);
    layout.seq_lens = densefeed::parse_seq_lens_arg(raw.seq_lens, total);
    layout.shards = densefeed::parse_positive_arg("--shards", raw.shards);
    layout.chunk = densefeed::parse_positive_arg("--chunk", raw.chunk);
    heads = densefeed::parse_positive_arg("--heads", raw.heads);
    spec.dim_k = densefeed::parse_positive_arg("--dim-k", raw.dim_k);
    spec.dim_v = densefeed::parse_positive_arg("--dim-v", raw.dim_v);
    (void)ac::plan_chunks(layout);
  } catch (const densefeed::HarnessArgError& e) {
    throw std::invalid_argument(e.what());
  } catch (const ac::LayoutError& e) {
    throw std::invalid_argument(fmt::format("--seq-lens/--shards/--chunk: {}", e.what()));
  }
  spec.seed = driver.seed();
  const std::string precision = driver.param("precision");
  const std::string device = driver.param("device");
  Inputs in = prepare(spec, layout, heads);
  const std::size_t S = layout.seq_lens.size(), K = spec.dim_k, V = spec.dim_v;
  std::vector<float> finals(S * heads * K * V);
  densefeed::TimingOptions options;
#if defined(DENSEFEED_DRIVER_CUDA)
  std::unique_ptr<densefeed::CudaEventTimer> timer;
  if (device == "cuda") {
    timer = std::make_unique<densefeed::CudaEventTimer>();
    options.timer = timer.get();
  }
#endif
  auto* kernel = driver.load_kernel_as<densefeed_affine_chain_fn>();
  char error[512] = {};
  densefeed_affine_chain_problem problem{
      DENSEFEED_AFFINE_CHAIN_ABI, "partitioned", precision.c_str(), device.c_str(), heads, S, in.plan.size(),
      layout.shards, K, V, in.plan.data(), in.transitions.data(), in.contributions.data(), in.initial_states.data(),
      finals.data(), error, sizeof error};
  // Each iteration's own input set (its seed from densefeed, TimingOptions::
  // prepare): the chunk plan stays, the tokens and initial states are drawn
  // again, outside the timed region.
  options.prepare = [&](std::uint64_t seed) {
    spec.seed = seed;
    in = prepare(spec, layout, heads);
    problem.plan = in.plan.data();
    problem.transitions = in.transitions.data();
    problem.contributions = in.contributions.data();
    problem.initial_states = in.initial_states.data();
  };
  options.flush = [&] { std::fill(finals.begin(), finals.end(), std::numeric_limits<float>::quiet_NaN()); };
  driver.time(
      [&] {
        if (const int rc = kernel(&problem); rc != 0) {
          error[sizeof error - 1] = '\0';
          throw densefeed::DriverError(fmt::format("densefeed_affine_chain_run returned {}: {}", rc, error));
        }
      },
      [&] { return std::vector{densefeed::TimedOutput::f32("final_state", finals, {S, heads, K, V})}; }, options);
}

}  // namespace

int main(int argc, char** argv) {
  return densefeed::driver_main("affine_chain_driver", [&] { run(argc, argv); });
}
