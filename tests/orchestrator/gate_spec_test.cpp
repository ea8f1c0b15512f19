#include <gtest/gtest.h>

#include <sys/stat.h>

#include "error.h"
#include "gate_lock.h"
#include "gate_spec.h"
#include "gate_store.h"
#include "project.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;

TEST(GateSpec, CpAffineChainGridAndProfiles) {
  const GateSpec gate = load_gate(worktree_store(load_project(kRoot)), "cp-affine-chain");
  EXPECT_EQ(gate.cases.size(), 2u * 4u * 6u + 5u);
  const auto quick = gate.profile_cases("quick");
  EXPECT_EQ(quick.size(), 2u * 2u * 6u + 5u);
  EXPECT_EQ(quick.front().label, "regime=long-memory T=8000 shards=1");
  EXPECT_EQ(quick.front().values["K"], 128);
  EXPECT_EQ(gate.profile_cases("full").size(), gate.cases.size());
  ASSERT_EQ(gate.bench.cases.size(), 1u);
  EXPECT_EQ(gate.bench.cases[0].label, "regime=long-memory T=8192 shards=8");
  ASSERT_EQ(gate.outputs.size(), 1u);
  EXPECT_EQ(gate.outputs[0].reference_dtype, "float64");
  try {
    gate.profile_cases("nightly");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no profile 'nightly' (available: full, quick)"), std::string::npos) << e.what();
  }
}

// A project in a temp folder with a gate file (the schemas are densefeed's
// installed ones, not the project's).
class GateFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_project(dir_.path());
    testing::write_file(dir_ / "frozen.txt", "frozen\n");
  }
  GateStore store() const { return worktree_store(load_project(dir_.path())); }
  std::string error_of(const std::string& gate_text) {
    testing::write_file(dir_ / "gates" / "g.yaml", gate_text);
    try {
      load_gate(store(), "g");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  testing::TempDir dir_;
};

const char* kGate = R"(gate: g
reference: {command: [ref, "{case.n}", "{out}"]}
candidate: {command: [cand, "{case.n}", "{param.mode}", "{out}"]}
params:
  mode: {type: string, enum: [a, b], default: a}
outputs:
  y: {dtype: float32, tolerance: {rel_l2: 1.0e-5}}
cases:
  grid:
    - {n: [1, 2, 4]}
profiles: {quick: {n: [1]}, full: {}}
freezes: [frozen.txt]
bench:
  cases: [{n: 4}]
)";

TEST_F(GateFiles, ValidGateLoads) { EXPECT_EQ(error_of(kGate), ""); }

TEST_F(GateFiles, BenchShapeThatIsNotGatedIsRefused) {
  std::string text = kGate;
  text.replace(text.find("{n: 4}]"), 7, "{n: 8}]");
  const auto e = error_of(text);
  EXPECT_NE(e.find(":14:11: field 'bench.cases[0]': benchmark case {\"n\":8} is not one of the gate's correctness cases"),
            std::string::npos) << e;
}

TEST_F(GateFiles, ReferenceMayNotUseParameters) {
  std::string text = kGate;
  text.replace(text.find("[ref, "), 6, "[ref, \"{param.mode}\", ");
  const auto e = error_of(text);
  EXPECT_NE(e.find("field 'reference.command': the reference command may not use '{param.mode}'"), std::string::npos) << e;
}

TEST_F(GateFiles, PlaceholderWithoutValueIsRefused) {
  std::string text = kGate;
  text.replace(text.find("\"{case.n}\", \"{param"), 10, "\"{case.m}\"");
  const auto e = error_of(text);
  EXPECT_NE(e.find("field 'candidate.command': placeholder '{case.m}' is not defined by case 'n=1'"), std::string::npos) << e;
}

TEST_F(GateFiles, MissingFrozenFileLoadsButCannotBeLocked) {
  std::string text = kGate;
  text.replace(text.find("[frozen.txt]"), 12, "[frozen.txt, nothere.cpp]");
  EXPECT_EQ(error_of(text), "");  // the run's lock check makes it red
  try {
    write_lock(store(), {"g"});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("field 'freezes[1]': frozen file 'nothere.cpp' does not exist"), std::string::npos)
        << e.what();
  }
}

TEST_F(GateFiles, ToleranceMustBePositive) {
  std::string text = kGate;
  text.replace(text.find("rel_l2: 1.0e-5"), 14, "rel_l2: -1");
  const auto e = error_of(text);
  EXPECT_NE(e.find(":7:43: field 'outputs.y.tolerance.rel_l2'"), std::string::npos) << e;
}


