#include "chunk_plan.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "chunk_pairs.h"

namespace densefeed::affine_chain {

std::size_t Layout::total_tokens() const {
  return std::accumulate(seq_lens.begin(), seq_lens.end(), std::size_t{0});
}

std::vector<Chunk> plan_chunks(const Layout& layout) {
  if (layout.seq_lens.empty()) throw LayoutError("seq_lens: expected at least one sequence");
  for (std::size_t s = 0; s < layout.seq_lens.size(); ++s) {
    if (layout.seq_lens[s] == 0) throw LayoutError(fmt::format("seq_lens[{}]: expected > 0", s));
  }
  if (layout.chunk == 0) throw LayoutError("chunk: expected > 0");
  if (layout.shards == 0) throw LayoutError("shards: expected > 0");
  const std::size_t total = layout.total_tokens();
  if (total % layout.shards != 0) {
    throw LayoutError(
        fmt::format("shards: T = {} is not divisible by {} shards", total, layout.shards));
  }
  const std::size_t shard_len = total / layout.shards;
  std::vector<Chunk> chunks;
  std::size_t seq_start = 0;
  for (std::size_t s = 0; s < layout.seq_lens.size(); ++s) {
    const std::size_t seq_end = seq_start + layout.seq_lens[s];
    // Segments: this sequence cut at shard boundaries.
    for (std::size_t seg = seq_start; seg < seq_end;) {
      const std::size_t shard = seg / shard_len;
      const std::size_t seg_end = std::min(seq_end, (shard + 1) * shard_len);
      for (std::size_t t = seg; t < seg_end; t += layout.chunk) {
        Chunk c;
        c.t0 = t;
        c.count = std::min(layout.chunk, seg_end - t);
        c.sequence = s;
        c.shard = shard;
        c.begins_sequence = (t == seq_start);
        c.ends_sequence = (t + c.count == seq_end);
        chunks.push_back(c);
      }
      seg = seg_end;
    }
    seq_start = seq_end;
  }
  return chunks;
}

ChunkPairs<double> reduce_chunks(const HeadInputs& inputs, std::span<const Chunk> chunks) {
  ChunkPairs<double> pairs;
  pairs.dim_k = inputs.spec().dim_k;
  pairs.dim_v = inputs.spec().dim_v;
  const std::size_t kk = pairs.dim_k * pairs.dim_k;
  const std::size_t kv = pairs.dim_k * pairs.dim_v;
  pairs.transitions.resize(chunks.size() * kk);
  pairs.contributions.resize(chunks.size() * kv);
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const AffinePair64 pair = reduce_tokens(inputs.tokens(chunks[c].t0, chunks[c].count));
    std::copy(pair.transition.begin(), pair.transition.end(), pairs.transitions.begin() + c * kk);
    std::copy(pair.contribution.begin(), pair.contribution.end(),
              pairs.contributions.begin() + c * kv);
  }
  return pairs;
}

}  // namespace densefeed::affine_chain
