// Issue 15, "gates judge what they measure", through the real CLI on a
// Python/numpy harness built to show each rule:
// - a 64-shard output whose shard 37 alone is 3.3x over its rel_l2 bound while
//   the whole output is at 0.41x of it: red, naming slice 37 (an error of the
//   same total spread evenly stays green);
// - an error growing as K^1.6 across a sweep with every point under its bound:
//   red, with the fit named, by a trend bound of max_exponent 1 (K^0.5 stays green);
// - an atol + rtol gate against a reference peaking just above atol: an all-zero
//   candidate would pass, which the run report, the ledger and `gate show`
//   say; at ten times the amplitude the same bounds are not flagged.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::string kExe = DENSEFEED_EXE;

// reference: y = amp * z / max|z|, z ~ N(0, 1) from the seed (float64; peak |y| = amp).
// candidate modes: honest; shard37 (slice 37 of 64 scaled by 1 + 3.3e-5);
// spread (every element scaled by 1 + 3.3e-5 / 8: the same total rel_l2);
// grow16 / grow05 (every element scaled by 1 + 1e-9 * K^1.6 / 1e-7 * K^0.5).
const char* kHarness = R"(import argparse, os
import numpy as np
p = argparse.ArgumentParser()
p.add_argument('--role'); p.add_argument('--mode', default='honest'); p.add_argument('--n', type=int)
p.add_argument('--K', type=float, default=1); p.add_argument('--amp', type=float, default=1.0)
p.add_argument('--seed', type=int); p.add_argument('--out')
a = p.parse_args()
z = np.random.default_rng(a.seed).standard_normal(a.n)
y = a.amp * z / np.max(np.abs(z))
if a.role == 'candidate':
    if a.mode == 'shard37':
        s = a.n // 64
        y[37 * s:38 * s] *= 1 + 3.3e-5
    elif a.mode == 'spread':
        y *= 1 + 3.3e-5 / 8
    elif a.mode == 'grow16':
        y *= 1 + 1e-9 * a.K ** 1.6
    elif a.mode == 'grow05':
        y *= 1 + 1e-7 * a.K ** 0.5
np.save(os.path.join(a.out, 'y.npy'), y.astype(np.float64))
)";

std::string gate(const std::string& name, const std::string& extra_args, const std::string& output, const std::string& cases) {
  return "gate: " + name + "\ndescription: y = amp * normalised N(0,1), float64\n"
         "reference:\n  command: [python3, \"{project}/h.py\", --role, reference, " + extra_args +
         ", --seed, \"{seed}\", --out, \"{out}\"]\n"
         "candidate:\n  command: [python3, \"{project}/h.py\", --role, candidate, --mode, \"{param.mode}\", " + extra_args +
         ", --seed, \"{seed}\", --out, \"{out}\"]\n"
         "params:\n  mode: {type: string, enum: [honest, shard37, spread, grow16, grow05], default: honest}\n"
         "outputs:\n  y:\n    dtype: float64\n" + output +
         "cases:\n  grid:\n    - " + cases + "\nprofiles:\n  quick: {}\n  full: {}\ntimeout_s: 60\nfreezes: []\n";
}

class GateJudgement : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_ / "project";
    std::filesystem::create_directories(repo_);
    ASSERT_EQ(testing::locked_project(
                  repo_,
                  {{"h.py", kHarness},
                   {"gates/shards.yaml", gate("shards", "--n, \"{case.n}\"",
                                              "    tolerance: {rel_l2: 1.0e-5}\n    partition: {axis: 0, parts: 64}\n", "{n: [6400]}")},
                   {"gates/trend.yaml", gate("trend", "--n, \"256\", --K, \"{case.K}\"",
                                             "    tolerance: {rel_l2: 1.0e-5}\n    trend: {along: K, max_exponent: 1.0}\n",
                                             "{K: [16, 32, 64, 128, 256]}")},
                   {"gates/zero.yaml", gate("zero", "--n, \"4096\", --amp, \"{case.amp}\"",
                                            "    tolerance: {atol: 1.0e-3, rtol: 5.0e-2}\n    partition: {axis: 0, parts: 4}\n",
                                            "{amp: [1.05e-3, 1.05e-2]}")}},
                  kExe, env()),
              "");
  }
  std::map<std::string, std::string> env() const {
    return testing::project_env(dir_ / "home");
  }
  testing::CliResult df(std::vector<std::string> args) const { return testing::run_cli(kExe, args, repo_, env()); }
  std::string sh(const std::string& command) const {
    const auto r = testing::run_cli("/bin/sh", {"-c", command}, repo_, env());
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.out << r.err;
    return r.out + r.err;
  }
  // Runs gate `g` with candidate `mode`: text (json = false) or JSON report, and the exit code.
  testing::CliResult run(const std::string& g, const std::string& mode, bool json) {
    const auto m = dir_ / (g + "-" + mode + ".yaml");
    testing::write_file(m, "experiment: " + g + "-" + mode + "\nhypothesis: h\npredicted_effect: p\ngate: " + g +
                           "\ncandidate: {revision: WORKTREE, params: {mode: " + mode + "}}\n"
                           "base: {revision: WORKTREE, params: {mode: " + std::string(mode == "honest" ? "spread" : "honest") + "}}\n");
    std::vector<std::string> args = {"run", m.string(), "--no-bench"};
    if (json) args.push_back("--json");
    return df(args);
  }
  J sql_json(const std::string& query) const {
    const auto out = sh("sqlite3 -json " + (repo_ / ".densefeed" / "ledger.db").string() + " \"" + query + "\"");
    return out.empty() ? J::array() : J::parse(out, nullptr, false);
  }

  testing::TempDir dir_;
  std::filesystem::path repo_;
};

