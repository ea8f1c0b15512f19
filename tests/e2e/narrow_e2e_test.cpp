// `densefeed narrow ID`, through the real CLI: from a red experiment,
// densefeed itself runs the cheapest discriminating experiments (reruns with
// the same seed, the exact precision, a bisected partition key, the commits
// since the last green revision), each recorded as a child of ID, and names
// the layer at fault in one document:
// - the bundled tf32 example (red at every shards > 1): the precision of the
//   partitioned products, in at most four experiments;
// - a foreign project of its own (tests/e2e/narrow/: a chunked recurrence
//   whose parts hand their state on, pure Python): seven commits on a branch
//   where the fifth of eight drops the carry, a racy candidate, a candidate
//   wrong everywhere, a budget that binds, and what is refused.
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "schema_validator.h"
#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::filesystem::path kFixture = kRoot / "tests" / "e2e" / "narrow";
const std::string kExe = DENSEFEED_EXE;

const std::set<std::string> kLayers = {"precision-of-partitioning", "precision", "partitioned-algorithm", "commit",
                                       "input-regime", "nondeterminism", "algorithm-or-inputs", "undetermined"};
const std::set<std::string> kKinds = {"rerun", "precision", "bisect-key", "bisect-commit"};
const std::set<std::string> kStopped = {"cause clear", "budget", "no further step"};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Every field of narrow's document, and every step's experiment recorded in
// the ledger as a child of `id` with the step's text (`show(N)` is `ledger
// show N --json`). `fresh`: this was the first narrowing of `id`, so its
// children are exactly the steps, in order.
void expect_narrow_document(J doc, int id, const std::function<J(int)>& show, bool fresh = true) {
  ASSERT_TRUE(doc.is_object()) << doc.dump(1);
  if (const auto schema = kRoot / "schemas" / "narrow.schema.json"; std::filesystem::exists(schema)) {
    EXPECT_EQ(SchemaValidator(schema).errors(doc), std::vector<std::string>{}) << doc.dump(1);
  }
  EXPECT_EQ(doc["experiment"], id) << doc.dump(1);
  EXPECT_TRUE(doc["gate"].is_string()) << doc.dump(1);
  ASSERT_TRUE(doc["layer"].is_string()) << doc.dump(1);
  EXPECT_TRUE(kLayers.contains(doc["layer"].get<std::string>())) << doc["layer"];
  ASSERT_TRUE(doc["conclusion"].is_string()) << doc.dump(1);
  EXPECT_FALSE(doc["conclusion"].get<std::string>().empty());
  EXPECT_EQ(doc.contains("commit"), doc["layer"] == "commit") << doc.dump(1);
  ASSERT_TRUE(doc["reruns"].is_object()) << doc.dump(1);
  ASSERT_TRUE(doc["reruns"]["red"].is_number_integer() && doc["reruns"]["of"].is_number_integer()) << doc["reruns"];
  EXPECT_GE(doc["reruns"]["red"].get<int>(), 0);
  EXPECT_LE(doc["reruns"]["red"].get<int>(), doc["reruns"]["of"].get<int>());
  ASSERT_TRUE(doc["seconds"].is_number() && doc["budget_s"].is_number()) << doc.dump(1);
  EXPECT_GE(doc["seconds"].get<double>(), 0);
  EXPECT_GT(doc["budget_s"].get<double>(), 0);
  ASSERT_TRUE(doc["stopped"].is_string()) << doc.dump(1);
  EXPECT_TRUE(kStopped.contains(doc["stopped"].get<std::string>())) << doc["stopped"];
  ASSERT_TRUE(doc["steps"].is_array()) << doc.dump(1);
  ASSERT_TRUE(doc["experiments"].is_number_integer()) << doc.dump(1);
  std::set<int> ran;
  J children = J::array();
  for (J s : doc["steps"]) {
    ASSERT_TRUE(s["experiment"].is_number_integer()) << s.dump();
    const int child = s["experiment"].get<int>();
    EXPECT_GT(child, id) << s.dump();
    const std::string kind = s.value("kind", "");
    EXPECT_TRUE(kKinds.contains(kind)) << s.dump();
    const std::string step = s.value("step", "");
    const std::string prefix = kind == "rerun" ? "rerun" : kind == "precision" ? "precision" : "bisect";
    EXPECT_EQ(step.rfind(prefix, 0), 0u) << "a " << kind << " step's text starts with '" << prefix << "': " << s.dump();
    ASSERT_TRUE(s["cases"].is_number_integer() && s["red"].is_number_integer()) << s.dump();
    EXPECT_GE(s["cases"].get<int>(), 1) << s.dump();
    EXPECT_GE(s["red"].get<int>(), 0) << s.dump();
    EXPECT_LE(s["red"].get<int>(), s["cases"].get<int>()) << s.dump();
    EXPECT_TRUE(s["seconds"].is_number()) << s.dump();
    EXPECT_TRUE(s["shows"].is_string()) << s.dump();
    if (ran.insert(child).second) children.push_back({{"id", child}, {"step", step}});
    J recorded = show(child);
    EXPECT_EQ(recorded["parent_id"], id) << "experiment " << child << ": " << recorded.dump().substr(0, 2000);
    EXPECT_EQ(recorded["step"], step) << "experiment " << child;
  }
  EXPECT_EQ(doc["experiments"].get<std::size_t>(), ran.size()) << doc.dump(1);
  if (fresh) {
    EXPECT_EQ(show(id)["children"], children);
  }
}

