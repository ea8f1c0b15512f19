#include "affine_chain.h"

#include <algorithm>
#include <span>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "chunk_pairs.h"
#include "tf32.h"

namespace densefeed::affine_chain {
namespace {

// C[n, m] += A[n, k] B[k, m], row-major. The i-k-j order keeps each C element's
// sum in ascending k and lets the compiler vectorise the j loop without
// reassociating anything (no -ffast-math, no FMA contraction), so the result is
// the same at any vector width: the AVX2 / AVX-512 clones, picked at load time
// for the machine, produce the same bits as the baseline SSE2 code. (The fp64
// counterpart is matmul_fp64 in reference.cpp.)
__attribute__((target_clones("avx512f", "avx2", "default"))) void matmul_accumulate(
    const float* a, const float* b, float* c, std::size_t n, std::size_t k, std::size_t m) {
  for (std::size_t i = 0; i < n; ++i) {
    float* __restrict crow = c + i * m;
    for (std::size_t p = 0; p < k; ++p) {
      const float aip = a[i * k + p];
      const float* __restrict brow = b + p * m;
      for (std::size_t j = 0; j < m; ++j) crow[j] += aip * brow[j];
    }
  }
}

void matmul(const float* a, const float* b, float* c, std::size_t n, std::size_t k,
            std::size_t m) {
  std::fill(c, c + n * m, 0.0f);
  matmul_accumulate(a, b, c, n, k, m);
}

// Scratch for operand conversion, sized once per run.
struct ConvertedOperands {
  std::vector<float> a_hi, a_lo, b_hi, b_lo;
};

void product_into(Precision precision, const float* a, const float* b, float* c, std::size_t n,
                  std::size_t k, std::size_t m, ConvertedOperands& w) {
  const std::size_t na = n * k;
  const std::size_t nb = k * m;
  w.a_hi.resize(na);
  w.b_hi.resize(nb);
  switch (precision) {
    case Precision::ieee: matmul(a, b, c, n, k, m); return;
    case Precision::tf32:
      for (std::size_t i = 0; i < na; ++i) w.a_hi[i] = tf32_truncate(a[i]);
      for (std::size_t i = 0; i < nb; ++i) w.b_hi[i] = tf32_truncate(b[i]);
      matmul(w.a_hi.data(), w.b_hi.data(), c, n, k, m);
      return;
    case Precision::tf32_rn:
      for (std::size_t i = 0; i < na; ++i) w.a_hi[i] = tf32_round_nearest(a[i]);
      for (std::size_t i = 0; i < nb; ++i) w.b_hi[i] = tf32_round_nearest(b[i]);
      matmul(w.a_hi.data(), w.b_hi.data(), c, n, k, m);
      return;
    case Precision::tf32x3:
      w.a_lo.resize(na);
      w.b_lo.resize(nb);
      for (std::size_t i = 0; i < na; ++i) tf32x3_split(a[i], w.a_hi[i], w.a_lo[i]);
      for (std::size_t i = 0; i < nb; ++i) tf32x3_split(b[i], w.b_hi[i], w.b_lo[i]);
      // Small terms first so the corrections are summed before the big hi*hi
      // terms swamp them. Triton's tf32x3 lowering (F32DotTC pass) also adds
      // hi*hi last, but takes A_lo B_hi before A_hi B_lo; the order here is
      // the one our CPU and CUDA paths share.
      matmul(w.a_hi.data(), w.b_lo.data(), c, n, k, m);
      matmul_accumulate(w.a_lo.data(), w.b_hi.data(), c, n, k, m);
      matmul_accumulate(w.a_hi.data(), w.b_hi.data(), c, n, k, m);
      return;
    case Precision::fp64: break;
  }
  throw LayoutError("fp32 product asked for precision fp64");
}

// One head's CP state passing with state and pairs in T: float for the fp32
// precisions (products through `precision`), double for fp64 (all plain, and
// walk_fp64, so that fp64 has one implementation). Pairs: ChunkPairs<double>
// for fp64, ChunkPairsView for fp32 (whoever holds them).
template <typename T, typename Pairs>
class ChainRunner {
 public:
  ChainRunner(Precision precision, std::span<const Chunk> chunks, const Pairs& pairs,
              std::span<const double> initial_states)
      : precision_(precision),
        chunks_(chunks),
        pairs_(pairs),
        k_(pairs.dim_k),
        v_(pairs.dim_v),
        initial_states_(initial_states),
        scratch_(k_ * std::max(k_, v_)) {
    if (chunks.empty()) throw LayoutError("run_cp: the plan has no chunks");
    if (pairs.size() != chunks.size()) {
      throw LayoutError(fmt::format("run_cp: {} chunk pairs for a plan of {} chunks", pairs.size(),
                                    chunks.size()));
    }
    num_sequences_ = chunks.back().sequence + 1;
    if (initial_states.size() != num_sequences_ * k_ * v_) {
      throw LayoutError(
          fmt::format("run_cp: {} initial-state values, expected {} sequences x {} x {}",
                      initial_states.size(), num_sequences_, k_, v_));
    }
    num_shards_ = chunks.back().shard + 1;
    shard_begin_.assign(num_shards_ + 1, chunks.size());
    for (std::size_t c = chunks.size(); c-- > 0;) shard_begin_[chunks[c].shard] = c;
  }

