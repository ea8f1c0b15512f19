// Bad manifests: each gets one InputError naming the file, line, column, the
// field and what was expected.
#include <gtest/gtest.h>

#include "error.h"
#include "gate_spec.h"
#include "gate_store.h"
#include "manifest.h"
#include "project.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
// densefeed's own project and its gates as checked out (read when a test
// first asks, so that a failure is that test's, not the binary's).
const Project& project() {
  static const Project p = load_project(kRoot);
  return p;
}
const GateStore& store() {
  static const GateStore s = worktree_store(project());
  return s;
}

const char* kGood = R"(experiment: probe
author: test
hypothesis: tf32x3 fixes the drift
predicted_effect: green
gate: cp-affine-chain
candidate:
  revision: WORKTREE
  params: {precision: tf32x3}
base:
  revision: WORKTREE
  params:
    precision: tf32
)";

class ManifestValidation : public ::testing::Test {
 protected:
  // Loads `text` as a manifest and, if it loads, resolves both arms against
  // the gate; returns the error text ("" if none).
  std::string error_of(const std::string& text) {
    const auto path = dir_ / "m.yaml";
    testing::write_file(path, text);
    try {
      Manifest m = load_manifest(path, store(), project());
      GateSpec gate = load_gate(store(), m.gate);
      resolve_params(m, "candidate", m.candidate, gate);
      resolve_params(m, "base", m.base, gate);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  std::string prefix() const { return (dir_ / "m.yaml").string(); }
  testing::TempDir dir_;
};

TEST_F(ManifestValidation, GoodManifestLoads) {
  EXPECT_EQ(error_of(kGood), "");
  const auto path = dir_ / "m.yaml";
  Manifest m = load_manifest(path, store(), project());
  EXPECT_EQ(m.name, "probe");
  EXPECT_EQ(m.candidate.params["precision"], "tf32x3");
  EXPECT_EQ(m.sha256.size(), 64u);
}

TEST_F(ManifestValidation, NotYaml) {
  EXPECT_EQ(error_of("experiment: [unclosed\nhypothesis: x\n"),
            prefix() + ":2:11: not valid YAML: end of sequence flow not found");
}

TEST_F(ManifestValidation, UnknownKey) {
  std::string text = kGood;
  text += "tolerance: 1.0\n";
  EXPECT_EQ(error_of(text).rfind(prefix() + ":13:1: field 'tolerance': unknown key; expected", 0), 0u) << error_of(text);
}

TEST_F(ManifestValidation, UnknownKeyInsideArm) {
  std::string text = kGood;
  text.replace(text.find("  revision: WORKTREE\n  params: {precision: tf32x3}"), 19, "  revison: WORKTREE");
  const auto e = error_of(text);
  EXPECT_NE(e.find(prefix() + ":7:3: field 'candidate.revison': unknown key"), std::string::npos) << e;
}

TEST_F(ManifestValidation, WrongType) {
  std::string text = kGood;
  text.replace(text.find("hypothesis: tf32x3 fixes the drift"), 34, "hypothesis: [a, b]");
  const auto e = error_of(text);
  EXPECT_EQ(e.rfind(prefix() + ":3:13: field 'hypothesis': ", 0), 0u) << e;
  EXPECT_NE(e.find("type string"), std::string::npos) << e;
  EXPECT_NE(e.find("got array"), std::string::npos) << e;
}

TEST_F(ManifestValidation, MissingField) {
  std::string text = kGood;
  text.erase(text.find("gate: cp-affine-chain\n"), 22);
  const auto e = error_of(text);
  EXPECT_EQ(e.rfind(prefix() + ":1:1: field 'gate': missing required field; expected type string", 0), 0u) << e;
}

TEST_F(ManifestValidation, NumberBeyondADouble) {
  std::string text = kGood;
  text += "predicted_speedup: 1e400\n";
  const auto e = error_of(text);
  EXPECT_EQ(e.rfind(prefix() + ":13:20: field 'predicted_speedup': ", 0), 0u) << e;
  EXPECT_NE(e.find("got string \"1e400\""), std::string::npos) << e;
}

TEST_F(ManifestValidation, DuplicateKey) {
  std::string text = kGood;
  text += "hypothesis: again\n";
  EXPECT_EQ(error_of(text), prefix() + ":13:1: field 'hypothesis': duplicate key 'hypothesis' (first defined at line 3)");
}

TEST_F(ManifestValidation, ParameterTheGateDoesNotDeclare) {
  std::string text = kGood;
  text.replace(text.find("{precision: tf32x3}"), 19, "{precision: tf32x3, rel_l2: 1.0}");
  const auto e = error_of(text);
  EXPECT_EQ(e.rfind(prefix() + ":8:31: field 'candidate.params.rel_l2': gate 'cp-affine-chain' declares no parameter "
                               "'rel_l2' (declared: precision, device)", 0),
            0u)
      << e;
}

TEST_F(ManifestValidation, ParameterValueOutsideItsEnum) {
  std::string text = kGood;
  text.replace(text.find("    precision: tf32\n"), 20, "    precision: bf16\n");
  const auto e = error_of(text);
  EXPECT_EQ(e, prefix() + ":12:16: field 'base.params.precision': expected one of [\"ieee\",\"tf32\",\"tf32-rn\",\"tf32x3\"], "
                          "got \"bf16\"");
}

TEST_F(ManifestValidation, ParameterOfWrongType) {
  std::string text = kGood;
  text.replace(text.find("    precision: tf32\n"), 20, "    precision: 32\n");
  const auto e = error_of(text);
  EXPECT_EQ(e.rfind(prefix() + ":12:16: field 'base.params.precision': expected string", 0), 0u) << e;
}

TEST_F(ManifestValidation, GateThatDoesNotExist) {
  std::string text = kGood;
  text.replace(text.find("gate: cp-affine-chain"), 21, "gate: cp-affine-chian");
  const auto e = error_of(text);
  EXPECT_EQ(e.rfind(prefix() + ":5:7: field 'gate': no gate named 'cp-affine-chian'", 0), 0u) << e;
  EXPECT_NE(e.find("available: cp-affine-chain"), std::string::npos) << e;
}

TEST_F(ManifestValidation, RevisionThatLooksLikeAnOptionIsRefused) {
  std::string text = kGood;
  text.replace(text.find("  revision: WORKTREE\n  params: {precision: tf32x3}"), 20, "  revision: --output=x\n");
  const auto e = error_of(text);
  EXPECT_EQ(e.rfind(prefix() + ":7:13: field 'candidate.revision': ", 0), 0u) << e;
  EXPECT_NE(e.find("matching \"^(WORKTREE|"), std::string::npos) << e;
}

TEST_F(ManifestValidation, EmptyFileAndMissingFile) {
  EXPECT_EQ(error_of(""), prefix() + ": expected exactly one YAML document, found 0");
  try {
    load_manifest(dir_ / "absent.yaml", store(), project());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), (dir_ / "absent.yaml").string() + ": no such file");
  }
}

}  // namespace
}  // namespace densefeed
