// affine_chain_cuda_bench: kernel time of the CUDA path (affine_chain_cuda.h)
// per chain/merge precision, at sizes the harness cannot prepare quickly (T up
// to 1M tokens, many heads): reducing 1M tokens to chunk pairs in fp64 takes
// about a minute per head on one core. So the chunk pairs are real (long-memory
// inputs of head 0, seed --seed, reduced as the harness reduces them) but
// only --pool distinct chunks are reduced; every head's chunks are copies of
// them in order (chunk c = pool chunk c mod pool), placed in device memory at
// their own addresses, so every chunk pair is read from HBM as in a real run.
// The arithmetic per chunk is the same as with T distinct chunks.
//
//   affine_chain_cuda_bench [--T 65536,1048576] [--shards 8,64] [--heads 16]
//       [--precisions tf32,tf32-rn,tf32x3,ieee,ieee-fma]
//       [--accumulate residual,fp32,tensor-core] [--pool 64]
//       [--warmup 2] [--iters 5] [--seed 1]
//
// Prints one row per (T, shards, precision): median kernel times over --iters
// runs (CUDA events around each phase), chain + merge (the part in the
// precision under test) and all four phases, each relative to the first row
// (tf32 with the first --accumulate) at the same T and shards; and the count of
// non-finite final-state values (must be 0). The TF32 precisions run once per
// --accumulate mode (MmaAccumulate), the ieee ones once.
// Exit codes: 0 success, 2 bad argument, 3 CUDA or internal failure.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <utility>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "affine_chain_cuda.h"
#include "chunk_pairs.h"
#include "chunk_plan.h"
#include "cuda_step_program.h"
#include "inputs.h"

