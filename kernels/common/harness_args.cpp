#include "harness_args.h"

#include <limits>
#include <optional>

#include <fmt/format.h>

namespace densefeed {

namespace {

std::optional<std::size_t> parse_u32_positive(std::string_view text) {
  const std::optional<std::uint64_t> v = parse_u64(text);
  if (!v || *v == 0 || *v > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
  return static_cast<std::size_t>(*v);
}

}  // namespace

std::size_t parse_positive_arg(std::string_view flag, std::string_view text) {
  const std::optional<std::size_t> v = parse_u32_positive(text);
  if (!v) {
    throw HarnessArgError(fmt::format("{}: expected a positive integer, got '{}'", flag, text));
  }
  return *v;
}

std::vector<std::size_t> parse_seq_lens_arg(std::string_view text, std::size_t total) {
  if (text.empty()) return {total};
  std::vector<std::size_t> lens;
  std::size_t sum = 0;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = text.find(',', begin);
    const std::string_view item = text.substr(
        begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
    const std::optional<std::size_t> v = parse_u32_positive(item);
    if (!v) {
      throw HarnessArgError(fmt::format(
          "--seq-lens: expected comma-separated positive integers, got '{}' in '{}'", item, text));
    }
    lens.push_back(*v);
    sum += *v;
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  if (sum != total) {
    throw HarnessArgError(
        fmt::format("--seq-lens: lengths sum to {}, expected --T = {}", sum, total));
  }
  return lens;
}

std::uint64_t seed_arg(std::string_view text, const HarnessEnv& env) {
  if (!text.empty()) {
    const std::optional<std::uint64_t> seed = parse_u64(text);
    if (!seed) {
      throw HarnessArgError(
          fmt::format("--seed: expected a decimal unsigned 64-bit integer, got '{}'", text));
    }
    return *seed;
  }
  if (env.seed) return *env.seed;
  throw HarnessArgError("--seed: expected a seed (or DENSEFEED_SEED in the environment)");
}

std::filesystem::path out_arg(std::string_view text, const HarnessEnv& env) {
  if (!text.empty()) return std::filesystem::path(text);
  if (env.out) return *env.out;
  throw HarnessArgError(
      "--out: expected an output directory (or DENSEFEED_OUT in the environment)");
}

std::vector<std::string> cli11_args(const std::vector<std::string>& args) {
  std::vector<std::string> reversed;
  for (auto it = args.rbegin(); it != args.rend(); ++it) {
    if (*it == "--seq-lens=") {
      reversed.emplace_back("");
      reversed.emplace_back("--seq-lens");
    } else {
      reversed.push_back(*it);
    }
  }
  return reversed;
}

std::vector<std::string> cli11_args(int argc, const char* const* argv) {
  return cli11_args(std::vector<std::string>(argv + (argc > 0 ? 1 : 0), argv + (argc > 0 ? argc : 0)));
}

}  // namespace densefeed
