// The reference of the cp-affine-chain gate: the unpartitioned path in fp64,
// S <- M_c S + H_c over every chunk of a one-shard plan, from fp64 chunk pairs.
// The gate freezes this file, reference.cpp, reference_main.cpp and what they
// build on (chunk_plan, chunk_pairs, inputs, kernels/common), so that editing
// the candidate (affine_chain.cpp, main.cpp) cannot move the reference. The
// candidate's fp64 paths run through these same functions.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "chunk_plan.h"
#include "inputs.h"

namespace densefeed::affine_chain {

// C = A B in fp64, A: [n, k], B: [k, m], C: [n, m] row-major; every C element
// summed in ascending k (i-k-j order), no FMA contraction.
void matmul_fp64(const double* a, const double* b, double* c, std::size_t n, std::size_t k,
                 std::size_t m);

// The sequential fp64 path over chunks [begin, end) of the plan `chunks`:
// S <- M_c S + H_c with `state` [K, V]; at a chunk that begins a sequence the
// state is first set to that sequence's S0 from `initial_states` [sequences, K, V]
// (at chunk `begin` only if `reset_first`); at a chunk that ends a sequence the
// state is copied into `finals` [sequences, K, V] (unless `finals` is empty).
// Throws LayoutError if the range, the state or finals do not fit the plan.
void walk_fp64(std::span<const Chunk> chunks, const ChunkPairs<double>& pairs,
               std::span<const double> initial_states, std::size_t begin, std::size_t end,
               std::span<double> state, std::span<double> finals, bool reset_first = true);

// The initial states S0 of sequences [0, sequences) of one head, concatenated:
// [sequences, K, V] row-major (HeadInputs::initial_state, fp32-representable).
std::vector<double> draw_initial_states(const HeadInputs& inputs, std::size_t sequences);

// Final state of every sequence, [sequences, K, V] row-major, fp64: the walk over
// all of a one-shard plan from the zero state. `pairs` are the plan's chunk pairs
// (reduce_chunks), `initial_states` [sequences, K, V].
// Throws LayoutError on a multi-shard plan or a mismatch between plan, pairs and
// initial states.
std::vector<double> run_unpartitioned_fp64(std::span<const Chunk> chunks,
                                           const ChunkPairs<double>& pairs,
                                           std::span<const double> initial_states);

// One head's reference inputs, built once.
struct ReferenceHead {
  std::size_t num_sequences = 0;
  std::vector<Chunk> chunks;           // one-shard plan
  std::vector<double> initial_states;  // [sequences, K, V]
  ChunkPairs<double> pairs;            // fp64, as reduced
};

// Plans the chunks of `layout` (layout.shards must be 1), draws head `head`'s
// inputs and initial states and reduces its chunk pairs in fp64.
// Throws LayoutError.
ReferenceHead prepare_reference_head(const InputSpec& spec, const Layout& layout,
                                     std::size_t head);

// run_unpartitioned_fp64 over a prepared head: [sequences, K, V] fp64.
std::vector<double> run_reference(const ReferenceHead& head);

}  // namespace densefeed::affine_chain
