#include "affine_chain_gpu.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "cuda_step_program.h"

namespace densefeed::affine_chain {

cuda::GpuPrecision to_gpu_precision(Precision precision) {
  switch (precision) {
    case Precision::ieee: return cuda::GpuPrecision::ieee;
    case Precision::tf32: return cuda::GpuPrecision::tf32;
    case Precision::tf32_rn: return cuda::GpuPrecision::tf32_rn;
    case Precision::tf32x3: return cuda::GpuPrecision::tf32x3;
    case Precision::fp64: break;
  }
  throw LayoutError("precision fp64 runs on the CPU only (--device cpu)");
}

GpuCase::GpuCase(const InputSpec& spec, const Layout& layout, CpPath path, Precision precision,
                 std::size_t heads, cuda::MmaAccumulate accumulate)
    : heads_(heads),
      sequences_(layout.seq_lens.size()),
      kv_(spec.dim_k * spec.dim_v),
      precision_(to_gpu_precision(precision)),
      accumulate_(accumulate) {
  if (path == CpPath::unpartitioned && layout.shards != 1) {
    throw LayoutError(
        fmt::format("shards: the unpartitioned path runs on 1 shard, got {}", layout.shards));
  }
  const std::vector<Chunk> chunks = plan_chunks(layout);
  const cuda::GpuPrograms programs = build_gpu_programs(chunks);
  try {
    runner_ = std::make_unique<cuda::GpuChainRunner>(spec.dim_k, spec.dim_v, heads, chunks.size(),
                                                     sequences_);
  } catch (const std::invalid_argument& e) {
    throw LayoutError(fmt::format("--dim-k/--dim-v: {}", e.what()));
  }
  for (std::size_t h = 0; h < heads; ++h) {
    // One head's fp32 pairs at a time on the host, as the CPU path holds them.
    const PreparedHead head = prepare_head(spec, layout, path, precision, h);
    runner_->upload_pairs(h, 0, head.chunks.size(), head.pairs32.transitions.data(),
                          head.pairs32.contributions.data());
    // Initial states are fp32 values widened to fp64 (inputs.h): exact.
    const std::vector<float> s0(head.initial_states.begin(), head.initial_states.end());
    runner_->upload_initial_states(h, s0.data());
  }
  runner_->set_programs(programs);
}

cuda::GpuPhaseTimes GpuCase::run() { return runner_->run(precision_, accumulate_); }

std::vector<float> GpuCase::finals() const {
  std::vector<float> by_head(heads_ * sequences_ * kv_);
  runner_->download_finals(by_head.data());
  std::vector<float> out(by_head.size());
  for (std::size_t h = 0; h < heads_; ++h) {
    for (std::size_t s = 0; s < sequences_; ++s) {
      std::copy_n(by_head.data() + (h * sequences_ + s) * kv_, kv_,
                  out.data() + (s * heads_ + h) * kv_);
    }
  }
  return out;
}

}  // namespace densefeed::affine_chain