const J& output_y(const J& report, std::size_t case_index) {
  return report["stages"]["gate"]["cases"][case_index]["outputs"][0];
}

TEST_F(GateJudgement, OneShardOffIsRedNamingTheSliceWhileTheSameErrorSpreadEvenlyIsGreen) {
  const auto red = run("shards", "shard37", true);
  ASSERT_EQ(red.exit_code, 1) << red.out << red.err;
  const J r = J::parse(red.out);
  const J& y = output_y(r, 0);
  // The whole output passes its bound; only the slice does not.
  ASSERT_EQ(y["metrics"][0]["metric"], "rel_l2");
  EXPECT_TRUE(y["metrics"][0]["passed"]) << y.dump();
  EXPECT_NEAR(y["metrics"][0]["value"].get<double>(), 3.3e-5 / 8, 2e-6);
  EXPECT_EQ(y["first_failing_slice"], 37);
  EXPECT_EQ(y["slices"][37]["begin"], 37 * 100);
  EXPECT_EQ(y["slices"][37]["end"], 38 * 100);
  EXPECT_NEAR(y["slices"][37]["rel_l2"].get<double>(), 3.3e-5, 1e-9);
  std::size_t failing = 0;
  for (const auto& s : y["slices"]) failing += s["passed"] ? 0 : 1;
  EXPECT_EQ(failing, 1u);
  EXPECT_EQ(r["record"]["stages"]["gate"]["failure"]["kind"], "tolerance");
  EXPECT_EQ(r["record"]["stages"]["gate"]["failure"]["metric"], "slice");
  EXPECT_EQ(y["passing_wrong_candidates"], J::array()) << "a rel_l2 bound of 1e-5 cannot pass zeros";
  // The text report says so too.
  const auto text = run("shards", "shard37", false);
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find("first failing slice along axis 0: 37 (positions 3700..3799)"), std::string::npos) << text.out;
  // The ledger holds the case red with the slice.
  const J rows = sql_json("SELECT c.verdict, c.failure_metric, m.first_failing_slice FROM gate_cases c JOIN gate_metrics m "
                          "ON m.gate_case_id = c.id JOIN gate_runs g ON g.id = c.gate_run_id WHERE g.experiment_id = 1");
  ASSERT_EQ(rows.size(), 1u) << rows.dump();
  EXPECT_EQ(rows[0]["verdict"], "red");
  EXPECT_EQ(rows[0]["failure_metric"], "slice");
  EXPECT_EQ(rows[0]["first_failing_slice"], 37);
  // The same total error spread over every slice: green.
  const auto even = run("shards", "spread", true);
  EXPECT_EQ(even.exit_code, 0) << even.out << even.err;
}

