#include "reference.h"

#include <algorithm>

#include <fmt/format.h>

namespace densefeed::affine_chain {
namespace {

// C[n, m] += A[n, k] B[k, m], row-major. The i-k-j order keeps each C element's
// sum in ascending k and lets the compiler vectorise the j loop without
// reassociating anything (no -ffast-math, no FMA contraction), so the result is
// the same at any vector width: the AVX2 / AVX-512 clones, picked at load time
// for the machine, produce the same bits as the baseline SSE2 code.
__attribute__((target_clones("avx512f", "avx2", "default"))) void matmul_accumulate_fp64(
    const double* a, const double* b, double* c, std::size_t n, std::size_t k, std::size_t m) {
  for (std::size_t i = 0; i < n; ++i) {
    double* __restrict crow = c + i * m;
    for (std::size_t p = 0; p < k; ++p) {
      const double aip = a[i * k + p];
      const double* __restrict brow = b + p * m;
      for (std::size_t j = 0; j < m; ++j) crow[j] += aip * brow[j];
    }
  }
}

// Number of sequences a plan covers; throws if pairs or initial states do not fit it.
std::size_t check_plan(std::span<const Chunk> chunks, const ChunkPairs<double>& pairs,
                       std::span<const double> initial_states) {
  if (chunks.empty()) throw LayoutError("fp64 path: the plan has no chunks");
  if (pairs.size() != chunks.size()) {
    throw LayoutError(fmt::format("fp64 path: {} chunk pairs for a plan of {} chunks",
                                  pairs.size(), chunks.size()));
  }
  const std::size_t sequences = chunks.back().sequence + 1;
  if (initial_states.size() != sequences * pairs.dim_k * pairs.dim_v) {
    throw LayoutError(
        fmt::format("fp64 path: {} initial-state values, expected {} sequences x {} x {}",
                    initial_states.size(), sequences, pairs.dim_k, pairs.dim_v));
  }
  return sequences;
}

}  // namespace

void matmul_fp64(const double* a, const double* b, double* c, std::size_t n, std::size_t k,
                 std::size_t m) {
  std::fill(c, c + n * m, 0.0);
  matmul_accumulate_fp64(a, b, c, n, k, m);
}

void walk_fp64(std::span<const Chunk> chunks, const ChunkPairs<double>& pairs,
               std::span<const double> initial_states, std::size_t begin, std::size_t end,
               std::span<double> state, std::span<double> finals, bool reset_first) {
  const std::size_t kv = pairs.dim_k * pairs.dim_v;
  if (begin > end || end > chunks.size() || end > pairs.size() || state.size() != kv) {
    throw LayoutError(fmt::format(
        "fp64 walk: chunks [{}, {}) of a plan of {} ({} pairs), state of {} values for {} x {}",
        begin, end, chunks.size(), pairs.size(), state.size(), pairs.dim_k, pairs.dim_v));
  }
  std::vector<double> scratch(kv);
  for (std::size_t c = begin; c < end; ++c) {
    const Chunk& chunk = chunks[c];
    if (chunk.begins_sequence && (c != begin || reset_first)) {
      if ((chunk.sequence + 1) * kv > initial_states.size()) {
        throw LayoutError(fmt::format("fp64 walk: no initial state for sequence {}",
                                      chunk.sequence));
      }
      std::copy_n(initial_states.begin() + chunk.sequence * kv, kv, state.begin());
    }
    matmul_fp64(pairs.transition(c), state.data(), scratch.data(), pairs.dim_k, pairs.dim_k,
                pairs.dim_v);
    const double* h = pairs.contribution(c);
    for (std::size_t i = 0; i < kv; ++i) state[i] = scratch[i] + h[i];
    if (!finals.empty() && chunk.ends_sequence) {
      if ((chunk.sequence + 1) * kv > finals.size()) {
        throw LayoutError(fmt::format("fp64 walk: no final state for sequence {}",
                                      chunk.sequence));
      }
      std::copy(state.begin(), state.end(), finals.begin() + chunk.sequence * kv);
    }
  }
}

std::vector<double> draw_initial_states(const HeadInputs& inputs, std::size_t sequences) {
  std::vector<double> states;
  states.reserve(sequences * inputs.spec().dim_k * inputs.spec().dim_v);
  for (std::size_t s = 0; s < sequences; ++s) {
    const std::vector<double> s0 = inputs.initial_state(s);
    states.insert(states.end(), s0.begin(), s0.end());
  }
  return states;
}

std::vector<double> run_unpartitioned_fp64(std::span<const Chunk> chunks,
                                           const ChunkPairs<double>& pairs,
                                           std::span<const double> initial_states) {
  const std::size_t sequences = check_plan(chunks, pairs, initial_states);
  if (chunks.back().shard != 0) {
    throw LayoutError(
        fmt::format("fp64 path: the unpartitioned path needs a one-shard plan, got {}",
                    chunks.back().shard + 1));
  }
  const std::size_t kv = pairs.dim_k * pairs.dim_v;
  std::vector<double> finals(sequences * kv);
  std::vector<double> state(kv, 0.0);
  walk_fp64(chunks, pairs, initial_states, 0, chunks.size(), state, finals);
  return finals;
}

ReferenceHead prepare_reference_head(const InputSpec& spec, const Layout& layout,
                                     std::size_t head) {
  if (layout.shards != 1) {
    throw LayoutError(
        fmt::format("shards: the unpartitioned path runs on 1 shard, got {}", layout.shards));
  }
  ReferenceHead prepared;
  prepared.chunks = plan_chunks(layout);
  prepared.num_sequences = layout.seq_lens.size();
  const HeadInputs inputs(spec, head);
  prepared.initial_states = draw_initial_states(inputs, prepared.num_sequences);
  prepared.pairs = reduce_chunks(inputs, prepared.chunks);
  return prepared;
}

std::vector<double> run_reference(const ReferenceHead& head) {
  return run_unpartitioned_fp64(head.chunks, head.pairs, head.initial_states);
}

}  // namespace densefeed::affine_chain
