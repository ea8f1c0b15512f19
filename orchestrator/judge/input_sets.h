// The input sets of a benchmark driver's iterations (issue 26, "Inputs the
// kernel has not seen"; README, "Timings the candidate cannot forge").
//
// A trusted driver that builds its inputs per iteration (densefeed_driver.py
// Driver.time(inputs=...), driver.h TimingOptions::prepare) draws iteration
// k's inputs from the k-th seed of DENSEFEED_INPUT_SEEDS. densefeed gives
// each bench case a pool of input_set_count() sets, one seed each
// (input_set_seeds from a pool seed densefeed draws from std::random_device
// for the case and tells no harness: neither the run's seed, which the
// candidate sees, nor anything derived from it, so no arm can work out the
// pool's inputs ahead of the rounds), and every timed round of either arm a
// fresh random order of distinct sets of that pool (draw_round_seeds): no
// iteration of a process sees inputs an earlier one saw, so a kernel that
// caches its results across calls gains nothing, and the order is unknown
// until the round starts. Warm-up iterations, and each arm's warm-up call,
// get seeds outside the pool (fresh_seeds): a warm-up is never timed, so
// what it computes must be no timed iteration's answer (issue 29's hostile
// trial memoised the pool in the warm-up call). Each timed iteration of the
// candidate is gated against the reference's outputs of its own set
// (bench_runner.cpp runs the reference once per set used).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace densefeed {

// The variable a driver reads its seeds from: comma-separated decimal u64,
// warm-up iterations first, then the timed ones.
inline constexpr const char* kInputSeedsEnv = "DENSEFEED_INPUT_SEEDS";

// How many sets a bench case's pool holds: enough for a timed round of the
// most iterations the runner asks for (bench_runner.cpp: odd rounds run
// twice `iters`), so every timed iteration of a round has a set of its own;
// warm-ups draw outside it (fresh_seeds). iters >= 1.
std::size_t input_set_count(int iters);

// The pool's seeds: set 0 is `pool_seed`; set j > 0 is SplitMix64's j-th
// output from `pool_seed` (Steele, Lea and Flood, "Fast splittable
// pseudorandom number generators", OOPSLA 2014; the constants of its
// mix64 finaliser). Distinct for distinct j within one pool (mix64 is a
// bijection of the 64-bit state, and the states differ). The bench stage
// passes a seed of its own per case (recorded with the case's checks
// afterwards, `inputs.pool_seed`), never the run's.
std::vector<std::uint64_t> input_set_seeds(std::uint64_t pool_seed, std::size_t count);

// `n` distinct seeds of `pool` in a uniformly random order (a partial
// Fisher-Yates shuffle with `rng`). Throws std::invalid_argument when
// n > pool.size().
std::vector<std::uint64_t> draw_round_seeds(const std::vector<std::uint64_t>& pool, std::size_t n, std::mt19937_64& rng);

// `n` distinct seeds from `rng`, none of them in `pool`: a warm-up's inputs
// (what a warm-up computes is no timed iteration's answer).
std::vector<std::uint64_t> fresh_seeds(std::size_t n, const std::vector<std::uint64_t>& pool, std::mt19937_64& rng);

// "s0,s1,...", the variable's value.
std::string input_seeds_value(const std::vector<std::uint64_t>& seeds);

}  // namespace densefeed
