// A Python harness (kernels/python/softmax_harness.py, on the helper
// kernels/python/densefeed_harness.py) through a gate by densefeed: the
// stable kernel is green and benchmarked, the naive one red only where its
// exp overflows, the float16 one red on precision, and an acceptance run
// reads the metrics it writes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "schema_validator.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;

// The gate of experiments/README.md's Python example, read from the README
// itself so that the page shows what is tested.
std::string readme_gate() {
  const std::string readme = testing::read_file(kRoot / "experiments" / "README.md");
  const auto begin = readme.find("```yaml\ngate: py-softmax\n");
  if (begin == std::string::npos) return "";
  const auto body = begin + std::string("```yaml\n").size();
  return readme.substr(body, readme.find("```", body) - body);
}

class PythonHarness : public ::testing::Test {
 protected:
  void SetUp() override {
    // A project in a plain folder (no git): its gates are trusted as they are.
    root_ = dir_ / "root";
    testing::write_project(root_);
    const std::string gate = readme_gate();
    ASSERT_FALSE(gate.empty()) << "experiments/README.md has no ```yaml block starting with 'gate: py-softmax'";
    testing::write_file(root_ / "gates" / "py-softmax.yaml", gate);
    // The README's gate runs the script from the project ({project}); this
    // project holds a copy of densefeed's example.
    for (const char* f : {"softmax_harness.py", "softmax_driver.py"}) {
      testing::write_file(root_ / "kernels" / "python" / f, testing::read_file(kRoot / "kernels" / "python" / f));
    }
    ASSERT_EQ(densefeed({"gate", "lock"}).exit_code, 0);
  }
  testing::CliResult densefeed(std::vector<std::string> args) {
    args.insert(args.begin(), {"--project", root_.string(), "--trust-worktree"});
    // The build's bin folder on PATH (the harnesses run as python3 {project}/...).
    return testing::run_cli(kExe, args, dir_.path(), testing::with_on_path(std::filesystem::path(kExe).parent_path()));
  }
  nlohmann::json run(const std::string& candidate, const std::string& base, int exit_code, bool bench = false,
                     const std::string& extra = "", const std::string& gate = "py-softmax") {
    const auto manifest = dir_ / (candidate + ".yaml");
    testing::write_file(manifest, "experiment: softmax-" + candidate + "\nhypothesis: h\npredicted_effect: p\ngate: " + gate + "\n"
                                  "candidate: {revision: WORKTREE, params: {variant: " + candidate + "}}\n"
                                  "base: {revision: WORKTREE, params: {variant: " + base + "}}\n" + extra);
    std::vector<std::string> args = {"run", manifest.string(), "--ledger", (dir_ / "ledger.db").string(), "--json", "--jobs", "2"};
    if (!bench) args.push_back("--no-bench");
    const auto r = densefeed(args);
    EXPECT_EQ(r.exit_code, exit_code) << r.out << r.err;
    const auto report = nlohmann::json::parse(r.out);
    EXPECT_EQ(SchemaValidator(kRoot / "schemas" / "run-report.schema.json").errors(report), std::vector<std::string>{});
    return report;
  }
  static std::map<std::string, std::string> verdicts(const nlohmann::json& report) {
    std::map<std::string, std::string> out;
    for (const auto& c : report["stages"]["gate"]["cases"]) out[c["case"]] = c["verdict"].get<std::string>() + " " + c["reason"].get<std::string>();
    return out;
  }
  testing::TempDir dir_;
  std::filesystem::path root_;
};

TEST_F(PythonHarness, TheStableKernelIsGreenAndBenchmarked) {
  const auto r = run("stable", "float16", 0, /*bench=*/true);
  EXPECT_EQ(r["stages"]["gate"]["cases"].size(), 8u);
  for (const auto& [label, v] : verdicts(r)) EXPECT_EQ(v, "green ") << label;
  ASSERT_EQ(r["stages"]["bench"]["status"], "measured") << r["stages"]["bench"].dump(1);
  const auto& c = r["stages"]["bench"]["cases"][0];
  EXPECT_EQ(c["case"], "rows=64 cols=1000 scale=1");
  EXPECT_GE(c["rounds"].get<int>(), 4);
  EXPECT_EQ(c["timing"], "driver");  // the gate's frozen softmax_driver.py timed it
  // What was timed was gated: the bench-mode y.npy passed against the reference.
  EXPECT_TRUE(c["verdict"] == "faster" || c["verdict"] == "slower" || c["verdict"] == "same" || c["verdict"] == "inconclusive");
}

