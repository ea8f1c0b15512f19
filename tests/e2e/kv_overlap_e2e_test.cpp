// The KV-transfer example experiment through the CLI: its gate (kv-overlap)
// is locked, runs green for both variants, and a manifest cannot pick a
// dispatcher the gate does not declare. The benchmark is left out (--no-bench):
// its figures come from tests/perf/kv_overlap_figures.sh, not from a test.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;

class KvOverlapEndToEnd : public ::testing::Test {
 protected:
  testing::CliResult densefeed(std::vector<std::string> args) { return testing::run_cli(kExe, args, dir_.path()); }
  std::filesystem::path ledger() const { return dir_ / "ledger.db"; }
  testing::TempDir dir_;
};

TEST_F(KvOverlapEndToEnd, GateIsLocked) {
  const auto r = densefeed({"gate", "verify"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("kv-overlap: ok"), std::string::npos) << r.out;
}

TEST_F(KvOverlapEndToEnd, ReleaseAgainstHoldIsGreenOnEveryCaseWithExactBytes) {
  const auto run = densefeed({"run", (kRoot / "experiments" / "kv-transfer-release-lock.yaml").string(), "--ledger",
                              ledger().string(), "--json", "--no-bench"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const auto r = nlohmann::json::parse(run.out);
  EXPECT_EQ(r["verdict"], "green");
  EXPECT_EQ(r["stages"]["gate"]["verdict"], "green");
  const auto& cases = r["stages"]["gate"]["cases"];
  ASSERT_EQ(cases.size(), 11u);
  for (const auto& c : cases) {
    EXPECT_EQ(c["verdict"], "green") << c.dump();
    const auto& m = c["outputs"][0];
    EXPECT_EQ(m["output"], "kv") << c.dump();
    // One slice per chunk (partition axis 0), each exact.
    EXPECT_EQ(m["slices"].size(), c["values"]["chunks"].get<std::size_t>()) << c.dump();
    EXPECT_EQ(m["metrics"][0]["metric"], "max_abs") << c.dump();
    EXPECT_EQ(m["metrics"][0]["value"].get<double>(), 0.0) << c.dump();
  }
}

TEST_F(KvOverlapEndToEnd, AManifestCannotPickAVariantTheGateDoesNotDeclare) {
  const std::filesystem::path manifest = dir_ / "spin.yaml";
  testing::write_file(manifest,
                      "experiment: kv-spin\n"
                      "hypothesis: spinning harder helps\n"
                      "predicted_effect: none\n"
                      "gate: kv-overlap\n"
                      "candidate: {revision: WORKTREE, params: {variant: spin}}\n"
                      "base: {revision: WORKTREE, params: {variant: hold}}\n");
  const auto r = densefeed({"run", manifest.string(), "--ledger", ledger().string(), "--no-bench"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("variant"), std::string::npos) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("spin"), std::string::npos) << r.out << r.err;
  EXPECT_FALSE(std::filesystem::exists(ledger()));
}

}  // namespace
}  // namespace densefeed