namespace {

namespace ac = densefeed::affine_chain;
namespace cu = densefeed::affine_chain::cuda;

constexpr std::size_t kDim = 128;
constexpr std::size_t kChunk = 64;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::size_t end = comma == std::string::npos ? text.size() : comma;
    if (end > start) out.push_back(text.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::size_t> size_list(const std::string& flag, const std::string& text) {
  std::vector<std::size_t> out;
  for (const std::string& item : split_list(text)) {
    std::size_t pos = 0;
    unsigned long long v = 0;
    try {
      v = std::stoull(item, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos != item.size() || v == 0) {
      throw CLI::ValidationError(flag, fmt::format("expected positive integers, got '{}'", item));
    }
    out.push_back(v);
  }
  return out;
}

cu::GpuPrecision parse_gpu_precision(const std::string& text) {
  for (cu::GpuPrecision p : {cu::GpuPrecision::ieee, cu::GpuPrecision::ieee_fma,
                             cu::GpuPrecision::tf32, cu::GpuPrecision::tf32_rn,
                             cu::GpuPrecision::tf32x3}) {
    if (text == cu::to_string(p)) return p;
  }
  throw CLI::ValidationError("--precisions",
                             fmt::format("expected ieee, ieee-fma, tf32, tf32-rn or tf32x3, got '{}'", text));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Row {
  double chain_merge_ms = 0, total_ms = 0, chain_ms = 0, local_ms = 0, merge_ms = 0, final_ms = 0;
  std::size_t non_finite = 0;
};

int run(int argc, char** argv) {
  CLI::App app{"affine_chain_cuda_bench: kernel time of the CUDA path per precision"};
  std::string t_text = "65536,262144,1048576", shards_text = "8,64",
              precisions_text = "tf32,tf32-rn,tf32x3,ieee,ieee-fma";
  std::string accumulate_text = "residual,fp32,tensor-core";
  std::size_t heads = 16, pool = 64;
  unsigned warmup = 2, iters = 5;
  std::uint64_t seed = 1;
  app.add_option("--T", t_text, "comma-separated token counts (multiples of 64 * shards)");
  app.add_option("--shards", shards_text, "comma-separated shard counts");
  app.add_option("--heads", heads, "heads")->check(CLI::Range(1, 4096));
  app.add_option("--precisions", precisions_text, "comma-separated chain/merge precisions");
  app.add_option("--accumulate", accumulate_text, "comma-separated: residual, fp32, tensor-core");
  app.add_option("--pool", pool, "distinct chunk pairs reduced on the CPU")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", warmup, "untimed runs");
  app.add_option("--iters", iters, "timed runs")->check(CLI::Range(1, 1000));
  app.add_option("--seed", seed, "input seed");
  CLI11_PARSE(app, argc, argv);
  const std::vector<std::size_t> ts = size_list("--T", t_text);
  const std::vector<std::size_t> shard_counts = size_list("--shards", shards_text);
  std::vector<cu::GpuPrecision> precisions;
  for (const std::string& p : split_list(precisions_text)) precisions.push_back(parse_gpu_precision(p));
  std::vector<cu::MmaAccumulate> accumulates;
  for (const std::string& a : split_list(accumulate_text)) {
    if (a == "residual") accumulates.push_back(cu::MmaAccumulate::residual);
    else if (a == "fp32") accumulates.push_back(cu::MmaAccumulate::fp32);
    else if (a == "tensor-core") accumulates.push_back(cu::MmaAccumulate::tensor_core);
    else throw CLI::ValidationError("--accumulate", fmt::format("expected residual, fp32 or tensor-core, got '{}'", a));
  }
  if (accumulates.empty()) throw CLI::ValidationError("--accumulate", "expected at least one mode");
  // (precision, accumulate) rows: the ieee precisions do not use the MMA.
  std::vector<std::pair<cu::GpuPrecision, cu::MmaAccumulate>> variants;
  for (cu::GpuPrecision p : precisions) {
    const bool simt = p == cu::GpuPrecision::ieee || p == cu::GpuPrecision::ieee_fma;
    for (cu::MmaAccumulate a : accumulates) {
      variants.emplace_back(p, a);
      if (simt) break;
    }
  }
  for (std::size_t t : ts) {
    for (std::size_t r : shard_counts) {
      if (t % (r * kChunk) != 0) {
        std::fprintf(stderr, "--T/--shards: T = %zu is not a multiple of 64 x %zu shards\n", t, r);
        return 2;
      }
    }
  }

  std::printf("device: %s\n", cu::GpuChainRunner::device_description().c_str());
  const ac::InputSpec spec{seed, ac::Regime::long_memory, kDim, kDim};
  const ac::HeadInputs inputs(spec, 0);
  std::vector<float> s0;
  for (double x : inputs.initial_state(0)) s0.push_back(static_cast<float>(x));

  std::printf("| T | shards | heads | precision | MMA sum | chain+merge ms | x first | all phases ms | x first | chain | local | merge | final | non-finite |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (std::size_t t : ts) {
    const std::size_t chunks = t / kChunk;
    const std::size_t pool_here = std::min(pool, chunks);
    cu::GpuChainRunner runner(kDim, kDim, heads, chunks, 1);
    {
      std::vector<float> tr, co;
      for (std::size_t c = 0; c < pool_here; ++c) {
        const ac::AffinePair64 pair = ac::reduce_tokens(inputs.tokens(c * kChunk, kChunk));
        tr.insert(tr.end(), pair.transition.begin(), pair.transition.end());
        co.insert(co.end(), pair.contribution.begin(), pair.contribution.end());
      }
      runner.upload_pairs(0, 0, pool_here, tr.data(), co.data());
      runner.tile_pairs_from_head0(pool_here);
      for (std::size_t h = 0; h < heads; ++h) runner.upload_initial_states(h, s0.data());
    }
    for (std::size_t r : shard_counts) {
      ac::Layout layout;
      layout.seq_lens = {t};
      layout.shards = r;
      layout.chunk = kChunk;
      runner.set_programs(ac::build_gpu_programs(ac::plan_chunks(layout)));
      Row first;
      for (std::size_t v = 0; v < variants.size(); ++v) {
        const auto [p, acc] = variants[v];
        const bool simt = p == cu::GpuPrecision::ieee || p == cu::GpuPrecision::ieee_fma;
        std::vector<double> cm, total, chain, local, merge, fin;
        for (unsigned it = 0; it < warmup + iters; ++it) {
          const cu::GpuPhaseTimes x = runner.run(p, acc);
          if (it < warmup) continue;
          cm.push_back(x.chain_ms + x.merge_ms);
          total.push_back(x.total_ms);
          chain.push_back(x.chain_ms);
          local.push_back(x.local_ms);
          merge.push_back(x.merge_ms);
          fin.push_back(x.final_ms);
        }
        std::vector<float> finals(heads * kDim * kDim);
        runner.download_finals(finals.data());
        Row row{median(cm), median(total), median(chain), median(local), median(merge), median(fin), 0};
        for (float v : finals) row.non_finite += !std::isfinite(v);
        if (v == 0) first = row;
        std::printf("| %zu | %zu | %zu | %s | %s | %.3f | %.2f | %.3f | %.2f | %.3f | %.3f | %.3f | %.3f | %zu |\n",
                    t, r, heads, cu::to_string(p), simt ? "-" : cu::to_string(acc), row.chain_merge_ms,
                    row.chain_merge_ms / first.chain_merge_ms, row.total_ms, row.total_ms / first.total_ms,
                    row.chain_ms, row.local_ms, row.merge_ms, row.final_ms, row.non_finite);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "affine_chain_cuda_bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "affine_chain_cuda_bench: %s\n", e.what());
    return 3;
  }
}
