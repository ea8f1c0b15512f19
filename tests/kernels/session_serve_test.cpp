// kernels/common/session_serve.h's case_args: how a bundled harness turns a
// session request's case into its own flags (ctest -R Session).
#include <gtest/gtest.h>

#include "session_serve.h"

namespace densefeed {
namespace {

const std::vector<std::pair<std::string, std::string>> kFlags = {{"batch", "--batch"}, {"H", "--heads"}, {"D", "--dim"}};

TEST(SessionServe, CaseArgsAppendsEachCaseKeysFlagInTheOrderOfTheMap) {
  const SessionCase c = {{"D", "128"}, {"H", "64"}, {"batch", "8"}, {"label", "x"}};
  EXPECT_EQ(case_args({"--version", "v3"}, c, kFlags),
            (std::vector<std::string>{"--version", "v3", "--batch", "8", "--heads", "64", "--dim", "128"}));
}

TEST(SessionServe, CaseArgsKeepsAFlagTheCommandGivesItself) {
  // A process-protocol command that names the case keeps its own values,
  // whether it gives "--flag value" or "--flag=value".
  const SessionCase c = {{"batch", "8"}, {"H", "64"}, {"D", "128"}};
  EXPECT_EQ(case_args({"--batch", "3", "--dim=64"}, c, kFlags),
            (std::vector<std::string>{"--batch", "3", "--dim=64", "--heads", "64"}));
  // A flag that merely starts like another is not it.
  EXPECT_EQ(case_args({"--batches", "3"}, {{"batch", "8"}}, kFlags),
            (std::vector<std::string>{"--batches", "3", "--batch", "8"}));
}

TEST(SessionServe, CaseArgsAddsNothingForAKeyTheCaseLacksAndKeepsAnEmptyValue) {
  // The harness's own check of a required flag then names what is missing;
  // an empty value (seq_lens: "") stays one argument.
  EXPECT_EQ(case_args({}, {{"H", ""}}, kFlags), (std::vector<std::string>{"--heads", ""}));
  EXPECT_EQ(case_args({"--x"}, {}, kFlags), (std::vector<std::string>{"--x"}));
}

}  // namespace
}  // namespace densefeed
