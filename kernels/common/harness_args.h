// Arguments that kernel harnesses share, parsed the same way in every harness
// (and in a gate's reference and candidate alike): sizes, the lengths of a
// variable-length batch, the seed and output directory with their DENSEFEED_*
// fallbacks (DESIGN.md, "Harness protocol"), and argv as CLI11 takes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "harness_env.h"

namespace densefeed {

// A bad argument; the message starts with the flag's name.
class HarnessArgError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A decimal integer in [1, 2^32). Throws HarnessArgError naming `flag` otherwise.
std::size_t parse_positive_arg(std::string_view flag, std::string_view text);

// --seq-lens: "3000,4000,3240" -> {3000, 4000, 3240}, each in [1, 2^32), summing
// to `total` (--T); empty -> {total}, one sequence.
// Throws HarnessArgError naming --seq-lens otherwise.
std::vector<std::size_t> parse_seq_lens_arg(std::string_view text, std::size_t total);

// --seed if given (a decimal u64), else DENSEFEED_SEED. Throws HarnessArgError
// naming --seed if it is malformed or neither is set.
std::uint64_t seed_arg(std::string_view text, const HarnessEnv& env);

// --out if given, else DENSEFEED_OUT. Throws HarnessArgError naming --out if
// neither is set.
std::filesystem::path out_arg(std::string_view text, const HarnessEnv& env);

// argv[1..argc) in the reverse order CLI11's App::parse(std::vector&) takes.
// A gate templating "--seq-lens={case.seq_lens}" with an empty value gives
// "--seq-lens=", which CLI11 reads as a missing value; it means one sequence,
// so it becomes "--seq-lens" "" here.
std::vector<std::string> cli11_args(int argc, const char* const* argv);
// Same for `args` (argv[1..] in order, e.g. session_serve.h's case_args).
std::vector<std::string> cli11_args(const std::vector<std::string>& args);

}  // namespace densefeed
