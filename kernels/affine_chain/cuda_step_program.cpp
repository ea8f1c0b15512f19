#include "cuda_step_program.h"

#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>

namespace densefeed::affine_chain {
namespace {

using cuda::GpuInit;
using cuda::GpuProgram;
using cuda::GpuStep;
using cuda::GpuTask;
using cuda::kNone;

std::int32_t i32(std::size_t v) { return static_cast<std::int32_t>(v); }

// Starts a task at the program's next step; finish() counts its steps.
GpuTask& begin_task(GpuProgram& p, GpuInit init, std::size_t init_index, std::int32_t store) {
  GpuTask t;
  t.first_step = i32(p.steps.size());
  t.init = init;
  t.init_index = i32(init_index);
  t.store = store;
  p.tasks.push_back(t);
  return p.tasks.back();
}

void finish(GpuProgram& p) { p.tasks.back().num_steps = i32(p.steps.size()) - p.tasks.back().first_step; }

}  // namespace

cuda::GpuPrograms build_gpu_programs(std::span<const Chunk> chunks) {
  if (chunks.empty()) throw LayoutError("build_gpu_programs: the plan has no chunks");
  constexpr std::size_t kMax = std::numeric_limits<std::int32_t>::max() / 2;
  if (chunks.size() > kMax) {
    throw LayoutError(fmt::format("build_gpu_programs: {} chunks, at most {}", chunks.size(), kMax));
  }
  cuda::GpuPrograms out;
  out.chunks = chunks.size();
  out.sequences = chunks.back().sequence + 1;
  out.shards = chunks.back().shard + 1;
  const std::size_t R = out.shards;
  std::vector<std::size_t> shard_begin(R + 1, chunks.size());
  for (std::size_t c = chunks.size(); c-- > 0;) shard_begin[chunks[c].shard] = c;

  for (std::size_t r = 0; r + 1 < R; ++r) {
    // (a) M_r = M_c ... from I; zero once a sequence begins after the shard's
    // first chunk (chain_transition).
    begin_task(out.chain, GpuInit::identity, 0, i32(r));
    for (std::size_t c = shard_begin[r]; c < shard_begin[r + 1]; ++c) {
      if (chunks[c].begins_sequence && c != shard_begin[r]) {
        out.chain.steps.push_back({kNone, cuda::kResetZeroStop, kNone});
        break;
      }
      out.chain.steps.push_back({i32(c), kNone, kNone});
    }
    finish(out.chain);
    // (a) H_r from 0, resetting at sequence starts after the first chunk (walk
    // with reset_first = false).
    begin_task(out.local, GpuInit::zero, 0, i32(r));
    for (std::size_t c = shard_begin[r]; c < shard_begin[r + 1]; ++c) {
      const bool reset = chunks[c].begins_sequence && c != shard_begin[r];
      out.local.steps.push_back({i32(c), reset ? i32(chunks[c].sequence) : kNone, kNone});
    }
    finish(out.local);
  }
  // (b) S_in(0) = S0 of the first sequence; S_in(r + 1) = M_r S_in(r) + H_r, or
  // the initial state of a sequence that begins at shard r + 1's first token.
  begin_task(out.merge, GpuInit::initial_state, chunks.front().sequence, kNone);
  out.merge.steps.push_back({kNone, kNone, 0});
  for (std::size_t r = 0; r + 1 < R; ++r) {
    const Chunk& first = chunks[shard_begin[r + 1]];
    if (first.begins_sequence) {
      out.merge.steps.push_back({kNone, i32(first.sequence), i32(r + 1)});
    } else {
      out.merge.steps.push_back({i32(r), kNone, i32(r + 1)});
    }
  }
  finish(out.merge);
  // (c) every shard from S_in(r), resetting at every sequence start, recording
  // every sequence end.
  for (std::size_t r = 0; r < R; ++r) {
    begin_task(out.final_walk, GpuInit::slot, r, kNone);
    for (std::size_t c = shard_begin[r]; c < shard_begin[r + 1]; ++c) {
      const Chunk& ch = chunks[c];
      out.final_walk.steps.push_back({i32(c), ch.begins_sequence ? i32(ch.sequence) : kNone,
                                      ch.ends_sequence ? i32(ch.sequence) : kNone});
    }
    finish(out.final_walk);
  }
  return out;
}

}  // namespace densefeed::affine_chain
