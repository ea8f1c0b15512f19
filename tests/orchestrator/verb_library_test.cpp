// What the ledger and review verbs call, without the CLI: list filters,
// comparison of two experiments, promotion's checks, against a real SQLite
// ledger in a temp folder.
#include <gtest/gtest.h>

#include <algorithm>

#include "error.h"
#include "experiment_comparison.h"
#include "gate_store.h"
#include "ledger.h"
#include "list_filter_check.h"
#include "manifest.h"
#include "project.h"
#include "promotion.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;

TEST(ListFilterCheck, ASinceIsARealUtcDateOrTimeAndAVerdictAKnownOne) {
  EXPECT_NO_THROW(check_list_filter({"", "", ""}));
  EXPECT_NO_THROW(check_list_filter({"", "green", "2024-02-29"}));
  EXPECT_NO_THROW(check_list_filter({"", "cancel_requested", "2026-11-29T20:00:59Z"}));
  EXPECT_THROW(check_list_filter({"", "", "2025-02-29"}), InputError);  // not a leap year
  EXPECT_THROW(check_list_filter({"", "", "2026-11-29T24:00"}), InputError);
  EXPECT_THROW(check_list_filter({"", "", "2026-11-29 20:00"}), InputError);
  EXPECT_THROW(check_list_filter({"", "gren", ""}), InputError);
}

class RecordedExperiments : public ::testing::Test {
 protected:
  void SetUp() override {
    const Project project = load_project(kRoot);
    manifest_ = load_manifest(kRoot / "experiments" / "cp-affine-chain-tf32.yaml", worktree_store(project), project);
  }
  std::filesystem::path db_path() const { return dir_ / "ledger.db"; }
  std::int64_t record(const std::string& precision) {
    Ledger ledger(db_path());
    return ledger.record_experiment({&manifest_, {{"precision", precision}}, {{"precision", "ieee"}}});
  }
  testing::TempDir dir_;
  Manifest manifest_;
};

TEST_F(RecordedExperiments, AComparisonHoldsOnlyWhatDiffers) {
  const auto a = record("tf32"), b = record("tf32x3");
  const Ledger ledger(db_path(), Ledger::Mode::read_only);
  const ExperimentComparison c = compare_experiments(ledger, a, b);
  EXPECT_EQ(c.a, a);
  EXPECT_EQ(c.b, b);
  ASSERT_EQ(c.differences.size(), 1u) << c.differences.dump(2);
  EXPECT_EQ(c.differences[0]["field"], "experiment.candidate_params.precision");
  EXPECT_EQ(c.differences[0]["a"], "tf32");
  EXPECT_EQ(c.differences[0]["b"], "tf32x3");
  EXPECT_FALSE(c.differences[0].contains("delta"));
  EXPECT_TRUE(compare_experiments(ledger, a, a).differences.empty());
  EXPECT_THROW(compare_experiments(ledger, a, 999), InputError);
}

TEST_F(RecordedExperiments, AnExperimentWithARedGateIsNotPromotableAndSaysWhy) {
  const auto id = record("tf32");
  GateResult red;
  red.verdict = Verdict::red;
  red.reason = "1 of 1 case(s) not green";
  {
    Ledger ledger(db_path());
    ledger.record_gate_run(id, {"cp-affine-chain", std::string(64, 'f'), {}, "quick", 42, utc_now(), &red});
  }
  const Ledger ledger(db_path(), Ledger::Mode::read_only);
  const PromotionCheck check = check_promotion(ledger, id, {}, "main");
  EXPECT_EQ(check.record.id(), id);
  const auto& b = check.blockers;
  EXPECT_NE(std::find(b.begin(), b.end(), "its gate is red: 1 of 1 case(s) not green"), b.end()) << ::testing::PrintToString(b);
  EXPECT_THROW(check_promotion(ledger, 999, {}, "main"), InputError);
}

// A branch that names itself the trusted ref in its own densefeed.yaml gets a
// green gate run from its own gates; a promote that reads main's gates refuses it.
TEST_F(RecordedExperiments, AGreenGateRunFromAnotherRefIsNotPromotableAndSaysWhichRef) {
  const auto from_branch = record("tf32"), from_worktree = record("tf32"), from_main = record("tf32");
  GateResult green;
  green.verdict = Verdict::green;
  {
    Ledger ledger(db_path());
    const auto run = [&](std::int64_t id, const std::string& provenance) {
      GateRunRecord r{"cp-affine-chain", std::string(64, 'f'), {}, "quick", 42, utc_now(), &green};
      r.provenance_json = provenance;
      ledger.record_gate_run(id, r);
    };
    run(from_branch, R"({"trusted_ref": "evil", "trust_worktree": false})");
    run(from_worktree, R"({"trusted_ref": "main", "trust_worktree": true})");
    run(from_main, R"({"trusted_ref": "main", "trust_worktree": false})");
  }
  const Ledger ledger(db_path(), Ledger::Mode::read_only);
  const std::string blocker = "its gate ran with the gates of the ref 'evil', not of the trusted ref 'main' that this promote reads; "
                              "run the experiment again with main's gates";
  const auto b = check_promotion(ledger, from_branch, {}, "main").blockers;
  EXPECT_NE(std::find(b.begin(), b.end(), blocker), b.end()) << ::testing::PrintToString(b);
  for (const auto id : {from_worktree, from_main}) {
    for (const auto& why : check_promotion(ledger, id, {}, "main").blockers) {
      EXPECT_EQ(why.find("gates of the ref"), std::string::npos) << why;
    }
  }
}

}  // namespace
}  // namespace densefeed
