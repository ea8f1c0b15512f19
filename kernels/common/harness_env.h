// The environment a harness receives from densefeed (DESIGN.md, "Harness
// protocol"): DENSEFEED_MODE, DENSEFEED_SEED, DENSEFEED_OUT, and for bench
// DENSEFEED_WARMUP / DENSEFEED_ITERS. DENSEFEED_CASE is informational only: a
// harness takes its case from its arguments.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace densefeed {

enum class HarnessMode { gate, bench, trace, acceptance };

// "gate", "bench", "trace", "acceptance".
std::string_view to_string(HarnessMode mode);

// Thrown for a variable whose value is malformed; the message names the variable,
// the value and what was expected.
class HarnessEnvError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HarnessEnv {
  HarnessMode mode = HarnessMode::gate;      // DENSEFEED_MODE, default gate
  std::optional<std::uint64_t> seed;         // DENSEFEED_SEED, unset if absent
  std::optional<std::filesystem::path> out;  // DENSEFEED_OUT, unset if absent
  unsigned warmup = 1;                       // DENSEFEED_WARMUP, iterations discarded, >= 0
  unsigned iters = 5;                        // DENSEFEED_ITERS, iterations timed, >= 1
};

// Looks a variable up; nullopt when it is not set. Lets tests supply an
// environment without touching the process's own.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// Reads the protocol variables through `lookup`. A variable set to the empty
// string counts as unset (as `VAR= cmd` in a shell means).
// Throws HarnessEnvError naming the variable on a malformed value: unknown mode,
// seed not a decimal u64, warmup not a decimal in [0, 2^32), iters not in [1, 2^32).
HarnessEnv read_harness_env(const EnvLookup& lookup);

// Same, from the process environment (std::getenv).
HarnessEnv read_harness_env();

// Strict decimal u64: digits only (no sign, no spaces, no hex), no overflow.
// nullopt when `text` is not such a number.
std::optional<std::uint64_t> parse_u64(std::string_view text);

}  // namespace densefeed
