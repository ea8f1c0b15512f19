// The fla-core intra-card CP example (experiments/fla-intracard-cp) is a
// project of its own that CI cannot run (it needs a GPU and fla-core): its
// gate must still validate and match its lock, and its experiments must
// validate against the gate, so that what was run on the H200 stays runnable.
#include <gtest/gtest.h>

#include "gate_lock.h"
#include "gate_spec.h"
#include "gate_store.h"
#include "manifest.h"
#include "project.h"

namespace densefeed {
namespace {

const std::filesystem::path kExample = std::filesystem::path(DENSEFEED_SOURCE_DIR) / "experiments" / "fla-intracard-cp";

TEST(FlaExample, GateValidatesAndMatchesItsLock) {
  const Project project = load_project(kExample);
  EXPECT_EQ(project.python_path.size(), 1u);
  const GateStore store = worktree_store(project);
  ASSERT_EQ(list_gates(store), (std::vector<std::string>{"fla-intracard-cp", "fla-intracard-cp-session"}));
  const LockTable lock = read_lock(store);
  for (const char* name : {"fla-intracard-cp", "fla-intracard-cp-session"}) {
    const GateSpec gate = load_gate(store, name);
    EXPECT_EQ(check_locked_file(store, lock, store.gate_rel(name)), std::vector<std::string>{}) << name;
    EXPECT_EQ(check_frozen_files(store, lock, gate), std::vector<std::string>{}) << name;
    // The profiles the closing note and README name exist and select cases
    // that fla cuts and cases it does not.
    EXPECT_EQ(gate.profile_cases("precision").size(), 11u) << name;
    EXPECT_EQ(gate.profile_cases("full").size(), 13u) << name;
  }
}

// The session gate is the process gate served by long-lived harnesses: the
// same cases, outputs, bounds and frozen files, so its verdicts answer the
// same question (only how often a harness starts differs).
TEST(FlaExample, TheSessionGateJudgesWhatTheProcessGateJudges) {
  const GateStore store = worktree_store(load_project(kExample));
  const GateSpec process = load_gate(store, "fla-intracard-cp");
  const GateSpec session = load_gate(store, "fla-intracard-cp-session");
  EXPECT_FALSE(process.sessions);
  EXPECT_TRUE(session.sessions);
  ASSERT_EQ(session.cases.size(), process.cases.size());
  for (std::size_t i = 0; i < process.cases.size(); ++i) {
    EXPECT_EQ(session.cases[i].values, process.cases[i].values) << i;
  }
  ASSERT_EQ(session.outputs.size(), process.outputs.size());
  for (std::size_t i = 0; i < process.outputs.size(); ++i) {
    const auto &a = process.outputs[i], &b = session.outputs[i];
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.dtype, a.dtype);
    EXPECT_EQ(b.shape, a.shape);
    EXPECT_EQ(b.partition_axis, a.partition_axis);
    EXPECT_EQ(b.tolerance.rel_l2, a.tolerance.rel_l2) << a.name;
    EXPECT_EQ(b.tolerance.max_abs, a.tolerance.max_abs) << a.name;
  }
  EXPECT_EQ(session.freezes, process.freezes);
  EXPECT_EQ(session.timeout_s, process.timeout_s);
}

TEST(FlaExample, ExperimentsValidateAgainstTheGate) {
  const Project project = load_project(kExample);
  const GateStore store = worktree_store(project);
  for (const char* name : {"fla-0.5.2-intracard-cp.yaml", "fla-0.6.0-intracard-cp.yaml", "fla-0.5.2-intracard-cp-session.yaml",
                           "fla-0.6.0-intracard-cp-session.yaml"}) {
    const Manifest m = load_manifest(kExample / "experiments" / name, store, project);
    const bool session = std::string(name).find("-session") != std::string::npos;
    EXPECT_EQ(m.gate, session ? "fla-intracard-cp-session" : "fla-intracard-cp");
    const GateSpec gate = load_gate(store, m.gate);
    const auto candidate = resolve_params(m, "candidate", m.candidate, gate);
    const auto base = resolve_params(m, "base", m.base, gate);
    EXPECT_NE(candidate["fla"], base["fla"]) << name;
  }
}

}  // namespace
}  // namespace densefeed
