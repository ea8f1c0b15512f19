// Issue 30, replay in one command, through the real CLI on the bundled tf32
// example (red at every shards > 1): `run --failing-of ID [--case]
// [--candidate-param]` replays red cases with the experiment's seed and
// profile, recorded as a new experiment linked to it; `repro ID CASE`
// prints the harness commands a person runs by hand, which give the
// recorded error again; bad filters are refused naming what was given.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;
const std::map<std::string, std::string> kEnv = testing::with_on_path(std::filesystem::path(kExe).parent_path());
const std::string kCase = "regime=long-memory T=8192 shards=2";

class Replay : public ::testing::Test {
 protected:
  testing::CliResult df(std::vector<std::string> args) {
    args.insert(args.begin(), {"--project", kRoot.string(), "--trust-worktree"});
    args.insert(args.end(), {"--ledger", (dir_ / "ledger.db").string()});
    return testing::run_cli(kExe, args, dir_.path(), kEnv);
  }
  static double rel_l2(const J& report, const std::string& label) {
    for (const auto& c : report["stages"]["gate"]["cases"]) {
      if (c["case"] != label) continue;
      for (const auto& o : c["outputs"]) {
        for (const auto& m : o["metrics"]) {
          if (m["metric"] == "rel_l2") return m["value"].get<double>();
        }
      }
    }
    return -1;
  }
  testing::TempDir dir_;
};

