// Issue 32: a gate's and project's `resources:` (resources_spec.h), the
// sbatch options they become (slurm_options.h), and sacct's lines
// (scheduler_accounting.h), on real gate files and sacct's own output shape.
#include <gtest/gtest.h>

#include "error.h"
#include "gate_spec.h"
#include "gate_store.h"
#include "project.h"
#include "scheduler_accounting.h"
#include "slurm_options.h"
#include "test_support.h"

namespace densefeed {
namespace {

const char* kGate = R"(gate: g
reference: {command: [ref, "{case.n}", "{out}"]}
candidate: {command: [cand, "{case.n}", "{out}"]}
outputs:
  y: {dtype: float32, tolerance: {rel_l2: 1.0e-5}}
cases:
  grid:
    - {n: [1, 2]}
profiles: {quick: {}, full: {}}
gpus: 1
freezes: [frozen.txt]
)";

class GateResources : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_project(dir_.path());
    testing::write_file(dir_ / "frozen.txt", "frozen\n");
  }
  GateSpec gate(const std::string& resources) {
    testing::write_file(dir_ / "gates" / "g.yaml", std::string(kGate) + resources);
    return load_gate(worktree_store(load_project(dir_.path())), "g");
  }
  std::string error_of(const std::string& resources) {
    try {
      gate(resources);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  testing::TempDir dir_;
};

TEST_F(GateResources, StageEntriesOverTheGatesFieldsOverTheProjects) {
  const GateSpec g = gate("resources:\n  cpus: 4\n  mem: 16G\n  gpu_type: h200\n  bench: {cpus: 8, exclusive: false}\n  gate: {array_throttle: 3}\n");
  StageResources project;
  project.all.partition = "gpu";
  project.all.cpus = 2;
  project.stages["bench"].time_min = 90;
  const StageResources s = layered(project, g.resources);
  const ResourceRequest bench = s.for_stage("bench"), gate_stage = s.for_stage("gate");
  EXPECT_EQ(bench.cpus, 8);
  EXPECT_EQ(gate_stage.cpus, 4);
  EXPECT_EQ(bench.mem, "16G");
  EXPECT_EQ(bench.partition, "gpu");
  EXPECT_EQ(bench.time_min, 90L);
  EXPECT_FALSE(gate_stage.time_min.has_value());
  EXPECT_EQ(bench.exclusive, false);
  EXPECT_EQ(gate_stage.array_throttle, 3);
  EXPECT_FALSE(bench.array_throttle.has_value());
}

TEST_F(GateResources, BadResourcesAreRefusedNamingFileLineAndField) {
  auto e = error_of("resources:\n  mem: lots\n");
  EXPECT_NE(e.find("g.yaml:13:"), std::string::npos) << e;
  EXPECT_NE(e.find("resources.mem"), std::string::npos) << e;
  e = error_of("resources:\n  cpus: 0\n");
  EXPECT_NE(e.find("resources.cpus"), std::string::npos) << e;
  e = error_of("resources:\n  bench: {exclusiv: false}\n");
  EXPECT_NE(e.find("exclusiv"), std::string::npos) << e;
  // A constraint or partition that would smuggle another option is refused.
  e = error_of("resources:\n  partition: \"gpu --wrap=id\"\n");
  EXPECT_NE(e.find("resources.partition"), std::string::npos) << e;
  e = error_of("resources:\n  deploy: {cpus: 1}\n");
  EXPECT_NE(e.find("deploy"), std::string::npos) << e;
}

TEST(SlurmOptions, BenchAsksExclusiveGateDoesNotAndSbatchGresIsMerged) {
  AllocationRequest bench;
  bench.stage = "bench";
  bench.gpus = 1;
  bench.resumable = true;
  bench.resources.gpu_type = "h200";
  bench.resources.cpus = 8;
  const auto o = slurm_resource_options(bench, 7, {{"SBATCH_GRES", "gpu:a100:2,nvme:1"}});
  const auto has = [&](const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  EXPECT_TRUE(has(o, "--exclusive"));
  EXPECT_TRUE(has(o, "--gres=gpu:h200:1,nvme:1"));
  EXPECT_TRUE(has(o, "--cpus-per-task=8"));
  EXPECT_TRUE(has(o, "--time=7"));
  EXPECT_TRUE(has(o, "--requeue"));
  EXPECT_TRUE(has(o, "--signal=B:USR1@120"));
  AllocationRequest gate;
  gate.gpus = 1;
  const auto g = slurm_resource_options(gate, 2, {{"SBATCH_GRES", "gpu:a100:2,nvme:1"}});
  EXPECT_FALSE(has(g, "--exclusive"));
  EXPECT_TRUE(has(g, "--gres=gpu:a100:1,nvme:1")) << "the user's GPU type and other gres are kept";
  EXPECT_FALSE(has(g, "--requeue"));
  bench.resources.exclusive = false;
  EXPECT_FALSE(has(slurm_resource_options(bench, 7, {}), "--exclusive"));
  EXPECT_EQ(merged_gres(0, "h200", "nvme:1"), "");
}

TEST(SchedulerAccounting, SacctLinesFoldStepsMaxRssIntoTheirJob) {
  const std::string text =
      "41|COMPLETED|0:0|00:01:05||node1\n"
      "41.batch|COMPLETED|0:0|00:01:05|2048K|node1\n"
      "41.0|COMPLETED|0:0|00:01:00|1.5G|node1\n"
      "42|CANCELLED by 1000|0:15|1-02:03:04||node2\n"
      "garbage line\n";
  const auto a = parse_sacct(text, "sacct");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].job, "41");
  EXPECT_EQ(a[0].elapsed_s, 65);
  ASSERT_TRUE(a[0].max_rss_bytes.has_value());
  EXPECT_EQ(*a[0].max_rss_bytes, 1610612736LL);
  EXPECT_EQ(a[1].state, "CANCELLED");
  EXPECT_EQ(a[1].signal, 15);
  EXPECT_EQ(a[1].elapsed_s, 86400 + 2 * 3600 + 3 * 60 + 4);
  EXPECT_FALSE(a[1].max_rss_bytes.has_value());
  EXPECT_EQ(accounting_from_json(accounting_to_json(a[0])), a[0]);
  EXPECT_EQ(parse_slurm_elapsed("soon"), -1);
}

}  // namespace
}  // namespace densefeed