std::vector<J> steps_of_kind(J doc, const std::string& kind) {
  std::vector<J> out;
  for (J s : doc["steps"]) {
    if (s.value("kind", "") == kind) out.push_back(s);
  }
  return out;
}

// Both projects the tests run in; a test uses one.
class NarrowE2E : public ::testing::Test {
 protected:
  // The bundled project (densefeed's own checkout, its gates as they are)
  // with a ledger of the test's own.
  testing::CliResult bundled(std::vector<std::string> args) {
    args.insert(args.begin(), {"--project", kRoot.string(), "--trust-worktree"});
    args.insert(args.end(), {"--ledger", (dir_ / "ledger.db").string()});
    return testing::run_cli(kExe, args, dir_.path(), testing::with_on_path(std::filesystem::path(kExe).parent_path()));
  }
  J show_bundled(int id) {
    const auto r = bundled({"ledger", "show", std::to_string(id), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return J::parse(r.out, nullptr, false);
  }

  // A foreign project, tests/e2e/narrow/ in a git repository of its own:
  // commit 1 on main holds densefeed.yaml, the gate, its harnesses and the
  // lock (locked from the folder before the repository exists, so that main
  // has one commit). Runs there use the project's own ledger.
  void make_repo() {
    repo_ = dir_ / "carry";
    testing::write_file(repo_ / "densefeed.yaml", testing::read_file(kFixture / "project.yaml"));
    testing::write_file(repo_ / ".gitignore", ".densefeed/\n__pycache__/\n");
    for (const char* f : {"README.md", "gates/carry-scan.yaml", "harness/carry_inputs.py", "harness/carry_reference.py",
                          "harness/carry_scan.py"}) {
      const std::string text = testing::read_file(kFixture / f);
      ASSERT_FALSE(text.empty()) << kFixture / f;
      testing::write_file(repo_ / f, text);
    }
    testing::write_file(repo_ / "gates" / "gates.lock", "");
    const auto lock = testing::run_cli(kExe, {"--project", repo_.string(), "--trust-worktree", "gate", "lock"}, repo_, env());
    ASSERT_EQ(lock.exit_code, 0) << lock.out << lock.err;
    ASSERT_EQ(testing::git_init_main(repo_, "carry-scan: gate, harnesses and lock"), "");
  }
  std::map<std::string, std::string> env() const { return testing::project_env(dir_ / "home"); }
  testing::CliResult df(const std::vector<std::string>& args) const { return testing::run_cli(kExe, args, repo_, env()); }
  J show(int id) const {
    const auto r = df({"ledger", "show", std::to_string(id), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return J::parse(r.out, nullptr, false);
  }
  std::string head() const { return testing::git(repo_, {"rev-parse", "HEAD"}).out.substr(0, 40); }

  // Runs manifests/NAME.yaml (written outside the repository, so that the
  // worktree stays clean, and left there: narrow replays the manifest the
  // experiment recorded; @CANDIDATE@ replaced by `candidate`) in profile
  // quick unless `extra` says otherwise: {exit code, run report}.
  std::pair<int, J> run(const std::string& name, const std::string& candidate = "", std::vector<std::string> extra = {}) const {
    std::string text = testing::read_file(kFixture / "manifests" / (name + ".yaml"));
    EXPECT_FALSE(text.empty()) << name;
    for (auto at = text.find("@CANDIDATE@"); at != std::string::npos; at = text.find("@CANDIDATE@", at + candidate.size())) {
      text.replace(at, 11, candidate);
    }
    const auto path = dir_ / "manifests" / (name + ".yaml");
    testing::write_file(path, text);
    std::vector<std::string> args = {"run", path.string(), "--no-bench", "--json", "--jobs", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = df(args);
    return {r.exit_code, J::parse(r.out.empty() ? "{}" : r.out, nullptr, false)};
  }
  static std::map<std::string, int> red_by_shards(J report) {
    std::map<std::string, int> red;
    for (J c : report["stages"]["gate"]["cases"]) {
      red[std::to_string(c["values"]["shards"].get<int>())] += c["verdict"] != "green";
    }
    return red;
  }
  static int red_cases(J report) {
    int red = 0;
    for (J c : report["stages"]["gate"]["cases"]) red += c["verdict"] != "green";
    return red;
  }
  J narrow(int id, std::vector<std::string> extra, int expected_exit = 0) const {
    std::vector<std::string> args = {"narrow", std::to_string(id), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = df(args);
    EXPECT_EQ(r.exit_code, expected_exit) << r.out << r.err;
    return J::parse(r.out, nullptr, false);
  }

  // Commits 2..8 on branch `cleanups` off main (commit 1): harmless
  // clean-ups (README lines, comments in the candidate), except commit 5,
  // which hands every part after the first a zero state instead of the one
  // the part before it ends with. Returns the shas by commit number (1..8);
  // main is checked out again after.
  std::map<int, std::string> branch_breaking_the_carry_at_commit_5() {
    std::map<int, std::string> sha = {{1, head()}};
    EXPECT_EQ(testing::git(repo_, {"checkout", "-q", "-b", "cleanups"}).exit_code, 0);
    for (int i = 2; i <= 8; ++i) {
      if (i == 5) {
        const auto path = repo_ / "harness" / "carry_scan.py";
        std::string text = testing::read_file(path);
        const std::string from = "        carried = state  # the state handed to the next part\n";
        const auto at = text.find(from);
        EXPECT_NE(at, std::string::npos) << "harness/carry_scan.py no longer has the line commit 5 breaks: " << from;
        if (at == std::string::npos) return {};
        text.replace(at, from.size(), "        carried = np.zeros_like(state)  # the state handed to the next part\n");
        testing::write_file(path, text);
      } else if (i % 2 == 0) {
        testing::write_file(repo_ / "README.md", testing::read_file(repo_ / "README.md") + fmt::format("\n- clean-up {}\n", i));
      } else {
        const auto path = repo_ / "harness" / "carry_scan.py";
        testing::write_file(path, testing::read_file(path) + fmt::format("# clean-up {}: nothing the gate measures\n", i));
      }
      EXPECT_EQ(testing::git_commit_all(repo_, subject(i)), "");
      sha[i] = head();
    }
    EXPECT_EQ(testing::git(repo_, {"checkout", "-q", "main"}).exit_code, 0);
    return sha;
  }
  static std::string subject(int i) {
    return i == 5 ? "commit 5: each part scans from a fresh state" : fmt::format("commit {}: clean-up", i);
  }

  testing::TempDir dir_;
  std::filesystem::path repo_;
};

TEST_F(NarrowE2E, TheTf32ExampleNamesThePrecisionOfThePartitionedProductsInAtMostFourExperiments) {
  const auto first = bundled({"run", (kRoot / "experiments" / "cp-affine-chain-tf32.yaml").string(), "--no-bench", "--json", "--jobs", "2"});
  ASSERT_EQ(first.exit_code, 1) << first.out.substr(0, 2000) << first.err;
  ASSERT_EQ(J::parse(first.out)["experiment_id"], 1);

  const auto narrow = bundled({"narrow", "1", "--budget", "10m", "--json"});
  ASSERT_EQ(narrow.exit_code, 0) << narrow.out << narrow.err;
  J doc = J::parse(narrow.out, nullptr, false);
  expect_narrow_document(doc, 1, [this](int id) { return show_bundled(id); });
  EXPECT_EQ(doc["gate"], "cp-affine-chain");
  EXPECT_EQ(doc["layer"], "precision-of-partitioning") << doc.dump(1);
  EXPECT_LE(doc["experiments"].get<int>(), 4) << doc.dump(1);
  EXPECT_EQ(doc["budget_s"].get<double>(), 600);
  EXPECT_NE(doc["stopped"], "budget") << doc.dump(1);
  const std::string conclusion = lower(doc["conclusion"].get<std::string>());
  EXPECT_NE(conclusion.find("precision"), std::string::npos) << conclusion;
  EXPECT_NE(conclusion.find("partition"), std::string::npos) << conclusion;
  // The tf32 error is deterministic: every red case is red again.
  ASSERT_FALSE(doc["steps"].empty());
  EXPECT_EQ(doc["steps"][0]["kind"], "rerun") << doc.dump(1);
  EXPECT_EQ(doc["steps"][0]["red"], doc["steps"][0]["cases"]) << doc["steps"][0].dump();
  EXPECT_GT(doc["reruns"]["of"].get<int>(), 0);
  EXPECT_EQ(doc["reruns"]["red"], doc["reruns"]["of"]) << doc["reruns"];
  // The exact precision turns every red case green.
  auto precision = steps_of_kind(doc, "precision");
  ASSERT_EQ(precision.size(), 1u) << doc.dump(1);
  EXPECT_EQ(precision[0]["red"], 0) << precision[0].dump();
  J swapped = show_bundled(precision[0]["experiment"].get<int>());
  EXPECT_NE(swapped["candidate_params"]["precision"], "tf32") << swapped["candidate_params"];
  EXPECT_EQ(swapped["candidate_params"]["precision"], "ieee") << swapped["candidate_params"];
}

TEST_F(NarrowE2E, EightCommitsWhereTheFifthBreaksTheStateCarryNamesCommitFive) {
  ASSERT_NO_FATAL_FAILURE(make_repo());
  const auto sha = branch_breaking_the_carry_at_commit_5();
  ASSERT_EQ(sha.size(), 8u);
  auto [code, report] = run("carry-at-revision", sha.at(8));
  ASSERT_EQ(code, 1) << report.dump(1);
  ASSERT_EQ(report["candidate"]["sha"], sha.at(8));
  // As the gate is meant to see it: red wherever a state is handed on.
  EXPECT_EQ(red_by_shards(report), (std::map<std::string, int>{{"1", 0}, {"2", 4}, {"4", 4}})) << report.dump(1);
  const int id = report["experiment_id"].get<int>();

  J doc = narrow(id, {});
  expect_narrow_document(doc, id, [this](int n) { return show(n); });
  EXPECT_EQ(doc["gate"], "carry-scan");
  EXPECT_EQ(doc["layer"], "commit") << doc.dump(1);
  EXPECT_EQ(doc["commit"]["sha"], sha.at(5)) << doc.dump(1) << "\ncommit 5 is " << sha.at(5);
  EXPECT_EQ(doc["commit"]["subject"], subject(5)) << doc.dump(1);
  EXPECT_LE(doc["experiments"].get<int>(), 5) << doc.dump(1);
  EXPECT_EQ(doc["budget_s"].get<double>(), 600) << "--budget defaults to 10m";
  EXPECT_NE(doc["stopped"], "budget") << doc.dump(1);
  EXPECT_EQ(doc["reruns"]["red"], doc["reruns"]["of"]) << "a dropped carry is deterministic: " << doc["reruns"];
  // Each commit tried is one of the branch's, at most the three a binary
  // search over commits 2..7 needs (commit 8 is the red one itself).
  const auto bisect = steps_of_kind(doc, "bisect-commit");
  EXPECT_FALSE(bisect.empty()) << doc.dump(1);
  EXPECT_LE(bisect.size(), 3u) << doc.dump(1);
  std::set<std::string> branch;
  for (int i = 2; i <= 8; ++i) branch.insert(sha.at(i));
  for (J s : bisect) {
    J child = show(s["experiment"].get<int>());
    EXPECT_TRUE(branch.contains(child.value("candidate_sha", ""))) << child.value("candidate_sha", "") << " " << s.dump();
  }
}

TEST_F(NarrowE2E, ARacyCandidateIsNondeterministicKOfNRerunsRed) {
  ASSERT_NO_FATAL_FAILURE(make_repo());
  // Half of the cases are hit in a run, drawn from os.urandom: a first run
  // (profile full, 24 cases) with at least 10 red, so that a rerun of them
  // all red again (or all green) is a 1-in-1000 chance, not a flaky test
  // (at most 8 tries; each misses with probability 0.15).
  int id = 0;
  int red = 0;
  for (int attempt = 0; attempt < 8 && red < 10; ++attempt) {
    auto [code, report] = run("carry-racy", "", {"--profile", "full"});
    ASSERT_TRUE(code == 0 || code == 1) << report.dump(1);
    ASSERT_EQ(report["stages"]["gate"]["cases"].size(), 24u) << report.dump(1);
    id = report["experiment_id"].get<int>();
    red = red_cases(report);
  }
  ASSERT_GE(red, 10) << "eight runs of a candidate hit in half of its cases never had 10 of 24 red";

  J doc = narrow(id, {"--budget", "600"});
  expect_narrow_document(doc, id, [this](int n) { return show(n); });
  EXPECT_EQ(doc["layer"], "nondeterminism") << doc.dump(1);
  EXPECT_EQ(doc["budget_s"].get<double>(), 600);
  const int k = doc["reruns"]["red"].get<int>();
  const int n = doc["reruns"]["of"].get<int>();
  EXPECT_GT(k, 0) << doc["reruns"];
  EXPECT_LT(k, n) << doc["reruns"];
  const std::string conclusion = doc["conclusion"].get<std::string>();
  EXPECT_NE(conclusion.find("nondeterministic: "), std::string::npos) << conclusion;
  EXPECT_NE(conclusion.find(" reruns red"), std::string::npos) << conclusion;
  EXPECT_NE(conclusion.find(fmt::format("nondeterministic: {} of {} reruns red", k, n)), std::string::npos) << conclusion;
  // Only reruns tell it: nothing is bisected on a candidate that is not repeatable.
  for (J s : doc["steps"]) EXPECT_EQ(s["kind"], "rerun") << s.dump();
  EXPECT_GE(doc["steps"].size(), 1u);
}

// The hostile trial's marker: a revision candidate that writes a mark into
// its compile cache and is wrong only where it finds none. Narrow's reruns
// (and a replay) get an empty cache of their own, so it is red again every
// time: deterministic, never "nondeterministic".
TEST_F(NarrowE2E, ACandidateMarkingItsCacheCannotTellARerunFromAFirstRun) {
  ASSERT_NO_FATAL_FAILURE(make_repo());
  auto [code, report] = run("carry-marker", head());
  ASSERT_EQ(code, 1) << report.dump(1).substr(0, 3000);
  const int id = report["experiment_id"].get<int>();
  J doc = narrow(id, {"--budget", "300"});
  EXPECT_NE(doc["layer"], "nondeterminism") << doc.dump(1);
  EXPECT_EQ(doc["reruns"]["red"], doc["reruns"]["of"]) << doc.dump(1);
  EXPECT_GT(doc["reruns"]["of"].get<int>(), 0) << doc.dump(1);
  const auto replay = df({"run", "--failing-of", std::to_string(id), "--json"});
  EXPECT_EQ(replay.exit_code, 1) << replay.out.substr(0, 2000) << replay.err;
}

TEST_F(NarrowE2E, ACandidateRedEverywhereNamesTheAlgorithmOrInputsNotThePartitioning) {
  ASSERT_NO_FATAL_FAILURE(make_repo());
  auto [code, report] = run("carry-scaled");
  ASSERT_EQ(code, 1) << report.dump(1);
  ASSERT_EQ(red_by_shards(report), (std::map<std::string, int>{{"1", 4}, {"2", 4}, {"4", 4}})) << report.dump(1);
  const int id = report["experiment_id"].get<int>();

  J doc = narrow(id, {"--budget", "90s"});
  expect_narrow_document(doc, id, [this](int n) { return show(n); });
  EXPECT_EQ(doc["layer"], "algorithm-or-inputs") << doc.dump(1);
  EXPECT_EQ(doc["budget_s"].get<double>(), 90);
  EXPECT_EQ(doc["reruns"]["red"], doc["reruns"]["of"]) << doc["reruns"];
  const std::string conclusion = lower(doc["conclusion"].get<std::string>());
  EXPECT_TRUE(conclusion.find("algorithm") != std::string::npos || conclusion.find("input") != std::string::npos) << conclusion;
  // A WORKTREE candidate: no commit to blame.
  EXPECT_TRUE(steps_of_kind(doc, "bisect-commit").empty()) << doc.dump(1);

  // The same for people: a line "layer: ...".
  const auto text = df({"narrow", std::to_string(id)});
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  bool layer_line = false;
  std::istringstream lines(text.out);
  for (std::string line; std::getline(lines, line);) {
    layer_line = layer_line || (line.rfind("layer: ", 0) == 0 && line.find("algorithm-or-inputs") != std::string::npos);
  }
  EXPECT_TRUE(layer_line) << text.out;
}

TEST_F(NarrowE2E, ItNeverExceedsItsBudget) {
  ASSERT_NO_FATAL_FAILURE(make_repo());
  // Narrowed in full this takes a rerun and up to three commits (about 10 s
  // here); 3 s allows a step or two at most.
  const auto sha = branch_breaking_the_carry_at_commit_5();
  ASSERT_EQ(sha.size(), 8u);
  auto [code, report] = run("carry-at-revision", sha.at(8));
  ASSERT_EQ(code, 1) << report.dump(1);
  const int id = report["experiment_id"].get<int>();

  const auto started = std::chrono::steady_clock::now();
  J doc = narrow(id, {"--budget", "3s"});
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  expect_narrow_document(doc, id, [this](int n) { return show(n); });
  EXPECT_EQ(doc["budget_s"].get<double>(), 3) << doc.dump(1);
  // A few seconds of its own bookkeeping (opening the ledger, the exports) beyond what it spends on experiments.
  EXPECT_LE(doc["seconds"].get<double>(), doc["budget_s"].get<double>() + 5) << doc.dump(1) << "\nwall " << wall << " s";
  EXPECT_TRUE(doc["stopped"] == "budget" || doc["stopped"] == "cause clear") << doc.dump(1);
  for (J s : doc["steps"]) EXPECT_LE(s["seconds"].get<double>(), doc["seconds"].get<double>() + 0.5) << s.dump();
}

TEST_F(NarrowE2E, AGreenExperimentOrUnknownIdIsRefusedNamingIt) {
  ASSERT_NO_FATAL_FAILURE(make_repo());
  auto [code, report] = run("carry-honest");
  ASSERT_EQ(code, 0) << report.dump(1);
  ASSERT_EQ(report["experiment_id"], 1);

  // Green: nothing to narrow.
  const auto green = df({"narrow", "1"});
  EXPECT_EQ(green.exit_code, 2) << green.out << green.err;
  EXPECT_TRUE(std::regex_search(green.err, std::regex("\\b1\\b")) || green.err.find("carry-honest") != std::string::npos) << green.err;
  EXPECT_TRUE(green.err.find("green") != std::string::npos || green.err.find("nothing to narrow") != std::string::npos) << green.err;

  // An id the ledger does not hold.
  const auto unknown = df({"narrow", "99"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out << unknown.err;
  EXPECT_NE(unknown.err.find("99"), std::string::npos) << unknown.err;
  // The same as a document for agents.
  const auto as_json = df({"narrow", "99", "--json"});
  EXPECT_EQ(as_json.exit_code, 2) << as_json.out << as_json.err;
  J error = J::parse(as_json.out, nullptr, false);
  ASSERT_TRUE(error.is_object()) << as_json.out << as_json.err;
  EXPECT_EQ(SchemaValidator(kRoot / "schemas" / "error.schema.json").errors(error), std::vector<std::string>{}) << as_json.out;
  EXPECT_EQ(error.value("verdict", ""), "bad-input") << as_json.out;
  EXPECT_NE(error.value("error", "").find("99"), std::string::npos) << as_json.out;

  // A budget that is no duration.
  const auto budget = df({"narrow", "1", "--budget", "soon"});
  EXPECT_EQ(budget.exit_code, 2) << budget.out << budget.err;
  EXPECT_NE(budget.err.find("budget"), std::string::npos) << budget.err;

  // Refused: nothing recorded.
  const auto second = df({"ledger", "show", "2", "--json"});
  EXPECT_NE(second.exit_code, 0) << second.out;
  EXPECT_EQ(show(1)["children"], J::array());
}

// Attacks from the hostile trial: a narrowing step that turned green (the
// precision swap on the red cases only) is no performance result: it ran no
// benchmark and `promote` refuses it; narrowing with another manifest (a
// green one of another experiment) is refused naming it; a gate changed
// since the experiment ran is refused, not read as nondeterminism.
TEST_F(NarrowE2E, ItsGreenStepsAreNeverPromotedAndAnotherManifestOrGateIsRefused) {
  const auto first = bundled({"run", (kRoot / "experiments" / "cp-affine-chain-tf32.yaml").string(), "--no-bench", "--json", "--jobs", "2"});
  ASSERT_EQ(first.exit_code, 1) << first.err;
  const auto narrow = bundled({"narrow", "1", "--json", "--jobs", "2"});
  ASSERT_EQ(narrow.exit_code, 0) << narrow.out << narrow.err;
  J doc = J::parse(narrow.out, nullptr, false);
  auto precision = steps_of_kind(doc, "precision");
  ASSERT_EQ(precision.size(), 1u) << doc.dump(1);
  const std::string green_step = std::to_string(precision[0]["experiment"].get<int>());
  J step = show_bundled(precision[0]["experiment"].get<int>());
  EXPECT_EQ(step["bench_cases"], J::array()) << step.dump(1).substr(0, 2000);
  ASSERT_EQ(bundled({"review", "approve", green_step, "--by", "alice"}).exit_code, 0);
  const auto promote = bundled({"promote", green_step, "--by", "carol"});
  EXPECT_NE(promote.exit_code, 0) << promote.out << promote.err;
  EXPECT_NE((promote.out + promote.err).find("promote an experiment that ran the whole profile"), std::string::npos) << promote.out << promote.err;

  // A replay with --case is no performance result either: its bench is skipped, saying why.
  const auto subset = bundled({"run", (kRoot / "experiments" / "cp-affine-chain-tf32x3.yaml").string(), "--case", "shards=8", "--json",
                               "--jobs", "2"});
  EXPECT_EQ(subset.exit_code, 0) << subset.err;
  EXPECT_NE(subset.out.find("a speedup is measured only where the whole profile is green"), std::string::npos) << subset.out.substr(0, 3000);

  // Another gate's manifest for narrowing 1.
  const auto other = bundled({"narrow", "1", "--manifest", (kRoot / "experiments" / "kda-decode-merge-vtiles.yaml").string()});
  EXPECT_EQ(other.exit_code, 2) << other.out << other.err;
  EXPECT_NE(other.err.find("a replay of it must run what it ran"), std::string::npos) << other.err;
}

}  // namespace
}  // namespace densefeed