TEST_F(GateJudgement, AnErrorGrowingAsKToThe16IsRedWithTheFitThoughEveryPointIsUnderItsBound) {
  const auto red = run("trend", "grow16", true);
  ASSERT_EQ(red.exit_code, 1) << red.out << red.err;
  const J r = J::parse(red.out);
  const auto& cases = r["stages"]["gate"]["cases"];
  ASSERT_EQ(cases.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    const J& m = cases[i]["outputs"][0]["metrics"][0];
    EXPECT_TRUE(m["passed"]) << "every point is under its bound: " << m.dump();
    EXPECT_LT(m["value"].get<double>(), 1e-5);
    EXPECT_EQ(cases[i]["verdict"], "red") << cases[i].dump();
    EXPECT_NE(cases[i]["reason"].get<std::string>().find("rel_l2 ~ K^1.60 (R^2 1.00) across K 16..256"), std::string::npos)
        << cases[i]["reason"];
  }
  const auto& bounds = r["stages"]["gate"]["trend_bounds"];
  ASSERT_EQ(bounds.size(), 1u) << bounds.dump();
  EXPECT_FALSE(bounds[0]["passed"]);
  EXPECT_NEAR(bounds[0]["exponent"].get<double>(), 1.6, 0.01);
  EXPECT_EQ(bounds[0]["points"], 5);
  EXPECT_EQ(bounds[0]["cases"].size(), 5u);
  EXPECT_EQ(r["record"]["stages"]["gate"]["failure"]["kind"], "trend");
  EXPECT_EQ(r["record"]["stages"]["gate"]["failure"]["metric"], "rel_l2");
  const J kinds = sql_json("SELECT c.failure_kind, c.failure_output, c.failure_metric FROM gate_cases c JOIN gate_runs g "
                           "ON g.id = c.gate_run_id WHERE g.experiment_id = 1");
  ASSERT_EQ(kinds.size(), 5u);
  for (const auto& k : kinds) {
    EXPECT_EQ(k["failure_kind"], "trend");
    EXPECT_EQ(k["failure_output"], "y");
  }
  const auto text = run("trend", "grow16", false);
  EXPECT_NE(text.out.find("trend bound: OVER: y: rel_l2 ~ K^1.60"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("over the gate's max_exponent 1"), std::string::npos) << text.out;
  // Growth within the bound is green, and the fit is still shown.
  const auto slow = run("trend", "grow05", true);
  ASSERT_EQ(slow.exit_code, 0) << slow.out << slow.err;
  const J s = J::parse(slow.out);
  EXPECT_TRUE(s["stages"]["gate"]["trend_bounds"][0]["passed"]);
  EXPECT_NEAR(s["stages"]["gate"]["trend_bounds"][0]["exponent"].get<double>(), 0.5, 0.01);
  // An exact candidate has no error to fit: not judged, green.
  EXPECT_EQ(run("trend", "honest", false).exit_code, 0);
}

TEST_F(GateJudgement, ABoundThatAZeroOutputWouldPassIsFlaggedInTheReportTheLedgerAndGateShow) {
  const auto before = df({"gate", "show", "zero"});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_NE(before.out.find("could it fail? unknown"), std::string::npos) << before.out;
  const auto run_json = run("zero", "honest", true);
  ASSERT_EQ(run_json.exit_code, 0) << run_json.out << run_json.err;
  const J r = J::parse(run_json.out);
  const J& low = output_y(r, 0);
  ASSERT_EQ(r["stages"]["gate"]["cases"][0]["values"]["amp"], 1.05e-3);
  // Under 1e-3 + 5e-2 * |r| every |r| <= 1.0526e-3 is within the bound of 0.
  EXPECT_EQ(low["passing_wrong_candidates"][0], "zeros") << low.dump();
  EXPECT_NE(std::find(low["passing_wrong_candidates"].begin(), low["passing_wrong_candidates"].end(), "last_partition_zeroed"),
            low["passing_wrong_candidates"].end());
  EXPECT_FALSE(low["judged_relative"]) << "the reference peaks above atol: the absolute bound applies";
  EXPECT_EQ(output_y(r, 1)["passing_wrong_candidates"], J::array()) << "at 10x atol the bound rejects zeros";
  const auto text = run("zero", "honest", false);
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("case amp=0.00105: y: this case cannot tell a zero output from the reference"), std::string::npos)
      << text.out;
  EXPECT_EQ(text.out.find("case amp=0.0105: y: this case cannot tell"), std::string::npos) << text.out;
  // The ledger records it per case.
  const J spots = sql_json("SELECT case_label, candidate FROM gate_blind_spots WHERE gate_run_id = 2 ORDER BY case_index, candidate");
  ASSERT_GE(spots.size(), 2u) << spots.dump();
  for (const auto& s : spots) EXPECT_EQ(s["case_label"], "amp=0.00105");
  const J cases = sql_json("SELECT case_label, passing_wrong_candidates FROM gate_cases WHERE gate_run_id = 2 ORDER BY case_index");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[1]["passing_wrong_candidates"], "[]");
  // gate show, for the gate's owner.
  const auto show = df({"gate", "show", "zero"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("case amp=0.00105: y: this case cannot tell a zero output from the reference"), std::string::npos)
      << show.out;
  EXPECT_EQ(show.out.find("case amp=0.0105:"), std::string::npos) << show.out;
  const auto show_json = df({"gate", "show", "zero", "--json"});
  const J sj = J::parse(show_json.out);
  EXPECT_EQ(sj["wrong_candidates"]["gate_run_id"], 2);
  EXPECT_EQ(sj["wrong_candidates"]["cases"][0]["candidate"], "zeros");
  // A tight gate is said to be able to fail.
  ASSERT_EQ(run("shards", "honest", false).exit_code, 0);
  const auto tight = df({"gate", "show", "shards"});
  EXPECT_NE(tight.out.find("could it fail? yes"), std::string::npos) << tight.out;
}

TEST_F(GateJudgement, ATrendBoundAlongAKeyTheCasesDoNotSweepIsBadInput) {
  testing::write_file(repo_ / "gates" / "shards.yaml",
                      gate("shards", "--n, \"{case.n}\"", "    tolerance: {rel_l2: 1.0e-5}\n    trend: {along: n, max_exponent: 1}\n",
                           "{n: [6400]}"));
  sh("git add -A && git commit -qm trend-on-one-point");
  const auto show = df({"gate", "show", "shards"});
  EXPECT_EQ(show.exit_code, 2) << show.out << show.err;
  EXPECT_NE(show.err.find("outputs.y.trend.along"), std::string::npos) << show.err;
}

}  // namespace
}  // namespace densefeed
