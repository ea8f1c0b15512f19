// The queue's worker as a library function (pipeline/worker.h), against a
// real SQLite ledger in a temp folder and real child processes.
#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "gate_store.h"
#include "ledger.h"
#include "manifest.h"
#include "project.h"
#include "test_support.h"
#include "worker.h"
#include "workspace.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;

class Worker : public ::testing::Test {
 protected:
  void SetUp() override {
    const Project project = load_project(kRoot);
    manifest_ = load_manifest(kRoot / "experiments" / "cp-affine-chain-tf32.yaml", worktree_store(project), project);
    options_.ledger = dir_ / "ledger.db";
    options_.once = true;
    options_.stop_on_signals = false;
    options_.log = &log_;
  }
  std::int64_t queue_one() {
    Ledger ledger(options_.ledger);
    return ledger.record_experiment({&manifest_, {{"precision", "tf32x3"}}, {{"precision", "ieee"}}}, ExperimentEvent::queued, "submit");
  }
  ExperimentState state(std::int64_t id) const { return Ledger(options_.ledger, Ledger::Mode::read_only).state(id); }

  testing::TempDir dir_;
  Manifest manifest_;
  WorkerOptions options_;
  std::ostringstream log_;
};

TEST_F(Worker, AnEmptyQueueEndsAOnceWorkerWithAReportSayingSo) {
  options_.slots = 2;
  const WorkerReport report = run_worker(options_);
  EXPECT_EQ(report.end, WorkerEnd::queue_empty);
  EXPECT_TRUE(report.runs.empty());
  EXPECT_TRUE(report.recovered.empty());
  EXPECT_EQ(log_.str(), "worker: 2 CPU slot(s)\n");
}

TEST_F(Worker, ACancelledExperimentIsNotClaimed) {
  const auto id = queue_one();
  EXPECT_EQ(Ledger(options_.ledger).cancel(id), ExperimentState::cancelled);
  options_.densefeed = "/bin/false";  // would interrupt it, were it claimed
  const WorkerReport report = run_worker(options_);
  EXPECT_EQ(report.end, WorkerEnd::queue_empty);
  EXPECT_TRUE(report.runs.empty());
  EXPECT_EQ(state(id), ExperimentState::cancelled);
}

TEST_F(Worker, AChildThatEndsWithoutRecordingItsExperimentLeavesItInterrupted) {
  const auto id = queue_one();
  // The child is told what worker-run would be: `sh -c SCRIPT sh worker-run ID --ledger ...`.
  options_.densefeed = "/bin/sh";
  options_.child_args = {"-c", "test \"$1 $2 $3 $4 $5\" = \"worker-run " + std::to_string(id) + " --ledger " +
                                   options_.ledger.string() + " --profile\" && exit 3; exit 9",
                         "sh"};
  const WorkerReport report = run_worker(options_);
  ASSERT_EQ(report.runs.size(), 1u);
  EXPECT_EQ(report.runs[0].slot, 0);
  EXPECT_EQ(report.runs[0].experiment_id, id);
  EXPECT_EQ(report.runs[0].outcome, "interrupted: exited with code 3");
  EXPECT_EQ(state(id), ExperimentState::interrupted);
  EXPECT_NE(log_.str().find(fmt::format("slot 0: experiment {} (", id)), std::string::npos) << log_.str();
  EXPECT_NE(log_.str().find("): interrupted: exited with code 3\n"), std::string::npos) << log_.str();
  EXPECT_TRUE(std::filesystem::exists(Workspace{options_.ledger}.runs() / std::to_string(id) / "worker-run.stderr.log"));
}

TEST_F(Worker, AWaitingWorkerThatIsToldToStopEndsSayingSo) {
  options_.once = false;
  std::atomic<bool> stop{false};
  options_.stop = &stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  const WorkerReport report = run_worker(options_);
  stopper.join();
  EXPECT_EQ(report.end, WorkerEnd::stopped);
  EXPECT_TRUE(report.runs.empty());
}

}  // namespace
}  // namespace densefeed
