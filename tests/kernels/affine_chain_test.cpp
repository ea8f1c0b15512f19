// The CP state passing: layout planning, the precision products, and the merge
// algebra (partitioned == unpartitioned in fp64; one shard == unpartitioned bit
// for bit in every precision).
#include "affine_chain.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace densefeed::affine_chain {
namespace {

constexpr Precision kFp32Precisions[] = {Precision::ieee, Precision::tf32, Precision::tf32_rn,
                                         Precision::tf32x3};

Layout layout(std::vector<std::size_t> seq_lens, std::size_t shards, std::size_t chunk = 64) {
  Layout l;
  l.seq_lens = std::move(seq_lens);
  l.shards = shards;
  l.chunk = chunk;
  return l;
}

InputSpec small_spec(Regime regime, std::uint64_t seed = 2024) {
  InputSpec s;
  s.seed = seed;
  s.regime = regime;
  s.dim_k = 16;
  s.dim_v = 16;
  return s;
}

std::vector<double> initial_states(const HeadInputs& inputs, std::size_t sequences) {
  std::vector<double> out;
  for (std::size_t s = 0; s < sequences; ++s) {
    const std::vector<double> s0 = inputs.initial_state(s);
    out.insert(out.end(), s0.begin(), s0.end());
  }
  return out;
}

double rel_l2(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0.0;
  double den = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

std::uint32_t bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

float from(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// --- plan_chunks ------------------------------------------------------------

TEST(PlanChunks, SegmentsAreSequencesCutAtShardBoundaries) {
  // The upstream CP test layout: T = 10240 = 3000 + 4000 + 3240 over 2 shards
  // of 5120 tokens. Segments: [0, 3000) [3000, 5120) | [5120, 7000) [7000, 10240).
  const std::vector<Chunk> chunks = plan_chunks(layout({3000, 4000, 3240}, 2));
  std::size_t next = 0;
  for (const Chunk& c : chunks) {
    EXPECT_EQ(c.t0, next);  // contiguous, in token order
    next = c.t0 + c.count;
    EXPECT_EQ(c.shard, c.t0 / 5120);
    EXPECT_LE(c.count, 64u);
  }
  EXPECT_EQ(next, 10240u);
  auto at = [&](std::size_t t0) {
    for (const Chunk& c : chunks)
      if (c.t0 == t0) return c;
    ADD_FAILURE() << "no chunk starts at " << t0;
    return Chunk{};
  };
  // Sequence 0: 46 full chunks + 56 tokens, then sequence 1 starts at 3000.
  EXPECT_EQ(at(2944).count, 56u);
  EXPECT_TRUE(at(2944).ends_sequence);
  EXPECT_TRUE(at(3000).begins_sequence);
  EXPECT_EQ(at(3000).sequence, 1u);
  // Sequence 1's first segment ends at the shard boundary 5120 (3000 + 33*64 = 5112).
  EXPECT_EQ(at(5112).count, 8u);
  EXPECT_FALSE(at(5112).ends_sequence);
  // Its second segment restarts the chunk grid at 5120 and does not begin a sequence.
  EXPECT_EQ(at(5120).shard, 1u);
  EXPECT_FALSE(at(5120).begins_sequence);
  EXPECT_EQ(at(5120).sequence, 1u);
  EXPECT_TRUE(at(7000).begins_sequence);
  EXPECT_EQ(chunks.back().sequence, 2u);
  EXPECT_TRUE(chunks.back().ends_sequence);
  EXPECT_TRUE(chunks.front().begins_sequence);
}

TEST(PlanChunks, RejectsImpossibleLayouts) {
  EXPECT_THROW(plan_chunks(layout({100}, 3)), LayoutError);  // 100 % 3 != 0
  EXPECT_THROW(plan_chunks(layout({}, 1)), LayoutError);
  EXPECT_THROW(plan_chunks(layout({10, 0, 6}, 1)), LayoutError);
  EXPECT_THROW(plan_chunks(layout({64}, 0)), LayoutError);
  EXPECT_THROW(plan_chunks(layout({64}, 1, 0)), LayoutError);
  EXPECT_EQ(plan_chunks(layout({64}, 64)).size(), 64u);  // one token per shard is legal
}

// --- precision_product ------------------------------------------------------

TEST(PrecisionProduct, OneByOneShowsEachConversion) {
  // a = b = 1 + 2^-23. Exact a*b = 1 + 2^-22 + 2^-46, which fp32 rounds to 1 + 2^-22.
  const std::vector<float> a = {from(0x3F800001u)};
  std::vector<float> c(1);
  precision_product(Precision::ieee, a, a, c, 1, 1, 1);
  EXPECT_EQ(bits(c[0]), 0x3F800002u);
  precision_product(Precision::tf32, a, a, c, 1, 1, 1);
  EXPECT_EQ(bits(c[0]), 0x3F800000u);  // both operands cut to 1.0
  precision_product(Precision::tf32_rn, a, a, c, 1, 1, 1);
  EXPECT_EQ(bits(c[0]), 0x3F800000u);
  // hi = 1, lo = 2^-23: 1*2^-23 + 2^-23*1 + 1*1 = 1 + 2^-22.
  precision_product(Precision::tf32x3, a, a, c, 1, 1, 1);
  EXPECT_EQ(bits(c[0]), 0x3F800002u);
  // 1 + 2^-11 + 2^-12 (0x3F801800): both extra bits lie below TF32's last
  // mantissa bit (2^-10), so truncation gives 1.0...
  const std::vector<float> x = {from(0x3F801800u)};
  const std::vector<float> one = {1.0f};
  precision_product(Precision::tf32, x, one, c, 1, 1, 1);
  EXPECT_EQ(bits(c[0]), 0x3F800000u);
  // ...while round-to-nearest takes it up to 1 + 2^-10.
  precision_product(Precision::tf32_rn, x, one, c, 1, 1, 1);
  EXPECT_EQ(bits(c[0]), 0x3F802000u);
}

// The rule measured on the H200 (tests/perf/device_affine_chain.sh, the
// mma.sync m16n8k8 .tf32 experiments of tf32_device_check.cu): the tensor core
// reads an unconverted fp32 operand, A or B, as its top 10 mantissa bits
// (truncation, round toward zero), and a single product of two such operands is
// exact. Precision tf32 must do the same on the CPU; the same three
// experiments, on bit patterns where truncation and rounding differ.
TEST(PrecisionProduct, Tf32ReadsBothOperandsAsTheTensorCoreDoes) {
  const std::vector<std::uint32_t> in = {0x3F801FFFu, 0x3F801000u, 0xBFFFFFFFu, 0x3FAAAAABu};
  const std::vector<std::uint32_t> cut = {0x3F800000u, 0x3F800000u, 0xBFFFE000u, 0x3FAAA000u};
  const std::size_t n = in.size();
  std::vector<float> x(n), identity(n * n, 0.0f), c(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = from(in[i]);
  for (std::size_t i = 0; i < n; ++i) identity[i * n + i] = 1.0f;
  // A operand: [1, n] x I.
  precision_product(Precision::tf32, x, identity, c, 1, n, n);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(bits(c[i]), cut[i]) << "A operand " << i;
  // B operand: I x [n, 1].
  precision_product(Precision::tf32, identity, x, c, n, n, 1);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(bits(c[i]), cut[i]) << "B operand " << i;
  // Single products x y: the truncated operands' exact product (what the MMA
  // returned), not the round-to-nearest operands' nor the fp32 product.
  struct Product {
    std::uint32_t x, y, expected, round_nearest, fp32;
  };
  for (const Product& p : {Product{0x3FFFFFFFu, 0x3FFFFFFFu, 0x407FC004u, 0x40800000u, 0x407FFFFEu},
                           Product{0x3F801FFFu, 0xC0401FFFu, 0xC0400000u, 0xC0405008u, 0xC0405005u},
                           Product{0x3FAAAAABu, 0x3E4CCCCDu, 0x3E887778u, 0x3E887778u, 0x3E888889u}}) {
    const std::vector<float> a = {from(p.x)}, b = {from(p.y)};
    std::vector<float> d(1);
    precision_product(Precision::tf32, a, b, d, 1, 1, 1);
    EXPECT_EQ(bits(d[0]), p.expected) << std::hex << p.x << " * " << p.y;
    precision_product(Precision::tf32_rn, a, b, d, 1, 1, 1);
    EXPECT_EQ(bits(d[0]), p.round_nearest) << std::hex << p.x << " * " << p.y;
    precision_product(Precision::ieee, a, b, d, 1, 1, 1);
    EXPECT_EQ(bits(d[0]), p.fp32) << std::hex << p.x << " * " << p.y;
  }
}

TEST(PrecisionProduct, AccumulatesInIkjOrderInFp32) {
  // [1, 2^-24, 2^-24] . [1, 1, 1]^T: summed left to right in fp32 each 2^-24 is a
  // tie against 1 and rounds to even (1.0), so the result is exactly 1.
  const std::vector<float> a = {1.0f, 0x1.0p-24f, 0x1.0p-24f};
  const std::vector<float> b = {1.0f, 1.0f, 1.0f};
  std::vector<float> c(1);
  precision_product(Precision::ieee, a, b, c, 1, 3, 1);
  EXPECT_EQ(c[0], 1.0f);
}

TEST(PrecisionProduct, ErrorsOrderAsExpectedOnRandomMatrices) {
  const std::size_t n = 64;
  std::vector<float> a(n * n);
  std::vector<float> b(n * n);
  std::uint32_t state = 1;
  for (float* m : {a.data(), b.data()}) {
    for (std::size_t i = 0; i < n * n; ++i) {
      state = state * 1664525u + 1013904223u;
      m[i] = static_cast<float>(state >> 8) * 0x1.0p-24f - 0.5f;
    }
  }
  std::vector<double> exact(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t p = 0; p < n; ++p)
      for (std::size_t j = 0; j < n; ++j)
        exact[i * n + j] += static_cast<double>(a[i * n + p]) * static_cast<double>(b[p * n + j]);
  auto error = [&](Precision p) {
    std::vector<float> c(n * n);
    precision_product(p, a, b, c, n, n, n);
    return rel_l2(std::vector<double>(c.begin(), c.end()), exact);
  };
  const double ieee = error(Precision::ieee);
  const double tf32 = error(Precision::tf32);
  const double tf32_rn = error(Precision::tf32_rn);
  const double tf32x3 = error(Precision::tf32x3);
  EXPECT_LT(ieee, 1e-6);
  EXPECT_LT(tf32x3, 1e-6);
  EXPECT_GT(tf32_rn, 1e-5);  // about 2^-11 per operand
  EXPECT_LT(tf32_rn, 1e-3);
  EXPECT_GT(tf32, tf32_rn);  // truncation: twice the spread, and biased
}

// --- merge algebra ----------------------------------------------------------

struct MergeCase {
  std::vector<std::size_t> seq_lens;
  std::size_t shards;
};

class MergeAlgebra : public ::testing::TestWithParam<std::tuple<Regime, MergeCase>> {};

// In fp64, partitioning changes nothing but round-off.
TEST_P(MergeAlgebra, PartitionedEqualsUnpartitionedInFp64) {
  const auto& [regime, mc] = GetParam();
  const HeadInputs inputs(small_spec(regime), 1);
  const std::vector<double> s0 = initial_states(inputs, mc.seq_lens.size());

  const std::vector<Chunk> whole = plan_chunks(layout(mc.seq_lens, 1));
  const std::vector<double> reference =
      run_cp_fp64(CpPath::unpartitioned, whole, reduce_chunks(inputs, whole), s0);
  const std::vector<Chunk> sharded = plan_chunks(layout(mc.seq_lens, mc.shards));
  const std::vector<double> partitioned =
      run_cp_fp64(CpPath::partitioned, sharded, reduce_chunks(inputs, sharded), s0);

  ASSERT_EQ(partitioned.size(), reference.size());
  for (double x : partitioned) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LT(rel_l2(partitioned, reference), 1e-12);
  // Per sequence as well: a layout bug could hide one small sequence in the total.
  const std::size_t kv = 16 * 16;
  for (std::size_t s = 0; s < mc.seq_lens.size(); ++s) {
    const std::vector<double> p(partitioned.begin() + s * kv, partitioned.begin() + (s + 1) * kv);
    const std::vector<double> r(reference.begin() + s * kv, reference.begin() + (s + 1) * kv);
    EXPECT_LT(rel_l2(p, r), 1e-12) << "sequence " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MergeAlgebra,
    ::testing::Combine(::testing::Values(Regime::long_memory, Regime::fast_decay),
                       ::testing::Values(MergeCase{{2048}, 2}, MergeCase{{2048}, 4},
                                         MergeCase{{2048}, 8}, MergeCase{{3000, 4000, 3240}, 2},
                                         MergeCase{{3000, 4000, 3240}, 4},
                                         MergeCase{{3000, 4000, 3240}, 8},
                                         // Sequences starting exactly on shard
                                         // boundaries, and one spanning three shards.
                                         MergeCase{{512, 512, 1024}, 4},
                                         MergeCase{{100, 1800, 148}, 8})),
    [](const auto& param_info) {
      const MergeCase& mc = std::get<1>(param_info.param);
      std::string name =
          std::get<0>(param_info.param) == Regime::long_memory ? "LongMemory" : "FastDecay";
      for (std::size_t len : mc.seq_lens) name += "_" + std::to_string(len);
      return name + "_shards" + std::to_string(mc.shards);
    });

// With one shard, the partitioned path is the unpartitioned computation: same
// bits, whatever the precision of its (then unused) chain and merge.
TEST(MergeAlgebra, OneShardIsBitIdenticalInEveryPrecision) {
  for (const std::vector<std::size_t>& lens :
       {std::vector<std::size_t>{2048}, std::vector<std::size_t>{3000, 4000, 3240}}) {
    const HeadInputs inputs(small_spec(Regime::long_memory), 0);
    const std::vector<double> s0 = initial_states(inputs, lens.size());
    const std::vector<Chunk> chunks = plan_chunks(layout(lens, 1));
    const ChunkPairs<double> pairs64 = reduce_chunks(inputs, chunks);
    const ChunkPairs<float> pairs32 = round_to_fp32(pairs64);
    EXPECT_EQ(run_cp_fp64(CpPath::partitioned, chunks, pairs64, s0),
              run_cp_fp64(CpPath::unpartitioned, chunks, pairs64, s0));
    const std::vector<float> unpartitioned =
        run_cp(CpPath::unpartitioned, Precision::ieee, chunks, pairs32, s0);
    for (Precision p : kFp32Precisions) {
      const std::vector<float> partitioned = run_cp(CpPath::partitioned, p, chunks, pairs32, s0);
      ASSERT_EQ(partitioned.size(), unpartitioned.size());
      EXPECT_EQ(0, std::memcmp(partitioned.data(), unpartitioned.data(),
                               partitioned.size() * sizeof(float)))
          << to_string(p) << " with " << lens.size() << " sequences";
    }
  }
}

// The chain restarts where a sequence starts: the final state of a sequence
// that begins inside a shard cannot depend on anything before it, in any
// precision. Sequence 1 here starts mid-shard 1 and ends in shard 3.
TEST(MergeAlgebra, SequenceStartInsideAShardCutsTheChain) {
  const HeadInputs inputs(small_spec(Regime::long_memory), 0);
  const std::vector<double> s0 = initial_states(inputs, 2);
  const std::vector<Chunk> chunks = plan_chunks(layout({700, 1348}, 4));
  const ChunkPairs<float> pairs32 = round_to_fp32(reduce_chunks(inputs, chunks));
  std::vector<double> s0_other = s0;
  for (std::size_t i = 0; i < 16 * 16; ++i) s0_other[i] += 1.0;  // change sequence 0's S0 only
  for (Precision p : kFp32Precisions) {
    const std::vector<float> a = run_cp(CpPath::partitioned, p, chunks, pairs32, s0);
    const std::vector<float> b = run_cp(CpPath::partitioned, p, chunks, pairs32, s0_other);
    EXPECT_NE(std::vector<float>(a.begin(), a.begin() + 256),
              std::vector<float>(b.begin(), b.begin() + 256));
    EXPECT_EQ(std::vector<float>(a.begin() + 256, a.end()),
              std::vector<float>(b.begin() + 256, b.end()))
        << to_string(p);
  }
}

TEST(RunCp, RejectsMismatchedInputs) {
  const HeadInputs inputs(small_spec(Regime::fast_decay), 0);
  const std::vector<double> s0 = initial_states(inputs, 1);
  const std::vector<Chunk> sharded = plan_chunks(layout({256}, 2));
  const ChunkPairs<double> pairs64 = reduce_chunks(inputs, sharded);
  const ChunkPairs<float> pairs32 = round_to_fp32(pairs64);
  EXPECT_THROW(run_cp(CpPath::unpartitioned, Precision::ieee, sharded, pairs32, s0), LayoutError);
  EXPECT_THROW(run_cp(CpPath::partitioned, Precision::fp64, sharded, pairs32, s0), LayoutError);
  EXPECT_THROW(
      run_cp(CpPath::partitioned, Precision::ieee, sharded, pairs32, initial_states(inputs, 2)),
      LayoutError);
  const std::vector<Chunk> other = plan_chunks(layout({320}, 1));
  EXPECT_THROW(run_cp(CpPath::unpartitioned, Precision::ieee, other, pairs32, s0), LayoutError);
  EXPECT_THROW(prepare_head(small_spec(Regime::fast_decay), layout({256}, 2), CpPath::unpartitioned,
                            Precision::ieee, 0),
               LayoutError);
  // The reference's own entry points refuse the same.
  EXPECT_THROW(run_unpartitioned_fp64(sharded, pairs64, s0), LayoutError);
  EXPECT_THROW(run_unpartitioned_fp64(other, pairs64, s0), LayoutError);
  EXPECT_THROW(prepare_reference_head(small_spec(Regime::fast_decay), layout({256}, 2), 0),
               LayoutError);
  std::vector<double> state(16);  // not K x V
  EXPECT_THROW(walk_fp64(sharded, pairs64, s0, 0, sharded.size(), state, {}), LayoutError);
}

// The reference's prepared head is the candidate's fp64 one, and runs to the same bits.
TEST(RunCp, ReferenceHeadMatchesTheCandidatesFp64Head) {
  const InputSpec spec = small_spec(Regime::long_memory);
  const Layout l = layout({100, 412}, 1);
  const ReferenceHead ref = prepare_reference_head(spec, l, 1);
  const PreparedHead cand = prepare_head(spec, l, CpPath::unpartitioned, Precision::fp64, 1);
  EXPECT_EQ(ref.num_sequences, 2u);
  EXPECT_EQ(ref.initial_states, cand.initial_states);
  EXPECT_EQ(ref.pairs.transitions, cand.pairs64.transitions);
  EXPECT_EQ(ref.pairs.contributions, cand.pairs64.contributions);
  EXPECT_EQ(run_reference(ref), run_prepared(cand));
}

TEST(RunCp, ParseNames) {
  EXPECT_EQ(parse_precision("tf32-rn"), Precision::tf32_rn);
  EXPECT_EQ(parse_precision("tf32x3"), Precision::tf32x3);
  EXPECT_EQ(parse_precision("tf32_rn"), std::nullopt);
  EXPECT_EQ(parse_path("partitioned"), CpPath::partitioned);
  EXPECT_EQ(parse_path("sharded"), std::nullopt);
  for (Precision p :
       {Precision::fp64, Precision::ieee, Precision::tf32, Precision::tf32_rn, Precision::tf32x3}) {
    EXPECT_EQ(parse_precision(to_string(p)), p);
  }
}

}  // namespace
}  // namespace densefeed::affine_chain
