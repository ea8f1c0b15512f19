#include "kv_values.h"

#include <fmt/format.h>

namespace densefeed::kv_overlap {
namespace {

// splitmix64's output function (Steele, Lea and Flood 2014; the constants are
// theirs, as in java.util.SplittableRandom).
std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

float kv_value(std::uint64_t seed, std::size_t chunk, std::size_t index) {
  const std::uint64_t position = (static_cast<std::uint64_t>(chunk) << 32) | static_cast<std::uint32_t>(index);
  const std::uint64_t bits = mix64(seed ^ mix64(position)) >> 40;  // 24 bits
  // k * 2^-23 - 1 for k < 2^24: exact in double and in float.
  return static_cast<float>(static_cast<double>(bits) * 0x1p-23 - 1.0);
}

void fill_kv(std::uint64_t seed, std::size_t chunks, std::size_t chunk_elems, std::span<float> out) {
  if (out.size() != chunks * chunk_elems) {
    throw std::invalid_argument(
        fmt::format("fill_kv: buffer of {} elements for {} chunks of {}", out.size(), chunks, chunk_elems));
  }
  for (std::size_t c = 0; c < chunks; ++c) {
    for (std::size_t i = 0; i < chunk_elems; ++i) out[c * chunk_elems + i] = kv_value(seed, c, i);
  }
}

}  // namespace densefeed::kv_overlap
