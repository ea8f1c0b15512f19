#include <gtest/gtest.h>

#include "error.h"
#include "gate_lock.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;

class GateLock : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_ / "schemas");
    std::filesystem::copy_file(kRoot / "schemas" / "gate.schema.json", dir_ / "schemas" / "gate.schema.json");
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
  testing::TempDir dir_;
};

TEST_F(GateLock, LockThenVerify) {
  EXPECT_EQ(write_lock(dir_.path(), {}), (std::vector<std::string>{"added gates/g.yaml", "added src/ref.cpp"}));
  const auto lock = read_lock(dir_.path());
  EXPECT_EQ(lock.size(), 2u);
  EXPECT_TRUE(check_locked_file(dir_.path(), lock, "gates/g.yaml").empty());
  EXPECT_TRUE(check_frozen_files(dir_.path(), lock, load_gate(dir_.path(), "g")).empty());
  EXPECT_TRUE(write_lock(dir_.path(), {}).empty());  // nothing changed
  // The lock is sha256sum's format.
  const std::string text = testing::read_file(dir_ / "gates" / "gates.lock");
  EXPECT_EQ(text.substr(64, 2), "  ");
}

TEST_F(GateLock, ModifiedFrozenFileAndGateAreReported) {
  write_lock(dir_.path(), {});
  testing::write_file(dir_ / "src" / "ref.cpp", "int reference() { return 0; }\n");
  const auto lock = read_lock(dir_.path());
  const auto problems = check_frozen_files(dir_.path(), lock, load_gate(dir_.path(), "g"));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rfind("src/ref.cpp: modified since the lock (locked ", 0), 0u) << problems[0];

  testing::write_file(dir_ / "gates" / "g.yaml", testing::read_file(dir_ / "gates" / "g.yaml") + "# edited\n");
  EXPECT_EQ(check_locked_file(dir_.path(), lock, "gates/g.yaml").size(), 1u);
  EXPECT_EQ(write_lock(dir_.path(), {"g"}), (std::vector<std::string>{"changed gates/g.yaml", "changed src/ref.cpp"}));
}

TEST_F(GateLock, UnlockedGateIsReported) {
  const auto problems = check_locked_file(dir_.path(), {}, "gates/g.yaml");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("not in gates/gates.lock"), std::string::npos);
}

TEST_F(GateLock, MalformedLockNamesTheLine) {
  testing::write_file(dir_ / "gates" / "gates.lock", std::string(64, 'a') + "  gates/g.yaml\nnonsense\n");
  try {
    read_lock(dir_.path());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("gates.lock:2:1: expected '<64 hex digits>  <path>'"), std::string::npos) << e.what();
  }
}

TEST(GateLockRepository, TheShippedLockMatchesTheShippedGates) {
  const auto lock = read_lock(kRoot);
  for (const auto& name : list_gates(kRoot)) {
    EXPECT_TRUE(check_locked_file(kRoot, lock, "gates/" + name + ".yaml").empty()) << name;
    EXPECT_TRUE(check_frozen_files(kRoot, lock, load_gate(kRoot, name)).empty()) << name;
  }
}

}  // namespace
}  // namespace densefeed
