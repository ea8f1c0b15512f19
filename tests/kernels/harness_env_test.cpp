#include "harness_env.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace densefeed {
namespace {

EnvLookup env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// The message of the HarnessEnvError that `vars` raises, or "" if none.
std::string error_of(std::map<std::string, std::string> vars) {
  try {
    read_harness_env(env(std::move(vars)));
  } catch (const HarnessEnvError& e) {
    return e.what();
  }
  return "";
}

TEST(HarnessEnv, DefaultsWhenNothingIsSet) {
  const HarnessEnv e = read_harness_env(env({}));
  EXPECT_EQ(e.mode, HarnessMode::gate);
  EXPECT_FALSE(e.seed.has_value());
  EXPECT_FALSE(e.out.has_value());
  EXPECT_EQ(e.warmup, 1u);
  EXPECT_EQ(e.iters, 5u);
}

TEST(HarnessEnv, ReadsEveryVariable) {
  const HarnessEnv e = read_harness_env(env({{"DENSEFEED_MODE", "bench"},
                                             {"DENSEFEED_SEED", "18446744073709551615"},
                                             {"DENSEFEED_OUT", "/tmp/x y"},
                                             {"DENSEFEED_WARMUP", "0"},
                                             {"DENSEFEED_ITERS", "20"},
                                             {"DENSEFEED_CASE", "{\"T\": 8192}"}}));
  EXPECT_EQ(e.mode, HarnessMode::bench);
  EXPECT_EQ(e.seed, 18446744073709551615ull);
  EXPECT_EQ(e.out, std::filesystem::path("/tmp/x y"));
  EXPECT_EQ(e.warmup, 0u);
  EXPECT_EQ(e.iters, 20u);
  for (const char* mode : {"gate", "bench", "trace", "acceptance"}) {
    EXPECT_EQ(to_string(read_harness_env(env({{"DENSEFEED_MODE", mode}})).mode), mode);
  }
}

TEST(HarnessEnv, EmptyMeansUnset) {
  const HarnessEnv e = read_harness_env(
      env({{"DENSEFEED_MODE", ""}, {"DENSEFEED_SEED", ""}, {"DENSEFEED_ITERS", ""}}));
  EXPECT_EQ(e.mode, HarnessMode::gate);
  EXPECT_FALSE(e.seed.has_value());
  EXPECT_EQ(e.iters, 5u);
}

TEST(HarnessEnv, BadValuesNameTheVariable) {
  EXPECT_EQ(error_of({{"DENSEFEED_MODE", "Gate"}}),
            "DENSEFEED_MODE='Gate': expected one of gate, bench, trace, acceptance");
  for (const char* seed : {"-1", " 1", "1 ", "0x10", "1e3", "18446744073709551616", "abc"}) {
    EXPECT_EQ(
        error_of({{"DENSEFEED_SEED", seed}}),
        std::string("DENSEFEED_SEED='") + seed + "': expected a decimal unsigned 64-bit integer");
  }
  EXPECT_EQ(error_of({{"DENSEFEED_ITERS", "0"}}),
            "DENSEFEED_ITERS='0': expected a decimal integer >= 1");
  EXPECT_EQ(error_of({{"DENSEFEED_WARMUP", "-1"}}),
            "DENSEFEED_WARMUP='-1': expected a decimal integer >= 0");
  EXPECT_EQ(error_of({{"DENSEFEED_ITERS", "4294967296"}}),
            "DENSEFEED_ITERS='4294967296': expected a decimal integer >= 1");
}

TEST(HarnessEnv, ParseU64IsStrict) {
  EXPECT_EQ(parse_u64("0"), 0u);
  EXPECT_EQ(parse_u64("007"), 7u);
  EXPECT_EQ(parse_u64("18446744073709551615"), 18446744073709551615ull);
  EXPECT_EQ(parse_u64("18446744073709551616"), std::nullopt);
  EXPECT_EQ(parse_u64(""), std::nullopt);
  EXPECT_EQ(parse_u64("+1"), std::nullopt);
  EXPECT_EQ(parse_u64("12a"), std::nullopt);
}

}  // namespace
}  // namespace densefeed