  std::vector<T> unpartitioned() {
    if (num_shards_ != 1) {
      throw LayoutError(fmt::format("run_cp: the unpartitioned path needs a one-shard plan, got {}",
                                    num_shards_));
    }
    std::vector<T> finals(num_sequences_ * k_ * v_);
    std::vector<T> state(k_ * v_, T(0));
    walk(0, chunks_.size(), state, finals.data());
    return finals;
  }

  std::vector<T> partitioned() {
    const std::size_t R = num_shards_;
    const std::size_t kk = k_ * k_;
    const std::size_t kv = k_ * v_;
    // (a) Local pairs of every shard but the last (whose pair nobody consumes).
    std::vector<T> shard_transitions((R - 1) * kk);
    std::vector<T> shard_contributions((R - 1) * kv, T(0));
    std::vector<T> chained(kk);
    for (std::size_t r = 0; r + 1 < R; ++r) {
      // A sequence beginning at the shard's first chunk arrives through the
      // merge, so the local pass starts from zero there without a reset.
      std::span<T> h(shard_contributions.data() + r * kv, kv);
      walk(shard_begin_[r], shard_begin_[r + 1], h, nullptr, /*reset_first=*/false);
      chain_transition(r, std::span<T>(shard_transitions.data() + r * kk, kk), chained);
    }
    // (b) Merge in shard order. S_in(0) is the first sequence's initial state,
    // and so is S_in(r) of any shard whose first token begins a sequence.
    std::vector<T> received(R * kv);
    load_initial_state(chunks_.front().sequence, std::span<T>(received.data(), kv));
    for (std::size_t r = 0; r + 1 < R; ++r) {
      T* next = received.data() + (r + 1) * kv;
      const Chunk& first = chunks_[shard_begin_[r + 1]];
      if (first.begins_sequence) {
        load_initial_state(first.sequence, std::span<T>(next, kv));
        continue;
      }
      product(shard_transitions.data() + r * kk, received.data() + r * kv, next, k_, k_, v_);
      const T* h = shard_contributions.data() + r * kv;
      for (std::size_t i = 0; i < kv; ++i) next[i] += h[i];
    }
    // (c) Every shard from its received state, recording the sequences ending in it.
    std::vector<T> finals(num_sequences_ * kv);
    std::vector<T> state(kv);
    for (std::size_t r = 0; r < R; ++r) {
      std::copy_n(received.data() + r * kv, kv, state.data());
      walk(shard_begin_[r], shard_begin_[r + 1], state, finals.data());
    }
    return finals;
  }

 private:
  void load_initial_state(std::size_t sequence, std::span<T> state) const {
    const double* s0 = initial_states_.data() + sequence * k_ * v_;
    for (std::size_t i = 0; i < k_ * v_; ++i) state[i] = static_cast<T>(s0[i]);
  }

