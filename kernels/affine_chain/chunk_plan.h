// The chunk plan of a token layout and the affine pairs of its chunks, shared by
// the fp64 reference (reference.h) and the candidate's paths (affine_chain.h).
//
// Token layout: T tokens = the concatenation of sequences of lengths seq_lens;
// `shards` contiguous ranges of T / shards tokens; a segment is one sequence
// intersected with one shard; each segment is cut into chunks of `chunk` tokens
// from its start (the last may be shorter). At a sequence start the state is set
// to that sequence's initial state S0; at its end the state is its final state.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <vector>

#include "inputs.h"

namespace densefeed::affine_chain {

// Thrown for an impossible layout (T not divisible by shards, empty sequence,
// chunk 0, ...) or a path/precision/plan combination that makes no sense.
class LayoutError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct Layout {
  std::vector<std::size_t> seq_lens;  // tokens per sequence, each > 0; T = their sum
  std::size_t shards = 1;             // CP shards, T % shards == 0
  std::size_t chunk = 64;             // tokens per chunk, > 0

  std::size_t total_tokens() const;
};

// One chunk of the plan: tokens [t0, t0 + count) of `sequence`, inside `shard`.
struct Chunk {
  std::size_t t0 = 0;
  std::size_t count = 0;
  std::size_t sequence = 0;
  std::size_t shard = 0;
  bool begins_sequence = false;  // t0 is the first token of `sequence`
  bool ends_sequence = false;    // t0 + count is one past the last token of `sequence`
};

// Chunks of `layout` in token order (shards are contiguous runs of it).
// Throws LayoutError naming the offending field.
std::vector<Chunk> plan_chunks(const Layout& layout);

// Chunk pairs of one head, in T (fp64 as reduced, or rounded to fp32).
template <typename T>
struct ChunkPairs {
  std::size_t dim_k = 0;
  std::size_t dim_v = 0;
  std::vector<T> transitions;    // [chunks, K, K] row-major
  std::vector<T> contributions;  // [chunks, K, V] row-major

  std::size_t size() const { return dim_k == 0 ? 0 : transitions.size() / (dim_k * dim_k); }
  const T* transition(std::size_t c) const { return transitions.data() + c * dim_k * dim_k; }
  const T* contribution(std::size_t c) const { return contributions.data() + c * dim_k * dim_v; }
};

// Reduces every chunk of `chunks` to its affine pair in fp64 (reduce_tokens).
// Cost O(T K (K + V)); memory chunks * (K^2 + K V) * 8 bytes.
ChunkPairs<double> reduce_chunks(const HeadInputs& inputs, std::span<const Chunk> chunks);

}  // namespace densefeed::affine_chain
