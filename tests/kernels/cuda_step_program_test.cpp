// The CUDA path's step programs (cuda_step_program.h), run on the CPU by a
// small interpreter that does exactly what step_kernel does per step (reset,
// X <- A X (+ B), record; init and store per task) with the CPU path's
// products: the result must be run_cp's, bit for bit, in every precision and
// layout. This checks the port of the algorithm without a GPU; the GPU's own
// arithmetic is checked on the device (tests/perf/device_affine_chain.sh).
#include "cuda_step_program.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "affine_chain.h"

namespace densefeed::affine_chain {
namespace {

using cuda::GpuInit;
using cuda::GpuProgram;

std::uint32_t bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Where a program's matrices and states live: [count, K, n] arrays.
struct Operands {
  std::size_t n;
  const float* a;        // A_i, [*, K, K]
  const float* b;        // B_i, [*, K, n]; null: no add
  const float* s0;       // initial states [S, K, n]
  const float* slots;    // init slots
  float* record;         // record slots
  float* store;          // store slots
};

void interpret(const GpuProgram& p, Precision precision, std::size_t k, const Operands& o) {
  const std::size_t kk = k * k, kn = k * o.n;
  std::vector<float> x(kn), y(kn);
  for (const cuda::GpuTask& task : p.tasks) {
    switch (task.init) {
      case GpuInit::identity:
        std::fill(x.begin(), x.end(), 0.0f);
        for (std::size_t i = 0; i < k; ++i) x[i * o.n + i] = 1.0f;
        break;
      case GpuInit::zero: std::fill(x.begin(), x.end(), 0.0f); break;
      case GpuInit::initial_state: std::copy_n(o.s0 + task.init_index * kn, kn, x.begin()); break;
      case GpuInit::slot: std::copy_n(o.slots + task.init_index * kn, kn, x.begin()); break;
    }
    for (std::int32_t s = 0; s < task.num_steps; ++s) {
      const cuda::GpuStep& step = p.steps[task.first_step + s];
      if (step.reset == cuda::kResetZeroStop) {
        std::fill(x.begin(), x.end(), 0.0f);
        break;
      }
      if (step.reset >= 0) std::copy_n(o.s0 + step.reset * kn, kn, x.begin());
      if (step.matrix >= 0) {
        precision_product(precision, std::span<const float>(o.a + step.matrix * kk, kk), x, y, k, k,
                          o.n);
        if (o.b != nullptr) {
          for (std::size_t i = 0; i < kn; ++i) y[i] += o.b[step.matrix * kn + i];
        }
        x = y;
      }
      if (step.record >= 0) std::copy(x.begin(), x.end(), o.record + step.record * kn);
    }
    if (task.store >= 0) std::copy(x.begin(), x.end(), o.store + task.store * kn);
  }
}

// The four phases as GpuChainRunner::run launches them.
std::vector<float> run_programs(const cuda::GpuPrograms& p, Precision precision,
                                const ChunkPairs<float>& pairs, const std::vector<float>& s0) {
  const std::size_t k = pairs.dim_k, v = pairs.dim_v, r1 = p.shards - 1;
  std::vector<float> shard_t(r1 * k * k), shard_h(r1 * k * v), received(p.shards * k * v),
      finals(p.sequences * k * v, std::numeric_limits<float>::quiet_NaN());
  interpret(p.chain, precision, k,
            {k, pairs.transitions.data(), nullptr, nullptr, nullptr, nullptr, shard_t.data()});
  interpret(p.local, Precision::ieee, k,
            {v, pairs.transitions.data(), pairs.contributions.data(), s0.data(), nullptr, nullptr,
             shard_h.data()});
  interpret(p.merge, precision, k,
            {v, shard_t.data(), shard_h.data(), s0.data(), nullptr, received.data(), nullptr});
  interpret(p.final_walk, Precision::ieee, k,
            {v, pairs.transitions.data(), pairs.contributions.data(), s0.data(), received.data(),
             finals.data(), nullptr});
  return finals;
}

struct Case {
  std::vector<std::size_t> seq_lens;
  std::size_t shards;
};

TEST(GpuStepPrograms, InterpretedTheyAreTheCpuPathBitForBit) {
  const std::vector<Case> cases = {
      {{1024}, 1},            // unpartitioned: the final walk alone
      {{1024}, 4},            // one sequence across shards
      {{1000}, 8},            // partial chunk at the end of every shard
      {{300, 700, 24}, 2},    // sequence starts inside shards: chains cut
      {{256, 768}, 4},        // a sequence starting at a shard's first token
      {{100, 156, 768}, 4},   // both, and a sequence ending at a shard boundary
      {{64, 64, 64, 64}, 4},  // every shard is its own sequence
  };
  InputSpec spec;
  spec.seed = 77;
  spec.regime = Regime::long_memory;
  spec.dim_k = 16;
  spec.dim_v = 8;
  for (const Case& c : cases) {
    Layout layout;
    layout.seq_lens = c.seq_lens;
    layout.shards = c.shards;
    for (Precision precision : {Precision::ieee, Precision::tf32, Precision::tf32_rn, Precision::tf32x3}) {
      const PreparedHead head = prepare_head(spec, layout, CpPath::partitioned, precision, 0);
      const cuda::GpuPrograms programs = build_gpu_programs(head.chunks);
      ASSERT_EQ(programs.shards, c.shards);
      ASSERT_EQ(programs.sequences, c.seq_lens.size());
      const std::vector<float> s0(head.initial_states.begin(), head.initial_states.end());
      const std::vector<float> expected =
          run_cp(CpPath::partitioned, precision, head.chunks, head.pairs32, head.initial_states);
      const std::vector<float> got = run_programs(programs, precision, head.pairs32, s0);
      ASSERT_EQ(got.size(), expected.size());
      std::size_t differ = 0;
      for (std::size_t i = 0; i < got.size(); ++i) differ += bits(got[i]) != bits(expected[i]);
      EXPECT_EQ(differ, 0u) << "shards " << c.shards << ", " << c.seq_lens.size()
                            << " sequences, precision " << to_string(precision);
    }
  }
}

TEST(GpuStepPrograms, ChainsAreCutWhereASequenceStartsInsideAShard) {
  Layout layout;
  layout.seq_lens = {100, 156, 768};  // seq 0 [0, 100), 1 [100, 256), 2 [256, 1024); shards of 256
  layout.shards = 4;
  const std::vector<Chunk> chunks = plan_chunks(layout);
  const cuda::GpuPrograms p = build_gpu_programs(chunks);
  ASSERT_EQ(p.chain.tasks.size(), 3u);
  // Shard 0: chunk 0, then sequence 1 begins at chunk 2: M_0 = 0.
  const cuda::GpuTask& t0 = p.chain.tasks[0];
  ASSERT_EQ(t0.num_steps, 3);
  EXPECT_EQ(p.chain.steps[t0.first_step + 0].matrix, 0);
  EXPECT_EQ(p.chain.steps[t0.first_step + 1].matrix, 1);
  EXPECT_EQ(p.chain.steps[t0.first_step + 2].reset, cuda::kResetZeroStop);
  // The merge: S_in(0) recorded; sequence 2 begins at shard 1's first token
  // (256), so S_in(1) is its initial state; then two products.
  ASSERT_EQ(p.merge.steps.size(), 4u);
  EXPECT_EQ(p.merge.steps[0].record, 0);
  EXPECT_EQ(p.merge.steps[1].matrix, cuda::kNone);
  EXPECT_EQ(p.merge.steps[1].reset, 2);
  EXPECT_EQ(p.merge.steps[1].record, 1);
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(p.merge.steps[r + 1].matrix, r);
    EXPECT_EQ(p.merge.steps[r + 1].reset, cuda::kNone);
    EXPECT_EQ(p.merge.steps[r + 1].record, r + 1);
  }
  EXPECT_THROW(build_gpu_programs({}), LayoutError);
}

}  // namespace
}  // namespace densefeed::affine_chain