  // C = A B in the precision under test.
  void product(const T* a, const T* b, T* c, std::size_t n, std::size_t k, std::size_t m) {
    if constexpr (std::is_same_v<T, double>) {
      matmul_fp64(a, b, c, n, k, m);
    } else {
      product_into(precision_, a, b, c, n, k, m, operands_);
    }
  }

  // The sequential path over chunks [begin, end): S <- M_c S + H_c, the product
  // always IEEE (fp32, or fp64 through walk_fp64), resetting to S0 at sequence
  // starts (at chunk `begin` only if `reset_first`) and recording S at sequence
  // ends into `finals` (if not null).
  void walk(std::size_t begin, std::size_t end, std::span<T> state, T* finals,
            bool reset_first = true) {
    if constexpr (std::is_same_v<T, double>) {
      const std::span<double> all_finals =
          finals == nullptr ? std::span<double>()
                            : std::span<double>(finals, num_sequences_ * k_ * v_);
      walk_fp64(chunks_, pairs_, initial_states_, begin, end, state, all_finals, reset_first);
    } else {
      for (std::size_t c = begin; c < end; ++c) {
        const Chunk& chunk = chunks_[c];
        if (chunk.begins_sequence && (c != begin || reset_first)) {
          load_initial_state(chunk.sequence, state);
        }
        matmul(pairs_.transition(c), state.data(), scratch_.data(), k_, k_, v_);
        const T* h = pairs_.contribution(c);
        for (std::size_t i = 0; i < k_ * v_; ++i) state[i] = scratch_[i] + h[i];
        if (finals != nullptr && chunk.ends_sequence) {
          std::copy(state.begin(), state.end(), finals + chunk.sequence * k_ * v_);
        }
      }
    }
  }

  // M_r = M_{c_n} ... M_{c_1} over shard r's chunks, chained M = M_c M from I in
  // the precision under test; 0 once a chunk after the shard's first begins a
  // sequence (the state before that point does not reach the shard's end).
  void chain_transition(std::size_t r, std::span<T> m, std::vector<T>& next) {
    std::fill(m.begin(), m.end(), T(0));
    for (std::size_t i = 0; i < k_; ++i) m[i * k_ + i] = T(1);
    for (std::size_t c = shard_begin_[r]; c < shard_begin_[r + 1]; ++c) {
      if (chunks_[c].begins_sequence && c != shard_begin_[r]) {
        std::fill(m.begin(), m.end(), T(0));
        return;
      }
      product(pairs_.transition(c), m.data(), next.data(), k_, k_, k_);
      std::copy(next.begin(), next.end(), m.begin());
    }
  }

  Precision precision_;
  std::span<const Chunk> chunks_;
  const Pairs& pairs_;
  std::size_t k_;
  std::size_t v_;
  std::span<const double> initial_states_;
  std::size_t num_sequences_ = 0;
  std::size_t num_shards_ = 0;
  std::vector<std::size_t> shard_begin_;  // [shards + 1] chunk index of each shard's first chunk
  std::vector<T> scratch_;
  ConvertedOperands operands_;
};

}  // namespace

std::string_view to_string(CpPath path) {
  switch (path) {
    case CpPath::unpartitioned: return "unpartitioned";
    case CpPath::partitioned: return "partitioned";
  }
  return "?";
}

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::fp64: return "fp64";
    case Precision::ieee: return "ieee";
    case Precision::tf32: return "tf32";
    case Precision::tf32_rn: return "tf32-rn";
    case Precision::tf32x3: return "tf32x3";
  }
  return "?";
}

std::optional<CpPath> parse_path(std::string_view text) {
  for (CpPath p : {CpPath::unpartitioned, CpPath::partitioned}) {
    if (text == to_string(p)) return p;
  }
  return std::nullopt;
}

std::optional<Precision> parse_precision(std::string_view text) {
  for (Precision p :
       {Precision::fp64, Precision::ieee, Precision::tf32, Precision::tf32_rn, Precision::tf32x3}) {
    if (text == to_string(p)) return p;
  }
  return std::nullopt;
}

