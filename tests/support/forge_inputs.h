// Inputs of the C++ timing-forge gate (tests/e2e/timing_forge_cxx_test.cpp):
// x[i] in [-1, 1) from the seed through splitmix64 (Steele, Lea, Flood,
// "Fast splittable pseudorandom number generators", OOPSLA 2014), the same
// in its reference, its driver and a kernel that forges its own outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace densefeed::testing {

inline std::vector<double> forge_inputs(std::uint64_t seed, std::size_t n) {
  std::vector<double> x(n);
  std::uint64_t s = seed;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x[i] = static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
  }
  return x;
}

}  // namespace densefeed::testing
