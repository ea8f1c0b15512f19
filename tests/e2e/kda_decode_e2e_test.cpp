// The kda-decode gate through the densefeed CLI on the CPU path (quick
// profile): the example experiment (v3 against v0) is green end to end, and a
// deliberately wrong candidate -- the harness with KDA_DECODE_FAULT=skip-decay,
// whose state never decays -- is red on the state, with the bench skipped.
// Untrusted commands get none of densefeed's environment unless the project's
// sandbox.env names it (issue 14): densefeed.yaml names KDA_DECODE_FAULT.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;

class KdaDecodeEndToEnd : public ::testing::Test {
 protected:
  // densefeed's own project, its gates as checked out (not as its main
  // branch has them), with the build's harnesses on PATH.
  testing::CliResult densefeed(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), {"--project", kRoot.string(), "--trust-worktree"});
    return testing::run_cli(kExe, args, dir_.path(), testing::with_on_path(std::filesystem::path(kExe).parent_path(), env));
  }
  std::string manifest() const { return (kRoot / "experiments" / "kda-decode-merge-vtiles.yaml").string(); }
  testing::TempDir dir_;
};

TEST_F(KdaDecodeEndToEnd, MergedTilesAreGreenAgainstTheFp64ReferenceAndBenchmarked) {
  const auto r = densefeed({"run", manifest(), "--ledger", (dir_ / "ledger.db").string(), "--json", "--jobs", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "green");
  EXPECT_EQ(j["stages"]["gate"]["verdict"], "green");
  const auto& cases = j["stages"]["gate"]["cases"];
  ASSERT_EQ(cases.size(), 3u);  // quick: batch 1, 3, 8
  for (const auto& c : cases) {
    EXPECT_EQ(c["verdict"], "green") << c.dump();
    ASSERT_EQ(c["outputs"].size(), 2u);
    for (const auto& o : c["outputs"]) {
      for (const auto& m : o["metrics"]) {
        EXPECT_LE(m["value"].get<double>(), m["bound"].get<double>()) << c.dump();
      }
    }
  }
  EXPECT_EQ(j["stages"]["bench"]["status"], "measured") << j["stages"]["bench"].dump();
}

TEST_F(KdaDecodeEndToEnd, ACandidateThatSkipsTheDecayIsRedOnTheState) {
  const auto r = densefeed({"run", manifest(), "--ledger", (dir_ / "ledger.db").string(), "--json", "--jobs", "2"},
                           {{"KDA_DECODE_FAULT", "skip-decay"}});
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "red");
  EXPECT_EQ(j["stages"]["bench"]["status"], "skipped");
  for (const auto& c : j["stages"]["gate"]["cases"]) {
    EXPECT_EQ(c["verdict"], "red") << c.dump();
    bool state_red = false;
    for (const auto& o : c["outputs"]) {
      if (o["output"] != "state") continue;
      for (const auto& m : o["metrics"]) {
        if (m["metric"] == "rel_l2" && m["value"].get<double>() > m["bound"].get<double>()) state_red = true;
      }
    }
    EXPECT_TRUE(state_red) << c.dump();
  }
}

}  // namespace
}  // namespace densefeed
