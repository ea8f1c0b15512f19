// Issue 17: densefeed's own bundled gates (kda-decode, cp-affine-chain,
// kv-overlap) declare protocol: session, and their C++ harnesses and
// references serve it (kernels/common/session_serve.h). Through the real CLI
// on densefeed's own project, CPU paths, quick profiles, --jobs 1: every case
// is green and served by one session per arm, and where a reference's outputs
// depend on fewer keys than the case (reference.case_keys), cases that agree
// on them share one reference run (ctest -R Session).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;

class SessionBundled : public ::testing::Test {
 protected:
  // The gate stage of a bundled experiment, one job slot: the JSON report.
  J gate(const std::string& experiment) {
    const auto r = testing::run_cli(kExe,
                                    {"--project", kRoot.string(), "--trust-worktree", "run",
                                     (kRoot / "experiments" / (experiment + ".yaml")).string(), "--ledger",
                                     (dir_ / (experiment + ".db")).string(), "--no-bench", "--jobs", "1", "--json"},
                                    dir_.path(), testing::with_on_path(std::filesystem::path(kExe).parent_path(), {}));
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    J doc = J::parse(r.out, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << r.out << r.err;
    return doc;
  }
  testing::TempDir dir_;
};

TEST_F(SessionBundled, EveryBundledGateServesAllItsCasesFromOneSessionPerArm) {
  for (const std::string experiment : {"kda-decode-merge-vtiles", "cp-affine-chain-tf32x3", "kv-transfer-release-lock"}) {
    const J r = gate(experiment);
    ASSERT_EQ(r["stages"]["gate"]["verdict"], "green") << experiment << ": " << r["stages"]["gate"].dump(1).substr(0, 4000);
    const auto& cases = r["stages"]["gate"]["cases"];
    ASSERT_GE(cases.size(), 3u) << experiment;
    std::set<int> candidate_requests;
    for (const auto& c : cases) {
      EXPECT_EQ(c["verdict"], "green") << experiment << ": " << c.dump();
      ASSERT_TRUE(c.contains("candidate_session") && c["candidate_session"].is_object()) << experiment << ": " << c.dump();
      ASSERT_TRUE(c.contains("reference_session") && c["reference_session"].is_object()) << experiment << ": " << c.dump();
      // One job slot, no failure: the first session of each arm served
      // every case, one request each.
      EXPECT_EQ(c["candidate_session"]["session"], 1) << experiment << ": " << c.dump();
      EXPECT_EQ(c["reference_session"]["session"], 1) << experiment << ": " << c.dump();
      EXPECT_GT(c["candidate_session"]["rss_bytes"].get<double>(), 0) << experiment;
      candidate_requests.insert(c["candidate_session"]["request"].get<int>());
    }
    EXPECT_EQ(candidate_requests.size(), cases.size()) << experiment;
    EXPECT_EQ(*candidate_requests.rbegin(), static_cast<int>(cases.size()) - 1) << experiment;
  }
}

TEST_F(SessionBundled, CasesThatDifferOnlyInKeysTheReferenceIgnoresShareOneReferenceRun) {
  // cp-affine-chain's reference depends on every key but shards
  // (reference.case_keys): the quick profile's 29 cases need 6 reference
  // runs, (regime x T 8000, 8192) and the two T = 10240 batches.
  const J r = gate("cp-affine-chain-tf32x3");
  ASSERT_EQ(r["stages"]["gate"]["verdict"], "green") << r["stages"]["gate"].dump(1).substr(0, 4000);
  const auto& cases = r["stages"]["gate"]["cases"];
  ASSERT_EQ(cases.size(), 29u);
  std::map<std::string, std::set<int>> request_of;  // what the reference depends on -> its request(s)
  std::set<int> requests;
  for (const auto& c : cases) {
    const auto& v = c["values"];
    const std::string key = v["regime"].dump() + v["T"].dump() + v["seq_lens"].dump();
    const int request = c["reference_session"]["request"].get<int>();
    request_of[key].insert(request);
    requests.insert(request);
  }
  EXPECT_EQ(request_of.size(), 6u);
  EXPECT_EQ(requests.size(), 6u) << "one reference request per (regime, T, seq_lens), shared by its shard counts";
  for (const auto& [key, rs] : request_of) EXPECT_EQ(rs.size(), 1u) << key;
  // kv-overlap's reference depends on the buffer's size only.
  const J kv = gate("kv-transfer-release-lock");
  std::set<int> kv_requests;
  std::set<std::string> sizes;
  for (const auto& c : kv["stages"]["gate"]["cases"]) {
    kv_requests.insert(c["reference_session"]["request"].get<int>());
    sizes.insert(c["values"]["chunks"].dump() + "x" + c["values"]["chunk_elems"].dump());
  }
  EXPECT_EQ(kv_requests.size(), sizes.size());
  EXPECT_LT(kv_requests.size(), kv["stages"]["gate"]["cases"].size());
}

}  // namespace
}  // namespace densefeed
