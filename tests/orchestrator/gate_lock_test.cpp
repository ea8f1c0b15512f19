#include <gtest/gtest.h>

#include "error.h"
#include "gate_lock.h"
#include "gate_store.h"
#include "project.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;

class GateLock : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_project(dir_.path());
    testing::write_file(dir_ / "src" / "ref.cpp", "int reference();\n");
    testing::write_file(dir_ / "gates" / "g.yaml", R"(gate: g
reference: {command: [ref, "{out}"]}
candidate: {command: [cand, "{out}"]}
outputs:
  y: {dtype: float32, tolerance: {max_abs: 1.0e-6}}
cases: {grid: [{n: [1]}]}
profiles: {quick: {}, full: {}}
freezes: [src/ref.cpp]
)");
  }
  // The project folder as it is: what `gate lock` writes and `gate verify` checks.
  GateStore store() const { return worktree_store(load_project(dir_.path())); }
  testing::TempDir dir_;
};

TEST_F(GateLock, LockThenVerify) {
  EXPECT_EQ(write_lock(store(), {}), (std::vector<std::string>{"added gates/g.yaml", "added src/ref.cpp"}));
  const auto lock = read_lock(store());
  EXPECT_EQ(lock.size(), 2u);
  EXPECT_TRUE(check_locked_file(store(), lock, "gates/g.yaml").empty());
  EXPECT_TRUE(check_frozen_files(store(), lock, load_gate(store(), "g")).empty());
  EXPECT_TRUE(write_lock(store(), {}).empty());  // nothing changed
  // The lock is sha256sum's format.
  const std::string text = testing::read_file(dir_ / "gates" / "gates.lock");
  EXPECT_EQ(text.substr(64, 2), "  ");
}

TEST_F(GateLock, ModifiedFrozenFileAndGateAreReported) {
  write_lock(store(), {});
  testing::write_file(dir_ / "src" / "ref.cpp", "int reference() { return 0; }\n");
  const auto lock = read_lock(store());
  const auto problems = check_frozen_files(store(), lock, load_gate(store(), "g"));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rfind("src/ref.cpp: modified since the lock (locked ", 0), 0u) << problems[0];

  testing::write_file(dir_ / "gates" / "g.yaml", testing::read_file(dir_ / "gates" / "g.yaml") + "# edited\n");
  EXPECT_EQ(check_locked_file(store(), lock, "gates/g.yaml").size(), 1u);
  EXPECT_EQ(write_lock(store(), {"g"}), (std::vector<std::string>{"changed gates/g.yaml", "changed src/ref.cpp"}));
}

TEST_F(GateLock, UnlockedGateIsReported) {
  const auto problems = check_locked_file(store(), {}, "gates/g.yaml");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("not in gates/gates.lock"), std::string::npos);
}

TEST_F(GateLock, MalformedLockNamesTheLine) {
  testing::write_file(dir_ / "gates" / "gates.lock", std::string(64, 'a') + "  gates/g.yaml\nnonsense\n");
  try {
    read_lock(store());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("gates.lock:2:1: expected '<64 hex digits>  <path>'"), std::string::npos) << e.what();
  }
}

TEST(GateLockRepository, TheShippedLockMatchesTheShippedGates) {
  // The checkout as it is, as `densefeed gate verify` checks it in CI.
  const GateStore store = worktree_store(load_project(kRoot));
  const auto lock = read_lock(store);
  for (const auto& name : list_gates(store)) {
    EXPECT_TRUE(check_locked_file(store, lock, "gates/" + name + ".yaml").empty()) << name;
    EXPECT_TRUE(check_frozen_files(store, lock, load_gate(store, name)).empty()) << name;
  }
}

}  // namespace
}  // namespace densefeed
