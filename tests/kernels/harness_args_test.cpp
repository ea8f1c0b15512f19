#include "harness_args.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace densefeed {
namespace {

// The message of the HarnessArgError that `f` raises, or "" if none.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const HarnessArgError& e) {
    return e.what();
  }
  return "";
}

TEST(HarnessArgs, PositiveIntegersBelowTwoToTheThirtyTwo) {
  EXPECT_EQ(parse_positive_arg("--T", "1"), 1u);
  EXPECT_EQ(parse_positive_arg("--T", "4294967295"), 4294967295u);
  for (const char* bad : {"0", "-5", "4294967296", "", " 7", "1e3", "0x10"}) {
    EXPECT_EQ(error_of([&] { parse_positive_arg("--heads", bad); }),
              std::string("--heads: expected a positive integer, got '") + bad + "'");
  }
}

TEST(HarnessArgs, SeqLensSumToTAndEmptyIsOneSequence) {
  EXPECT_EQ(parse_seq_lens_arg("3000,4000,3240", 10240),
            (std::vector<std::size_t>{3000, 4000, 3240}));
  EXPECT_EQ(parse_seq_lens_arg("", 8000), (std::vector<std::size_t>{8000}));
  EXPECT_EQ(error_of([] { parse_seq_lens_arg("300,700", 1024); }),
            "--seq-lens: lengths sum to 1000, expected --T = 1024");
  EXPECT_EQ(error_of([] { parse_seq_lens_arg("300,,724", 1024); }),
            "--seq-lens: expected comma-separated positive integers, got '' in '300,,724'");
  EXPECT_EQ(error_of([] { parse_seq_lens_arg("1024,0", 1024); }),
            "--seq-lens: expected comma-separated positive integers, got '0' in '1024,0'");
}

TEST(HarnessArgs, SeedAndOutFallBackToTheEnvironment) {
  HarnessEnv env;
  EXPECT_EQ(seed_arg("18446744073709551615", env), 18446744073709551615u);
  EXPECT_EQ(error_of([&] { seed_arg("", env); }),
            "--seed: expected a seed (or DENSEFEED_SEED in the environment)");
  EXPECT_EQ(error_of([&] { seed_arg("-1", env); }),
            "--seed: expected a decimal unsigned 64-bit integer, got '-1'");
  EXPECT_EQ(error_of([&] { out_arg("", env); }),
            "--out: expected an output directory (or DENSEFEED_OUT in the environment)");
  env.seed = 9;
  env.out = "/tmp/from-env";
  EXPECT_EQ(seed_arg("", env), 9u);
  EXPECT_EQ(seed_arg("10", env), 10u);  // the flag wins
  EXPECT_EQ(out_arg("", env), std::filesystem::path("/tmp/from-env"));
  EXPECT_EQ(out_arg("d", env), std::filesystem::path("d"));
}

TEST(HarnessArgs, Cli11ArgsAreReversedAndEmptySeqLensKeepsItsValue) {
  const char* argv[] = {"harness", "--T", "64", "--seq-lens=", "--heads", "2"};
  EXPECT_EQ(cli11_args(6, argv),
            (std::vector<std::string>{"2", "--heads", "", "--seq-lens", "64", "--T"}));
}

}  // namespace
}  // namespace densefeed
