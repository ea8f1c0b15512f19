// The step programs of the CUDA path (affine_chain_cuda.h) for a chunk plan:
// ChainRunner::partitioned of affine_chain.cpp written down as data, step for
// step, so that the GPU does what the CPU path does (same chunks, same resets at
// sequence starts, same records at sequence ends).
#pragma once

#include <span>

#include "affine_chain_cuda.h"
#include "chunk_plan.h"

namespace densefeed::affine_chain {

// Programs of `chunks` (a plan from plan_chunks; one shard gives the
// unpartitioned path). Throws LayoutError for an empty plan or one whose chunk
// or sequence count does not fit the GPU's 32-bit step fields.
cuda::GpuPrograms build_gpu_programs(std::span<const Chunk> chunks);

}  // namespace densefeed::affine_chain
