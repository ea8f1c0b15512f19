#include "input_sets.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace densefeed {

std::size_t input_set_count(int iters) {
  return 2 * static_cast<std::size_t>(std::max(1, iters));
}

std::vector<std::uint64_t> input_set_seeds(std::uint64_t pool_seed, std::size_t count) {
  std::vector<std::uint64_t> seeds;
  seeds.reserve(count);
  std::uint64_t state = pool_seed;
  for (std::size_t j = 0; j < count; ++j) {
    if (j == 0) {
      seeds.push_back(pool_seed);
      continue;
    }
    state += 0x9E3779B97F4A7C15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    // Set 0 is the pool seed itself; a later set equal to it would be a
    // repeat (probability 2^-64 per set): step on.
    if (z == pool_seed) {
      --j;
      continue;
    }
    seeds.push_back(z);
  }
  return seeds;
}

std::vector<std::uint64_t> draw_round_seeds(const std::vector<std::uint64_t>& pool, std::size_t n, std::mt19937_64& rng) {
  if (n > pool.size()) {
    throw std::invalid_argument(fmt::format("{} input sets asked of a pool of {}", n, pool.size()));
  }
  std::vector<std::uint64_t> order = pool;
  for (std::size_t i = 0; i < n; ++i) {
    std::uniform_int_distribution<std::size_t> pick(i, order.size() - 1);
    std::swap(order[i], order[pick(rng)]);
  }
  order.resize(n);
  return order;
}

std::vector<std::uint64_t> fresh_seeds(std::size_t n, const std::vector<std::uint64_t>& pool, std::mt19937_64& rng) {
  std::set<std::uint64_t> taken(pool.begin(), pool.end());
  std::vector<std::uint64_t> out;
  while (out.size() < n) {
    const std::uint64_t s = rng();
    if (taken.insert(s).second) out.push_back(s);
  }
  return out;
}

std::string input_seeds_value(const std::vector<std::uint64_t>& seeds) {
  return fmt::format("{}", fmt::join(seeds, ","));
}

}  // namespace densefeed
