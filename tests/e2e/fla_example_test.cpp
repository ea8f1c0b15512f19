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
  ASSERT_EQ(list_gates(store), std::vector<std::string>{"fla-intracard-cp"});
  const GateSpec gate = load_gate(store, "fla-intracard-cp");
  const LockTable lock = read_lock(store);
  EXPECT_EQ(check_locked_file(store, lock, store.gate_rel("fla-intracard-cp")), std::vector<std::string>{});
  EXPECT_EQ(check_frozen_files(store, lock, gate), std::vector<std::string>{});
  // The profiles the closing note and README name exist and select cases
  // that fla cuts and cases it does not.
  EXPECT_EQ(gate.profile_cases("precision").size(), 11u);
  EXPECT_EQ(gate.profile_cases("full").size(), 13u);
}

TEST(FlaExample, ExperimentsValidateAgainstTheGate) {
  const Project project = load_project(kExample);
  const GateStore store = worktree_store(project);
  const GateSpec gate = load_gate(store, "fla-intracard-cp");
  for (const char* name : {"fla-0.5.2-intracard-cp.yaml", "fla-0.6.0-intracard-cp.yaml"}) {
    const Manifest m = load_manifest(kExample / "experiments" / name, store, project);
    EXPECT_EQ(m.gate, "fla-intracard-cp");
    const auto candidate = resolve_params(m, "candidate", m.candidate, gate);
    const auto base = resolve_params(m, "base", m.base, gate);
    EXPECT_NE(candidate["fla"], base["fla"]) << name;
  }
}

}  // namespace
}  // namespace densefeed
