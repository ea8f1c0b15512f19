// Context-parallel (CP) state passing of a chunked gated-delta-rule layer, the
// way CP kernels do it, on the CPU (issue 2). Partitioning is the only thing that
// differs between the two paths:
//
//  unpartitioned  the production path: S <- M_c S + H_c over every chunk, fp32.
//  partitioned    per shard r: (a) local contribution H_r (fp32 sequential path
//                 from a zero state) and transition M_r (chain M = M_c M from I,
//                 in the precision under test); (b) merge in order,
//                 S_in(0) = S0 of the first sequence, S_in(r+1) = M_r S_in(r) + H_r
//                 (product in the precision under test, add in fp32); (c) each
//                 shard runs its chunks from S_in(r) with the fp32 path.
//                 With one shard this is the unpartitioned path, bit for bit.
//
// Sequence starts (variable-length batches): a sequence that starts *inside* a
// shard, i.e. at any chunk but the shard's first, cuts the chain: in (a) the
// local state is set to its S0 there and M_r becomes 0 (nothing before that
// point reaches the shard's end). A sequence that starts at a shard's first
// token enters through the merge instead, exactly as the first sequence does
// through S_in(0): (b) sets S_in(r) to its S0, and shard r's own chain and
// contribution run over the whole shard from I and from 0. So shard 0's
// transition is the full chain over its chunks and carries S0 of the first
// sequence into S_in(1) -- which is where a long-memory state meets the chain
// precision even with two shards.
//
// The token layout, its chunk plan and chunk pairs are in chunk_plan.h; the fp64
// unpartitioned path, the gate's reference, is in reference.h (its own
// executable, affine_chain_reference); this file is the candidate side.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "chunk_plan.h"
#include "inputs.h"
#include "reference.h"

namespace densefeed::affine_chain {

enum class CpPath { unpartitioned, partitioned };

// Precision of the chain and merge products (the sequential parts are fp32 IEEE
// for every precision but fp64).
//  fp64     everything in fp64 (the reference).
//  ieee     fp32 products, fp32 accumulation.
//  tf32     both operands cut with tf32_truncate, exact products, fp32 accumulation.
//  tf32_rn  operands rounded with tf32_round_nearest (cvt.rna.tf32.f32).
//  tf32x3   hi/lo split of each operand; C = A_hi B_lo, C += A_lo B_hi,
//           C += A_hi B_hi, fp32 accumulation.
enum class Precision { fp64, ieee, tf32, tf32_rn, tf32x3 };

// "unpartitioned", "partitioned" / "fp64", "ieee", "tf32", "tf32-rn", "tf32x3".
std::string_view to_string(CpPath path);
std::string_view to_string(Precision precision);
std::optional<CpPath> parse_path(std::string_view text);
std::optional<Precision> parse_precision(std::string_view text);

// Each pair rounded to nearest fp32 (what a kernel holding fp32 pairs sees).
ChunkPairs<float> round_to_fp32(const ChunkPairs<double>& pairs);

// C = A B in `precision` (not fp64), A: [n, k], B: [k, m], C: [n, m], row-major
// fp32. Operands are converted once (O(nk + km)); the products are accumulated
// in fp32 in i-k-j order (for every C element, k ascending; tf32x3 runs its three
// products one after the other into the same accumulator).
void precision_product(Precision precision, std::span<const float> a, std::span<const float> b,
                       std::span<float> c, std::size_t n, std::size_t k, std::size_t m);

// Chunk pairs of one head in fp32 that someone else holds (a benchmark
// driver's buffers, affine_chain_kernel.h): the accessors of ChunkPairs.
struct ChunkPairsView {
  std::size_t dim_k = 0;
  std::size_t dim_v = 0;
  std::size_t count = 0;                  // chunks
  const float* transitions = nullptr;     // [count, K, K] row-major
  const float* contributions = nullptr;   // [count, K, V] row-major

  static ChunkPairsView of(const ChunkPairs<float>& pairs) {
    return {pairs.dim_k, pairs.dim_v, pairs.size(), pairs.transitions.data(), pairs.contributions.data()};
  }
  std::size_t size() const { return count; }
  const float* transition(std::size_t c) const { return transitions + c * dim_k * dim_k; }
  const float* contribution(std::size_t c) const { return contributions + c * dim_k * dim_v; }
};

// Final state of every sequence for one head, [sequences, K, V] row-major, fp32.
// `chunks` is a plan (plan_chunks), `pairs` its fp32 chunk pairs, `initial_states`
// [sequences, K, V] (fp32-representable). `precision` must not be fp64;
// `unpartitioned` needs a one-shard plan.
// Throws LayoutError on a mismatch between plan, pairs and initial states.
std::vector<float> run_cp(CpPath path, Precision precision, std::span<const Chunk> chunks,
                          const ChunkPairs<float>& pairs, std::span<const double> initial_states);
// The same over pairs held elsewhere.
std::vector<float> run_cp(CpPath path, Precision precision, std::span<const Chunk> chunks,
                          const ChunkPairsView& pairs, std::span<const double> initial_states);

// The same with every operation in fp64: unpartitioned is the reference itself
// (run_unpartitioned_fp64); partitioned runs its sequential parts and products
// through walk_fp64 and matmul_fp64.
std::vector<double> run_cp_fp64(CpPath path, std::span<const Chunk> chunks,
                                const ChunkPairs<double>& pairs,
                                std::span<const double> initial_states);

// Everything one head's run needs, built once (the untimed part of a benchmark).
struct PreparedHead {
  CpPath path = CpPath::unpartitioned;
  Precision precision = Precision::fp64;
  std::size_t num_sequences = 0;
  std::vector<Chunk> chunks;
  std::vector<double> initial_states;  // [sequences, K, V]
  ChunkPairs<double> pairs64;          // filled for fp64 only
  ChunkPairs<float> pairs32;           // filled for fp32 precisions only
};

// Plans the chunks (unpartitioned: layout.shards must be 1), draws head `head`'s
// inputs and reduces its chunk pairs, keeping them in fp64 or fp32 as
// `precision` needs. Throws LayoutError.
PreparedHead prepare_head(const InputSpec& spec, const Layout& layout, CpPath path,
                          Precision precision, std::size_t head);

// Runs the prepared path; final states [sequences, K, V] widened to fp64 (exact
// for the fp32 precisions).
std::vector<double> run_prepared(const PreparedHead& head);

}  // namespace densefeed::affine_chain
