// Issue 27, one experiment record: for every bundled example, `run --json`,
// `status --json` and `ledger show --json` are one document (with views):
// wherever two of them hold the same key path they hold the same value, and
// `next` is identical in all three. The examples are densefeed's own
// experiments/, run on the CPU through the real CLI into a real ledger.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "schema_validator.h"
#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;

// Every path present in both `a` and `b` whose values differ, "/stages/gate/reason".
// Objects are compared key by key over the keys they share; arrays of the same
// length element by element; anything else (arrays of other lengths too) whole.
void differences(const J& a, const J& b, const std::string& path, std::vector<std::string>& out) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [key, value] : a.items()) {
      if (b.contains(key)) differences(value, b[key], path + "/" + key, out);
    }
    return;
  }
  if (a.is_array() && b.is_array() && a.size() == b.size()) {
    for (std::size_t i = 0; i < a.size(); ++i) differences(a[i], b[i], path + "/" + std::to_string(i), out);
    return;
  }
  if (a != b) out.push_back(path + ": " + a.dump().substr(0, 200) + " against " + b.dump().substr(0, 200));
}

// How many leaf paths `a` and `b` share: the overlap the test compares must
// not be empty for the comparison to mean anything.
std::size_t shared_leaves(const J& a, const J& b) {
  if (a.is_object() && b.is_object()) {
    std::size_t n = 0;
    for (const auto& [key, value] : a.items()) {
      if (b.contains(key)) n += shared_leaves(value, b[key]);
    }
    return n;
  }
  if (a.is_array() && b.is_array() && a.size() == b.size() && !a.empty()) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < a.size(); ++i) n += shared_leaves(a[i], b[i]);
    return n;
  }
  return 1;
}

class OneRecord : public ::testing::TestWithParam<std::tuple<std::string, std::vector<std::string>>> {
 protected:
  testing::CliResult densefeed(std::vector<std::string> args) {
    args.insert(args.begin(), {"--project", kRoot.string(), "--trust-worktree"});
    return testing::run_cli(kExe, args, dir_.path(), testing::with_on_path(std::filesystem::path(kExe).parent_path()));
  }
  testing::TempDir dir_;
};

TEST(OneRecordCompare, TheComparisonFindsADifferenceAndCountsTheOverlap) {
  std::vector<std::string> diffs;
  differences(J::parse(R"({"a": 1, "s": {"x": [1, 2], "y": "r"}, "only": 3})"), J::parse(R"({"a": 1, "s": {"x": [1, 3], "z": 0}})"), "", diffs);
  EXPECT_EQ(diffs, std::vector<std::string>{"/s/x/1: 2 against 3"});
  EXPECT_EQ(shared_leaves(J::parse(R"({"a": 1, "s": {"x": [1, 2]}})"), J::parse(R"({"a": 2, "s": {"x": [1, 2]}, "b": 0})")), 3u);
}

TEST_P(OneRecord, RunStatusAndLedgerShowAgreeWhereTheyOverlapAndGiveOneNext) {
  const auto& [manifest, flags] = GetParam();
  const std::string ledger = (dir_ / "ledger.db").string();
  std::vector<std::string> run_args = {"run", (kRoot / "experiments" / manifest).string(), "--ledger", ledger, "--json", "--jobs", "2"};
  run_args.insert(run_args.end(), flags.begin(), flags.end());
  const auto run = densefeed(run_args);
  ASSERT_TRUE(run.exit_code == 0 || run.exit_code == 1) << run.out.substr(0, 3000) << run.err;
  const J r = J::parse(run.out);
  const std::string id = std::to_string(r["experiment_id"].get<std::int64_t>());
  const auto status = densefeed({"status", id, "--ledger", ledger, "--json"});
  ASSERT_EQ(status.exit_code, run.exit_code) << status.out.substr(0, 2000) << status.err;
  const J s = J::parse(status.out);
  const auto show = densefeed({"ledger", "show", id, "--ledger", ledger, "--json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  const J l = J::parse(show.out);

  for (const auto& [name, doc, schema] : {std::tuple{"run", &r, "run-report"}, std::tuple{"status", &s, "status"},
                                          std::tuple{"ledger show", &l, "ledger-show"}}) {
    const SchemaValidator validator(kRoot / "schemas" / (std::string(schema) + ".schema.json"));
    EXPECT_EQ(validator.errors(*doc), std::vector<std::string>{}) << name;
  }
  const std::vector<std::pair<std::string, std::pair<const J*, const J*>>> pairs = {
      {"run / status", {&r, &s}}, {"run / ledger show", {&r, &l}}, {"status / ledger show", {&s, &l}}};
  for (const auto& [what, docs] : pairs) {
    std::vector<std::string> diffs;
    differences(*docs.first, *docs.second, "", diffs);
    EXPECT_EQ(diffs, std::vector<std::string>{}) << what;
    // The stages, the record and next at least are shared.
    EXPECT_GT(shared_leaves(*docs.first, *docs.second), 40u) << what;
  }
  ASSERT_TRUE(r["next"].is_array());
  EXPECT_EQ(r["next"], s["next"]);
  EXPECT_EQ(r["next"], l["next"]);
  // Status and ledger show print the record's document itself: its stages
  // whole; the run adds its view (processes, placements) beside them.
  EXPECT_EQ(s["stages"], l["stages"]);
  for (const J* doc : {&r, &s, &l}) {
    EXPECT_EQ((*doc)["verdict"], r["record"]["verdict"]);
    EXPECT_EQ((*doc)["stages"]["gate"]["failing_cases"], s["stages"]["gate"]["failing_cases"]);
    EXPECT_EQ((*doc)["stages"]["bench"]["cases"].size(), s["stages"]["bench"]["cases"].size());
  }
}

// Each bundled example of experiments/ (fla-intracard-cp needs fla-core and a
// GPU: fla_example_test checks its manifests). kda-decode and kv-transfer run
// without their benchmarks here (their own tests time them); tf32x3 keeps its
// benchmark, so that bench cases are compared, and kv-transfer its trace stage.
INSTANTIATE_TEST_SUITE_P(
    BundledExamples, OneRecord,
    ::testing::Values(std::tuple{std::string("cp-affine-chain-tf32.yaml"), std::vector<std::string>{}},
                      std::tuple{std::string("cp-affine-chain-tf32x3.yaml"), std::vector<std::string>{"--profile", "quick"}},
                      std::tuple{std::string("kda-decode-merge-vtiles.yaml"), std::vector<std::string>{"--profile", "quick", "--no-bench"}},
                      std::tuple{std::string("kv-transfer-release-lock.yaml"), std::vector<std::string>{"--no-bench"}}),
    [](const auto& info) {
      std::string name = std::get<0>(info.param);
      name = name.substr(0, name.find('.'));
      std::string out;
      for (const char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return out;
    });

}  // namespace
}  // namespace densefeed
