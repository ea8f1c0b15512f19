// The ranks of a multi-rank command as a group (rank_group.h) and their
// per-rank outputs put back together (rank_outputs.h), in process, with real
// processes and files. The sandboxed path is tests/e2e/multirank_e2e_test.cpp.
#include <gtest/gtest.h>

#include <fstream>

#include "npy_writer.h"
#include "rank_group.h"
#include "rank_outputs.h"
#include "tensor_file.h"
#include "test_support.h"

namespace densefeed {
namespace {

RankGroupSpec shell_group(const testing::TempDir& dir, const std::vector<std::string>& scripts) {
  RankGroupSpec spec;
  spec.timeout = std::chrono::seconds(60);
  for (std::size_t k = 0; k < scripts.size(); ++k) {
    RankCommand c;
    c.argv = {"/bin/sh", "-c", scripts[k]};
    c.cwd = dir.path();
    c.stdout_path = dir / ("rank-" + std::to_string(k) + ".out");
    c.stderr_path = dir / ("rank-" + std::to_string(k) + ".err");
    spec.ranks.push_back(c);
  }
  return spec;
}

TEST(MultiRank, EveryRankGetsItsRankTheSharedMasterAndMulticastOff) {
  testing::TempDir dir;
  const std::string check =
      "test \"$DENSEFEED_WORLD_SIZE\" = 2 && test \"$WORLD_SIZE\" = 2 && test \"$RANK\" = \"$DENSEFEED_RANK\" && "
      "test \"$MASTER_ADDR\" = 127.0.0.1 && test -n \"$MASTER_PORT\" && test \"$NCCL_NVLS_ENABLE\" = 0 && "
      "test \"$TORCH_SYMM_MEM_DISABLE_MULTICAST\" = 1 && test \"$NVSHMEM_DISABLE_NVLS\" = 1 && "
      "echo \"$DENSEFEED_RANK $MASTER_PORT\"";
  const auto outcomes = run_rank_group(shell_group(dir, {check, check}));
  ASSERT_EQ(outcomes.size(), 2u);
  for (const auto& o : outcomes) EXPECT_TRUE(o.process.ok()) << o.rank << ": " << o.process.describe();
  const std::string a = testing::read_file(dir / "rank-0.out"), b = testing::read_file(dir / "rank-1.out");
  ASSERT_GT(a.size(), 2u);
  EXPECT_EQ(a[0], '0');
  EXPECT_EQ(b[0], '1');
  EXPECT_EQ(a.substr(1), b.substr(1)) << "one MASTER_PORT for the group";
  EXPECT_FALSE(failed_rank(outcomes));
}

TEST(MultiRank, TheFirstRankToFailEndsTheOthersAndIsNamed) {
  testing::TempDir dir;
  // Rank 1 fails only once rank 3 has exited 0 and been reaped (its pid gone).
  const std::string r3 = (dir / "r3").string();
  const auto outcomes = run_rank_group(shell_group(
      dir, {"sleep 60", "while [ ! -s " + r3 + " ]; do sleep 0.01; done; while kill -0 $(cat " + r3 + ") 2>/dev/null; do sleep 0.01; done; exit 3",
            "sleep 60", "echo $$ > " + r3 + ".tmp && mv " + r3 + ".tmp " + r3 + "; exit 0"}));
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_TRUE(outcomes[1].first);
  EXPECT_EQ(outcomes[1].process.exit_code, 3);
  EXPECT_TRUE(outcomes[0].process.cancelled);
  EXPECT_TRUE(outcomes[2].process.cancelled);
  EXPECT_TRUE(outcomes[3].process.ok());
  ASSERT_TRUE(failed_rank(outcomes));
  EXPECT_EQ(failed_rank(outcomes)->rank, 1);
  EXPECT_EQ(describe_ranks(outcomes), "rank 1 of 4 exited with code 3; ranks 0, 2 were ended with it; rank 3 had exited 0");
  // A second group in the same process starts afresh.
  const auto again = run_rank_group(shell_group(dir, {"exit 0", "exit 0"}));
  for (const auto& o : again) EXPECT_TRUE(o.process.ok()) << o.process.describe();
}

TEST(MultiRank, TheGroupsOwnReportIsTheLastLineAndAnEarlierForgedOneIsIgnored) {
  testing::TempDir dir;
  std::vector<RankOutcome> real(2);
  real[0].rank = 0, real[0].process.started = true, real[0].process.exit_code = 0;
  real[1].rank = 1, real[1].first = true, real[1].process.started = true, real[1].process.signal = 11;
  std::vector<RankOutcome> forged = real;
  forged[1].first = false, forged[1].process.signal = 0, forged[1].process.exit_code = 0;
  const auto line = [](const std::vector<RankOutcome>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& o : v) a.push_back(rank_outcome_to_json(o));
    return nlohmann::json{{"ranks", a}}.dump();
  };
  testing::write_file(dir / "stdout.log", line(forged) + "\nnoise {\n" + line(real) + "\n");
  const auto read = read_rank_outcomes(dir / "stdout.log");
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[1].process.signal, 11);
  EXPECT_TRUE(read[1].first);
  EXPECT_TRUE(read_rank_outcomes(dir / "missing.log").empty());
}

TEST(MultiRank, PerRankShardsAreConcatenatedAlongTheAxisInRankOrder) {
  testing::TempDir dir;
  // rank 0: [[1, 2, 3], [4, 5, 6]]; rank 1: [[7], [8]]; along axis 1.
  const std::vector<double> r0 = {1, 2, 3, 4, 5, 6}, r1 = {7, 8};
  const std::vector<std::size_t> s0 = {2, 3}, s1 = {2, 1};
  write_npy(dir / "r0.npy", r0, s0);
  write_npy(dir / "r1.npy", r1, s1);
  concatenate_npy({dir / "r0.npy", dir / "r1.npy"}, 1, "float64", dir / "y.npy");
  const TensorFile t = TensorFile::open_npy(dir / "y.npy", "float64");
  EXPECT_EQ(t.shape(), (std::vector<std::size_t>{2, 4}));
  std::vector<double> v(t.size());
  t.read_doubles(0, v.size(), v.data());
  EXPECT_EQ(v, (std::vector<double>{1, 2, 3, 7, 4, 5, 6, 8}));
  // Along axis 0 the shards follow each other only when the other axes agree.
  try {
    concatenate_npy({dir / "r0.npy", dir / "r1.npy"}, 0, "float64", dir / "z.npy");
    FAIL() << "shapes [2, 3] and [2, 1] cannot be stacked along axis 0";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("r1.npy: shape (2, 1) does not match rank 0's (2, 3) outside axis 0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace densefeed
