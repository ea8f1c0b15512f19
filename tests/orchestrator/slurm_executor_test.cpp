// The Slurm executor's pure parts (ctest -R Slurm): how every job state is
// judged, minutes from seconds, job names, and the launch files that cross to
// the compute node (every field survives, or a job would run something other
// than what the stage asked for).
#include <gtest/gtest.h>

#include "launch_json.h"
#include "slurm_executor.h"

namespace densefeed {
namespace {

TEST(SlurmStates, EveryFinalStateIsJudgedAsTheIssueSays) {
  for (const char* s : {"", "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}) {
    EXPECT_EQ(classify_slurm_state(s), SlurmOutcome::pending) << s;
  }
  EXPECT_EQ(classify_slurm_state("COMPLETED"), SlurmOutcome::finished);
  EXPECT_EQ(classify_slurm_state("FAILED"), SlurmOutcome::finished);
  EXPECT_EQ(classify_slurm_state("TIMEOUT"), SlurmOutcome::timeout);
  EXPECT_EQ(classify_slurm_state("CANCELLED"), SlurmOutcome::cancelled);
  EXPECT_EQ(classify_slurm_state("CANCELLED+"), SlurmOutcome::cancelled);
  for (const char* s : {"NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "OUT_OF_MEMORY", "DEADLINE", "SPECIAL_EXIT", "REVOKED", "VANISHED",
                        "SOMETHING_NEW"}) {
    EXPECT_EQ(classify_slurm_state(s), SlurmOutcome::infrastructure) << s;
  }
}

TEST(SlurmStates, TimeLimitsRoundUpToWholeMinutes) {
  EXPECT_EQ(slurm_minutes(0.5), 1);
  EXPECT_EQ(slurm_minutes(60), 1);
  EXPECT_EQ(slurm_minutes(60.001), 2);
  EXPECT_EQ(slurm_minutes(3600), 60);
}

TEST(SlurmStates, JobNamesTellLedgersAndExperimentsApart) {
  const auto a = slurm_experiment_prefix("/x/a.db", 12), b = slurm_experiment_prefix("/x/b.db", 12);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind(slurm_ledger_prefix("/x/a.db"), 0), 0u);
  EXPECT_EQ(a.substr(a.size() - 5), "-e12-");
  // e1- is not a prefix of e12-: one experiment's cancel never takes another's jobs.
  EXPECT_NE(slurm_experiment_prefix("/x/a.db", 12).rfind(slurm_experiment_prefix("/x/a.db", 1), 0), 0u);
}

TEST(SlurmLaunchJson, AnUntrustedLaunchCrossesWithEveryField) {
  ArmContext arm;
  arm.label = "WORKTREE";
  arm.project = "/p";
  arm.gate_dir = "/p/gates";
  arm.exe_dirs = {"/p/bin", "/p"};
  arm.python = "/usr/bin/python3";
  arm.env = {{"PYTHONPATH", "/p:/share"}};
  arm.readable = {"/p"};
  arm.hidden = {"/p/.densefeed"};
  arm.env_allow = {"HF_*"};
  arm.python_path = {"/p/third_party"};
  Launch l;
  l.untrusted.argv = {"python3", "h.py", "--n", "8"};
  l.untrusted.arm = &arm;
  l.untrusted.env = {{"DENSEFEED_MODE", "gate"}};
  l.untrusted.cwd = "/r/c";
  l.untrusted.writable = {"/r/c/out"};
  l.untrusted.readable = {"/extra"};
  l.untrusted.stdout_path = "/r/c/stdout.log";
  l.untrusted.stderr_path = "/r/c/stderr.log";
  l.untrusted.timeout = std::chrono::milliseconds(12345);
  l.untrusted.limits.memory_bytes = 1 << 30;
  l.untrusted.limits.processes = 7;
  l.untrusted.limits.file_size_bytes = 99;
  l.untrusted.limits.tmp_bytes = 77;
  l.untrusted.sandbox = false;
  const auto text = launch_to_json(l).dump();
  const auto d = launch_from_json(nlohmann::json::parse(text));
  EXPECT_EQ(launch_to_json(d->launch).dump(), text);
  ASSERT_EQ(d->launch.untrusted.arm, &d->arm);
  EXPECT_EQ(d->arm.env_allow, arm.env_allow);
  EXPECT_EQ(d->arm.python_path, arm.python_path);
  EXPECT_EQ(d->arm.hidden, arm.hidden);
  EXPECT_FALSE(d->launch.untrusted.sandbox);
  EXPECT_EQ(d->launch.untrusted.limits.processes, 7u);
}

TEST(SlurmLaunchJson, AResultCrossesWithEveryField) {
  LaunchResult r;
  r.result.process.started = true;
  r.result.process.signal = 9;
  r.result.process.timed_out = true;
  r.result.process.ended_by = "Slurm job 4 ended TIMEOUT";
  r.result.process.stdout_capture = {10, 2};
  r.result.process.wall_s = 1.5;
  r.result.limit = "the memory limit";
  r.result.sandboxed = true;
  r.gpu = "1";
  r.placement = Placement{"slurm", "4", "n1"};
  r.infrastructure = "";
  const auto rt = launch_result_to_json(r).dump();
  EXPECT_EQ(launch_result_to_json(launch_result_from_json(nlohmann::json::parse(rt))).dump(), rt);
  EXPECT_EQ(launch_result_from_json(nlohmann::json::parse(rt)).result.process.describe(), "timed out: Slurm job 4 ended TIMEOUT");
}

TEST(SlurmLaunchJson, AResultWithAFieldMissingIsRefusedNotGuessed) {
  auto j = launch_result_to_json(LaunchResult{});
  j["process"].erase("exit_code");
  EXPECT_THROW(launch_result_from_json(j), nlohmann::json::exception);
}

}  // namespace
}  // namespace densefeed