TEST_F(Replay, AFailingCaseIsReplayedLinkedWithItsSeedAndAPrecisionSwapTurnsItGreen) {
  const auto first = df({"run", (kRoot / "experiments" / "cp-affine-chain-tf32.yaml").string(), "--no-bench", "--json", "--jobs", "2"});
  ASSERT_EQ(first.exit_code, 1) << first.out << first.err;
  const J r1 = J::parse(first.out);
  const double recorded = rel_l2(r1, kCase);
  ASSERT_GT(recorded, 1e-5) << first.out.substr(0, 2000);
  // Its next steps replay through densefeed, linked to it.
  bool linked = false;
  for (const auto& s : r1["next"]) linked = linked || s.value("command", J::array()).dump().find("\"--failing-of\",\"1\"") != std::string::npos;
  EXPECT_TRUE(linked) << r1["next"].dump(1);

  // The one case, from the recorded manifest, seed and profile: the same error.
  const auto again = df({"run", "--failing-of", "1", "--case", kCase, "--json"});
  ASSERT_EQ(again.exit_code, 1) << again.out << again.err;
  const J r2 = J::parse(again.out);
  EXPECT_EQ(r2["stages"]["gate"]["cases"].size(), 1u) << again.out.substr(0, 2000);
  EXPECT_DOUBLE_EQ(rel_l2(r2, kCase), recorded);
  const auto show = J::parse(df({"ledger", "show", "2", "--json"}).out);
  EXPECT_EQ(show["parent_id"], 1);
  EXPECT_EQ(show["step"], "replay");
  EXPECT_EQ(show["case_filter"], J::array({kCase}));
  EXPECT_EQ(show["gate_run"]["seed"], r1["seed"].is_string() ? r1["seed"] : J(std::to_string(r1["seed"].get<std::uint64_t>())));
  EXPECT_EQ(J::parse(df({"ledger", "show", "1", "--json"}).out)["children"], J::parse(R"([{"id": 2, "step": "replay"}])"));

  // Every red case (12 of the 29 in profile quick), none of the green.
  const auto all_red = df({"run", "--failing-of", "1", "--json"});
  ASSERT_EQ(all_red.exit_code, 1) << all_red.err;
  const J r3 = J::parse(all_red.out);
  std::size_t red = 0;
  for (const auto& c : r1["stages"]["gate"]["cases"]) red += c["verdict"] != "green";
  EXPECT_EQ(r3["stages"]["gate"]["cases"].size(), red);
  for (const auto& c : r3["stages"]["gate"]["cases"]) EXPECT_NE(c["verdict"], "green") << c.dump();

  // The precision swap the next step names: green with ieee.
  const auto ieee = df({"run", "--failing-of", "1", "--case", kCase, "--candidate-param", "precision=ieee", "--json"});
  EXPECT_EQ(ieee.exit_code, 0) << ieee.out.substr(0, 2000) << ieee.err;
  EXPECT_EQ(J::parse(df({"ledger", "show", "4", "--json"}).out)["candidate_params"]["precision"], "ieee");

  // Refused, naming what was given.
  const auto none = df({"run", "--failing-of", "1", "--case", "T=99"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("--case: field 'T=99': no case of profile quick of gate cp-affine-chain has T=99"), std::string::npos) << none.err;
  const auto bad = df({"run", "--failing-of", "1", "--case", "shards"});
  EXPECT_NE(bad.err.find("'shards' is not KEY=VALUE"), std::string::npos) << bad.err;
  const auto param = df({"run", "--failing-of", "1", "--candidate-param", "precision=fp7"});
  EXPECT_EQ(param.exit_code, 2) << param.err;
  const auto lone = df({"run", (kRoot / "experiments" / "cp-affine-chain-tf32.yaml").string(), "--candidate-param", "precision=ieee"});
  EXPECT_NE(lone.err.find("only with --failing-of"), std::string::npos) << lone.err;
  const auto green = df({"run", "--failing-of", "4"});
  EXPECT_NE(green.err.find("none of its cases is red"), std::string::npos) << green.err;
  const auto no_parent = df({"run", "--failing-of", "99"});
  EXPECT_NE(no_parent.err.find("no experiment with id 99"), std::string::npos) << no_parent.err;
  // The ledger refuses a parent that is not there, through plain SQL too.
  const auto sql = testing::run_cli("/usr/bin/sqlite3", {(dir_ / "ledger.db").string(),
                                                         "INSERT INTO experiments(name, manifest_path, manifest_text, manifest_sha256, "
                                                         "author, hypothesis, predicted_effect, gate, risk, candidate_revision, "
                                                         "candidate_params, base_revision, base_params, submitted_at, parent_id) "
                                                         "SELECT name, manifest_path, manifest_text, manifest_sha256, author, hypothesis, "
                                                         "predicted_effect, gate, risk, candidate_revision, candidate_params, "
                                                         "base_revision, base_params, submitted_at, 999 FROM experiments WHERE id = 1"},
                                    dir_.path());
  EXPECT_NE(sql.err.find("parent_id names no earlier experiment"), std::string::npos) << sql.out << sql.err;
}

TEST_F(Replay, ReproPrintsCommandsThatGiveTheRecordedErrorByHand) {
  const auto first = df({"run", (kRoot / "experiments" / "cp-affine-chain-tf32.yaml").string(), "--no-bench", "--json", "--jobs", "2"});
  ASSERT_EQ(first.exit_code, 1) << first.err;
  const double recorded = rel_l2(J::parse(first.out), kCase);
  const auto doc = df({"repro", "1", "regime=long-memory shards=2 T=8192", "--json", "--dir", (dir_ / "by-hand").string()});
  ASSERT_EQ(doc.exit_code, 0) << doc.out << doc.err;
  const J j = J::parse(doc.out);
  EXPECT_EQ(j["case"], kCase);
  EXPECT_EQ(j["sandbox"], "off");
  ASSERT_EQ(j["commands"].size(), 2u);
  EXPECT_EQ(j["commands"][0]["arm"], "reference");
  EXPECT_EQ(j["commands"][1]["env"]["DENSEFEED_SEED"], j["seed"]);
  const auto script = df({"repro", "1", kCase, "--dir", (dir_ / "by-hand").string()});
  ASSERT_EQ(script.exit_code, 0) << script.err;
  EXPECT_NE(script.out.find("# sandbox off"), std::string::npos) << script.out;
  testing::write_file(dir_ / "repro.sh", script.out);
  const auto ran = testing::run_cli("/bin/bash", {(dir_ / "repro.sh").string()}, dir_.path(), kEnv);
  // The compare at the end is red (exit 1) with the recorded error.
  EXPECT_EQ(ran.exit_code, 1) << ran.out << ran.err;
  EXPECT_NE(ran.out.find(fmt::format("rel_l2 {:.3e}", recorded)), std::string::npos) << recorded << "\n" << ran.out << ran.err;
  // A filter two cases share is refused, naming them.
  const auto two = df({"repro", "1", "shards=2"});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.err.find("cases have shards=2"), std::string::npos) << two.err;
}

}  // namespace
}  // namespace densefeed