ChunkPairs<float> round_to_fp32(const ChunkPairs<double>& pairs) {
  ChunkPairs<float> out;
  out.dim_k = pairs.dim_k;
  out.dim_v = pairs.dim_v;
  out.transitions.assign(pairs.transitions.begin(), pairs.transitions.end());
  out.contributions.assign(pairs.contributions.begin(), pairs.contributions.end());
  return out;
}

void precision_product(Precision precision, std::span<const float> a, std::span<const float> b,
                       std::span<float> c, std::size_t n, std::size_t k, std::size_t m) {
  if (a.size() != n * k || b.size() != k * m || c.size() != n * m) {
    throw LayoutError(
        fmt::format("precision_product: sizes {}, {}, {} do not fit [{}, {}] x [{}, {}]", a.size(),
                    b.size(), c.size(), n, k, k, m));
  }
  ConvertedOperands w;
  product_into(precision, a.data(), b.data(), c.data(), n, k, m, w);
}

std::vector<float> run_cp(CpPath path, Precision precision, std::span<const Chunk> chunks,
                          const ChunkPairs<float>& pairs, std::span<const double> initial_states) {
  return run_cp(path, precision, chunks, ChunkPairsView::of(pairs), initial_states);
}

std::vector<float> run_cp(CpPath path, Precision precision, std::span<const Chunk> chunks,
                          const ChunkPairsView& pairs, std::span<const double> initial_states) {
  if (precision == Precision::fp64) {
    throw LayoutError("run_cp: precision fp64 runs through run_cp_fp64 with fp64 pairs");
  }
  ChainRunner<float, ChunkPairsView> runner(precision, chunks, pairs, initial_states);
  return path == CpPath::unpartitioned ? runner.unpartitioned() : runner.partitioned();
}

std::vector<double> run_cp_fp64(CpPath path, std::span<const Chunk> chunks,
                                const ChunkPairs<double>& pairs,
                                std::span<const double> initial_states) {
  if (path == CpPath::unpartitioned) return run_unpartitioned_fp64(chunks, pairs, initial_states);
  ChainRunner<double, ChunkPairs<double>> runner(Precision::fp64, chunks, pairs, initial_states);
  return runner.partitioned();
}

PreparedHead prepare_head(const InputSpec& spec, const Layout& layout, CpPath path,
                          Precision precision, std::size_t head) {
  if (path == CpPath::unpartitioned && layout.shards != 1) {
    throw LayoutError(
        fmt::format("shards: the unpartitioned path runs on 1 shard, got {}", layout.shards));
  }
  PreparedHead prepared;
  prepared.path = path;
  prepared.precision = precision;
  prepared.chunks = plan_chunks(layout);
  prepared.num_sequences = layout.seq_lens.size();
  const HeadInputs inputs(spec, head);
  prepared.initial_states = draw_initial_states(inputs, prepared.num_sequences);
  if (precision == Precision::fp64) {
    prepared.pairs64 = reduce_chunks(inputs, prepared.chunks);
  } else {
    // Reduce chunk by chunk so that only the fp32 copy of every pair is held.
    ChunkPairs<float>& p = prepared.pairs32;
    p.dim_k = spec.dim_k;
    p.dim_v = spec.dim_v;
    p.transitions.reserve(prepared.chunks.size() * spec.dim_k * spec.dim_k);
    p.contributions.reserve(prepared.chunks.size() * spec.dim_k * spec.dim_v);
    for (const Chunk& c : prepared.chunks) {
      const AffinePair64 pair = reduce_tokens(inputs.tokens(c.t0, c.count));
      p.transitions.insert(p.transitions.end(), pair.transition.begin(), pair.transition.end());
      p.contributions.insert(p.contributions.end(), pair.contribution.begin(),
                             pair.contribution.end());
    }
  }
  return prepared;
}

std::vector<double> run_prepared(const PreparedHead& head) {
  if (head.precision == Precision::fp64) {
    return run_cp_fp64(head.path, head.chunks, head.pairs64, head.initial_states);
  }
  const std::vector<float> finals =
      run_cp(head.path, head.precision, head.chunks, head.pairs32, head.initial_states);
  return std::vector<double>(finals.begin(), finals.end());
}

}  // namespace densefeed::affine_chain