// Issue 30: the gate's structure, and what it refuses. Each wrong name is
// said with the file, the field and what the gate has.
TEST_F(GateFiles, AStructureNamesTheGatesOwnKeysParamsAndOutputs) {
  const std::string good = std::string(kGate) + "structure: {partition: {key: n}, precision: [mode], states: [y]}\n";
  ASSERT_EQ(error_of(good), "");
  const GateSpec gate = load_gate(store(), "g");
  ASSERT_TRUE(gate.structure.partition.has_value());
  EXPECT_EQ(gate.structure.partition->key, "n");
  EXPECT_EQ(gate.structure.precision, std::vector<std::string>{"mode"});
  // The default trend bound along the partition key, on every output.
  ASSERT_EQ(gate.outputs[0].trends.size(), 1u);
  EXPECT_EQ(gate.outputs[0].trends[0].along, "n");
  EXPECT_DOUBLE_EQ(gate.outputs[0].trends[0].max_exponent, 1.0);
  EXPECT_EQ(case_parts(gate.structure, gate.cases[2].values, std::nullopt), std::optional<std::int64_t>(4));
  // trend: false turns it off; a reported partition has none and no key.
  ASSERT_EQ(error_of(std::string(kGate) + "structure: {partition: {key: n}, trend: false}\n"), "");
  EXPECT_TRUE(load_gate(store(), "g").outputs[0].trends.empty());
  ASSERT_EQ(error_of(std::string(kGate) + "structure: {partition: {parts: reported}}\n"), "");
  EXPECT_TRUE(load_gate(store(), "g").structure.partition->reported);

  const auto e1 = error_of(std::string(kGate) + "structure: {partition: {key: shards}}\n");
  EXPECT_NE(e1.find("'shards' is not a key of the gate's cases (n)"), std::string::npos) << e1;
  EXPECT_NE(e1.find("structure.partition.key"), std::string::npos) << e1;
  const auto e2 = error_of(std::string(kGate) + "structure: {precision: [dtype]}\n");
  EXPECT_NE(e2.find("'dtype' is not one of the gate's params (mode)"), std::string::npos) << e2;
  const auto e3 = error_of(std::string(kGate) + "structure: {states: [state]}\n");
  EXPECT_NE(e3.find("'state' is not one of the gate's outputs (y)"), std::string::npos) << e3;
  const auto e4 = error_of(std::string(kGate) + "structure: {partition: {key: n, parts: reported}}\n");
  EXPECT_NE(e4.find("structure"), std::string::npos) << e4;
  std::string text = kGate;
  text.replace(text.find("{n: [1, 2, 4]}"), 14, "{n: [1, 2, 4], layout: [a]}");
  const auto e5 = error_of(text + "structure: {partition: {key: layout}}\n");
  EXPECT_NE(e5.find("no whole number 1..2^20 for 'layout'"), std::string::npos) << e5;
}

// The candidate's meta.json is advice: a parts count only when it is a
// small whole number in a small JSON object, nothing otherwise.
TEST(GateStructure, AReportedPartsCountIsReadOnlyWhenItIsAWholeNumber) {
  testing::TempDir dir;
  EXPECT_EQ(read_reported_parts(dir.path()), std::nullopt);
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::optional<std::int64_t>>>{
           {R"({"parts": 3})", 3}, {R"({"parts": 0})", std::nullopt}, {R"({"parts": 2.5})", std::nullopt},
           {R"({"parts": "3"})", std::nullopt}, {R"([3])", std::nullopt}, {"not json", std::nullopt},
           {R"({"parts": 99999999999})", std::nullopt}, {std::string(5000, ' ') + R"({"parts": 3})", std::nullopt}}) {
    testing::write_file(dir / "meta.json", text);
    EXPECT_EQ(read_reported_parts(dir.path()), want) << text.substr(0, 40);
  }
  // A link is never followed (the candidate could point it at what only
  // densefeed may read), nor a FIFO opened to block.
  testing::write_file(dir / "elsewhere.json", R"({"parts": 3})");
  std::filesystem::remove(dir / "meta.json");
  std::filesystem::create_symlink(dir / "elsewhere.json", dir / "meta.json");
  EXPECT_EQ(read_reported_parts(dir.path()), std::nullopt);
  std::filesystem::remove(dir / "meta.json");
  ASSERT_EQ(::mkfifo((dir / "meta.json").c_str(), 0600), 0);
  EXPECT_EQ(read_reported_parts(dir.path()), std::nullopt);
}

}  // namespace
}  // namespace densefeed
