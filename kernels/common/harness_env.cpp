#include "harness_env.h"

#include <charconv>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

namespace densefeed {
namespace {

std::optional<std::string> lookup_nonempty(const EnvLookup& lookup, const char* name) {
  std::optional<std::string> value = lookup(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

unsigned parse_count(const EnvLookup& lookup, const char* name, unsigned fallback,
                     unsigned minimum) {
  const std::optional<std::string> text = lookup_nonempty(lookup, name);
  if (!text) return fallback;
  const std::optional<std::uint64_t> value = parse_u64(*text);
  if (!value || *value < minimum || *value > std::numeric_limits<unsigned>::max()) {
    throw HarnessEnvError(
        fmt::format("{}='{}': expected a decimal integer >= {}", name, *text, minimum));
  }
  return static_cast<unsigned>(*value);
}

}  // namespace

std::string_view to_string(HarnessMode mode) {
  switch (mode) {
    case HarnessMode::gate: return "gate";
    case HarnessMode::bench: return "bench";
    case HarnessMode::trace: return "trace";
    case HarnessMode::acceptance: return "acceptance";
  }
  return "?";
}

std::optional<std::uint64_t> parse_u64(std::string_view text) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value, 10);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

HarnessEnv read_harness_env(const EnvLookup& lookup) {
  HarnessEnv env;
  if (const auto mode = lookup_nonempty(lookup, "DENSEFEED_MODE")) {
    bool known = false;
    for (HarnessMode m :
         {HarnessMode::gate, HarnessMode::bench, HarnessMode::trace, HarnessMode::acceptance}) {
      if (*mode == to_string(m)) {
        env.mode = m;
        known = true;
      }
    }
    if (!known) {
      throw HarnessEnvError(fmt::format(
          "DENSEFEED_MODE='{}': expected one of gate, bench, trace, acceptance", *mode));
    }
  }
  if (const auto seed = lookup_nonempty(lookup, "DENSEFEED_SEED")) {
    env.seed = parse_u64(*seed);
    if (!env.seed) {
      throw HarnessEnvError(
          fmt::format("DENSEFEED_SEED='{}': expected a decimal unsigned 64-bit integer", *seed));
    }
  }
  if (const auto out = lookup_nonempty(lookup, "DENSEFEED_OUT")) env.out = *out;
  env.warmup = parse_count(lookup, "DENSEFEED_WARMUP", env.warmup, 0);
  env.iters = parse_count(lookup, "DENSEFEED_ITERS", env.iters, 1);
  return env;
}

HarnessEnv read_harness_env() {
  return read_harness_env([](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace densefeed
