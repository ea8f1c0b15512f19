// The candidate's kernel behind the cp-affine-chain gate's C entry point
// (affine_chain_kernel.h), built as libaffine_chain_kernel.so: the CPU path
// (run_cp, affine_chain.h) and, in a build with CUDA, the GPU path
// (GpuChainRunner, affine_chain_cuda.h), the same code the harness runs.
#include "affine_chain_kernel.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "affine_chain.h"
#if defined(DENSEFEED_AFFINE_CHAIN_CUDA)
#include "affine_chain_gpu.h"
#include "cuda_step_program.h"
#endif

namespace {

namespace ac = densefeed::affine_chain;

std::vector<ac::Chunk> to_plan(const densefeed_affine_chain_problem& p) {
  std::vector<ac::Chunk> plan(p.chunks);
  for (std::size_t c = 0; c < p.chunks; ++c) {
    const auto& in = p.plan[c];
    plan[c] = ac::Chunk{in.t0, in.count, in.sequence, in.shard, in.begins_sequence != 0, in.ends_sequence != 0};
  }
  return plan;
}

// [S, K, V] of head h into [S, H, K, V].
void place_head(const densefeed_affine_chain_problem& p, std::size_t h, const float* by_sequence) {
  const std::size_t kv = p.dim_k * p.dim_v;
  for (std::size_t s = 0; s < p.sequences; ++s) {
    std::copy_n(by_sequence + s * kv, kv, p.final_states + (s * p.heads + h) * kv);
  }
}

void run_cpu(const densefeed_affine_chain_problem& p, ac::CpPath path, ac::Precision precision) {
  const std::vector<ac::Chunk> plan = to_plan(p);
  const std::size_t kk = p.dim_k * p.dim_k, kv = p.dim_k * p.dim_v;
  for (std::size_t h = 0; h < p.heads; ++h) {
    const ac::ChunkPairsView pairs{p.dim_k, p.dim_v, p.chunks, p.transitions + h * p.chunks * kk,
                                   p.contributions + h * p.chunks * kv};
    const std::span<const double> s0(p.initial_states + h * p.sequences * kv, p.sequences * kv);
    const std::vector<float> finals = ac::run_cp(path, precision, plan, pairs, s0);
    place_head(p, h, finals.data());
  }
}

#if defined(DENSEFEED_AFFINE_CHAIN_CUDA)
// The device copies of one problem's inputs and the step programs, made in
// the first call on it (the warm-up) and kept while the driver calls again
// with the same buffers (affine_chain_kernel.h).
struct DeviceCase {
  const void* key[4] = {};
  std::size_t sizes[6] = {};
  std::unique_ptr<ac::cuda::GpuChainRunner> runner;

  bool same(const densefeed_affine_chain_problem& p) const {
    const std::size_t s[6] = {p.heads, p.sequences, p.chunks, p.shards, p.dim_k, p.dim_v};
    return runner && key[0] == p.plan && key[1] == p.transitions && key[2] == p.contributions &&
           key[3] == p.initial_states && std::equal(s, s + 6, sizes);
  }
};

void run_cuda(const densefeed_affine_chain_problem& p, ac::CpPath path, ac::Precision precision) {
  static DeviceCase cached;
  if (path == ac::CpPath::unpartitioned && p.shards != 1) {
    throw ac::LayoutError(fmt::format("shards: the unpartitioned path runs on 1 shard, got {}", p.shards));
  }
  if (!cached.same(p)) {
    cached.runner.reset();
    const std::vector<ac::Chunk> plan = to_plan(p);
    const ac::cuda::GpuPrograms programs = ac::build_gpu_programs(plan);
    auto runner = std::make_unique<ac::cuda::GpuChainRunner>(p.dim_k, p.dim_v, p.heads, p.chunks, p.sequences);
    const std::size_t kk = p.dim_k * p.dim_k, kv = p.dim_k * p.dim_v;
    for (std::size_t h = 0; h < p.heads; ++h) {
      runner->upload_pairs(h, 0, p.chunks, p.transitions + h * p.chunks * kk, p.contributions + h * p.chunks * kv);
      // Initial states are fp32 values widened to fp64 (inputs.h): exact.
      const std::vector<float> s0(p.initial_states + h * p.sequences * kv, p.initial_states + (h + 1) * p.sequences * kv);
      runner->upload_initial_states(h, s0.data());
    }
    runner->set_programs(programs);
    cached.runner = std::move(runner);
    const void* key[4] = {p.plan, p.transitions, p.contributions, p.initial_states};
    std::copy(key, key + 4, cached.key);
    const std::size_t s[6] = {p.heads, p.sequences, p.chunks, p.shards, p.dim_k, p.dim_v};
    std::copy(s, s + 6, cached.sizes);
  }
  (void)cached.runner->run(ac::to_gpu_precision(precision));
  const std::size_t kv = p.dim_k * p.dim_v;
  std::vector<float> by_head(p.heads * p.sequences * kv);
  cached.runner->download_finals(by_head.data());
  for (std::size_t h = 0; h < p.heads; ++h) place_head(p, h, by_head.data() + h * p.sequences * kv);
}
#endif

void fail(const densefeed_affine_chain_problem* p, const std::string& message) {
  if (p != nullptr && p->error != nullptr && p->error_size > 0) {
    std::snprintf(p->error, p->error_size, "%s", message.c_str());
  }
}

}  // namespace

extern "C" int densefeed_affine_chain_run(const densefeed_affine_chain_problem* p) {
  try {
    if (p == nullptr) return 1;
    if (p->abi != DENSEFEED_AFFINE_CHAIN_ABI) {
      throw std::invalid_argument(fmt::format("ABI {}, this kernel implements {}", p->abi, DENSEFEED_AFFINE_CHAIN_ABI));
    }
    const auto path = ac::parse_path(p->path ? p->path : "");
    const auto precision = ac::parse_precision(p->precision ? p->precision : "");
    if (!path) throw std::invalid_argument(fmt::format("path '{}'", p->path ? p->path : ""));
    if (!precision || *precision == ac::Precision::fp64) {
      throw std::invalid_argument(fmt::format("precision '{}': expected ieee, tf32, tf32-rn or tf32x3",
                                              p->precision ? p->precision : ""));
    }
    const std::string device = p->device ? p->device : "";
    if (device == "cpu") {
      run_cpu(*p, *path, *precision);
#if defined(DENSEFEED_AFFINE_CHAIN_CUDA)
    } else if (device == "cuda") {
      run_cuda(*p, *path, *precision);
#endif
    } else {
      throw std::invalid_argument(fmt::format("device '{}': this build runs {}", device,
#if defined(DENSEFEED_AFFINE_CHAIN_CUDA)
                                              "cpu or cuda"
#else
                                              "cpu only"
#endif
                                              ));
    }
    return 0;
  } catch (const std::exception& e) {
    fail(p, e.what());
    return 1;
  }
}
