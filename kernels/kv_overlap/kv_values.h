// The KV cache the transfer moves, [chunks, chunk_elems] float32, drawn from
// the seed the same way in the harness (kv_overlap) and in the kv-overlap
// gate's reference (kv_overlap_reference). Frozen by gates/kv-overlap.yaml.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

namespace densefeed::kv_overlap {

// Element `index` of chunk `chunk` for `seed`: a float32 in [-1, 1) that is a
// multiple of 2^-23, so exactly representable (no rounding anywhere), with 24
// bits from splitmix64 of (seed, chunk, index) (Steele, Lea and Flood, "Fast
// splittable pseudorandom number generators", OOPSLA 2014). Neighbouring
// elements and chunks differ, so a lost, duplicated or misplaced chunk changes
// the bytes. chunk and index must each be below 2^32.
float kv_value(std::uint64_t seed, std::size_t chunk, std::size_t index);

// Fills `out` (row-major [chunks][chunk_elems]) with kv_value.
// Throws std::invalid_argument if out.size() != chunks * chunk_elems.
void fill_kv(std::uint64_t seed, std::size_t chunks, std::size_t chunk_elems, std::span<float> out);

}  // namespace densefeed::kv_overlap