TEST_F(PythonHarness, TheNaiveKernelOverflowsOnlyAtTheLargeScale) {
  const auto r = run("naive", "stable", 1);
  for (const auto& [label, v] : verdicts(r)) {
    if (label.find("scale=100") != std::string::npos) {
      EXPECT_EQ(v.rfind("red ", 0), 0u) << label << ": " << v;
      EXPECT_NE(v.find("candidate element(s) are NaN/Inf"), std::string::npos) << label << ": " << v;
    } else {
      EXPECT_EQ(v, "green ") << label;
    }
  }
  // `next` names the one value that separates red from green.
  ASSERT_FALSE(r["next"].empty());
  bool names_scale = false;
  for (const auto& s : r["next"]) names_scale = names_scale || s["why"].get<std::string>().find("scale=100") != std::string::npos;
  EXPECT_TRUE(names_scale) << r["next"].dump(1);
}

TEST_F(PythonHarness, Float16IsRedOnPrecisionWhereNoElementDominates) {
  // At scale 1 every row spreads its mass, and float16's 2^-11 rounding is
  // far over the 1e-6 bound; at scale 100 one element per row can take
  // nearly all of it, where float16 may round to the same value.
  const auto r = run("float16", "stable", 1);
  for (const auto& [label, v] : verdicts(r)) {
    if (label.find("scale=1 ") != std::string::npos || label.size() >= 8 && label.substr(label.size() - 8) == " scale=1") {
      EXPECT_NE(v.find("red y: rel_l2"), std::string::npos) << label << ": " << v;
    }
  }
}

TEST_F(PythonHarness, AnAcceptanceRunReadsTheMetricsItWrites) {
  run("stable", "float16", 0, false,
      "risk: [numerics]\nacceptance:\n  command: [python3, \"{project}/kernels/python/softmax_harness.py\", --role, candidate, --variant, \"{param.variant}\", --rows, \"64\", "
      "--cols, \"1000\", --scale, \"1\"]\n  criteria: [\"p50(rows_per_ms) > 0\"]\n");
  ASSERT_EQ(densefeed({"review", "approve", "1", "--by", "alice", "--ledger", (dir_ / "ledger.db").string()}).exit_code, 0);
  // The base is WORKTREE (another variant of the same checkout): the agent's,
  // accepted by the person promoting.
  const auto p = densefeed({"promote", "1", "--by", "carol", "--accept-agent-base", "--ledger", (dir_ / "ledger.db").string(), "--json"});
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  const auto doc = nlohmann::json::parse(p.out);
  EXPECT_EQ(doc["acceptance"], "pass");
  EXPECT_EQ(doc["criteria"][0]["statistic"], "p50");
  EXPECT_GT(doc["criteria"][0]["lhs"].get<double>(), 0);
}

TEST_F(PythonHarness, Python3InAGateIsTheProjectsInterpreterWithTheHarnessModuleOnItsPath) {
  // The same harness as a script of the project, started as python3: no
  // launcher, and no copy of densefeed_harness.py beside it (the import
  // works only through the PYTHONPATH densefeed gives every harness).
  std::string text = readme_gate();
  text.replace(text.find("gate: py-softmax"), 16, "gate: py-softmax-script");
  const std::string from = "\"{project}/kernels/python/softmax_harness.py\"";
  int replaced = 0;
  for (std::size_t at; (at = text.find(from)) != std::string::npos; ++replaced) {
    text.replace(at, from.size(), "\"{project}/py/softmax_harness.py\"");
  }
  ASSERT_EQ(replaced, 2) << "the README's gate runs its reference and candidate as python3 {project}/...: " << text;
  testing::write_file(root_ / "gates" / "py-softmax-script.yaml", text);
  std::string script = testing::read_file(kRoot / "kernels" / "python" / "softmax_harness.py");
  const std::string own_folder = "sys.path.insert(0, str(Path(__file__).resolve().parent))\n";
  ASSERT_NE(script.find(own_folder), std::string::npos);
  script.erase(script.find(own_folder), own_folder.size());
  testing::write_file(root_ / "py" / "softmax_harness.py", script);
  ASSERT_FALSE(std::filesystem::exists(root_ / "py" / "densefeed_harness.py"));
  ASSERT_EQ(densefeed({"gate", "lock", "py-softmax-script"}).exit_code, 0);
  const auto r = run("stable", "float16", 0, false, "", "py-softmax-script");
  EXPECT_EQ(r["stages"]["gate"]["cases"].size(), 8u);
  for (const auto& [label, v] : verdicts(r)) EXPECT_EQ(v, "green ") << label;
  const auto f = run("float16", "stable", 1, false, "", "py-softmax-script");
  bool precision = false;
  for (const auto& [label, v] : verdicts(f)) precision = precision || v.find("red y: rel_l2") != std::string::npos;
  EXPECT_TRUE(precision) << f["stages"]["gate"].dump(1);
}

}  // namespace
}  // namespace densefeed
