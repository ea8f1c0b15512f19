// Feedback as data: every verb that reports has --json, and what it prints
// validates against its schema in schemas/. Runs the real CLI on a small
// gate (tests/support/cheat_harness) into a real ledger: red, green with a
// benchmark, queued, cancelled, reviewed, refused and accepted promotions.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "schema_validator.h"
#include "cli_verbs.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;

const char* kGate = R"(gate: small
description: y_i = scale * sin(seed / 1000 + i), float32 against a float64 reference.
reference:
  command: [cheat_harness, --role, reference, --n, "{case.n}", --seed, "{seed}", --out, "{out}"]
candidate:
  command: [cheat_harness, --role, candidate, --mode, "{param.mode}", --n, "{case.n}",
            --slowdown, "{param.slowdown}", --seed, "{seed}", --out, "{out}"]
params:
  mode: {type: string, enum: [honest, zeros, crash, few-wrong], default: honest}
  slowdown: {type: number, default: 1}
outputs:
  y:
    dtype: float32
    reference_dtype: float64
    shape: ["{case.n}"]
    tolerance: {rel_l2: 1.0e-5, atol: 1.0e-6, rtol: 1.0e-5}
cases:
  grid:
    - {n: [64, 96, 1000]}
profiles:
  quick: {}
  full: {}
timeout_s: 60
freezes: []
bench:
  warmup: 1
  iters: 3
  max_seconds_per_case: 60
  cases: [{n: 1000}]
)";

// Verbs that report and the schema of their --json document.
const std::map<std::string, std::string> kSchemaOf = {
    {"run", "run-report.schema.json"},        {"submit", "submit.schema.json"},
    {"status", "status.schema.json"},         {"cancel", "cancel.schema.json"},
    {"ledger list", "ledger-list.schema.json"}, {"ledger show", "ledger-show.schema.json"},
    {"ledger compare", "ledger-compare.schema.json"}, {"ledger verify", "ledger-verify.schema.json"},
    {"audit", "audit.schema.json"},           {"audit acknowledge", "audit-acknowledge.schema.json"}, {"review approve", "review.schema.json"},
    {"review reject", "review.schema.json"},  {"promote", "promote.schema.json"},
    {"gate list", "gate-list.schema.json"},   {"gate show", "gate-show.schema.json"},
    {"gate verify", "gate-verify.schema.json"}, {"compare", "compare.schema.json"},
    {"bench calibrate", "bench-calibrate.schema.json"}, {"trace analyze", "trace-report.schema.json"},
    {"ledger head", "ledger-head.schema.json"}, {"ledger backup", "ledger-backup.schema.json"},
    {"ledger recover", "ledger-recover.schema.json"}, {"report", "report.schema.json"},
    {"init", "init.schema.json"},             {"machine calibrate", "machine-calibrate.schema.json"},
    {"repro", "repro.schema.json"},           {"narrow", "narrow.schema.json"},
};
// Verbs that do not report a result, and why.
const std::map<std::string, std::string> kNotReporting = {
    {"worker", "runs the queue until stopped; each experiment's verdict is read with status --json"},
    {"mcp", "serves JSON-RPC itself"},
    {"serve", "serves requests over its socket until stopped; each request's verb prints its own document (--json)"},
    {"gate lock", "a person's action; prints what changed in gates.lock"},
    {"ledger export", "its output is data already: --format json (schemas/ledger-export.schema.json)"},
    {"help", "prints the help text of densefeed or of a verb, for people"},
};

class JsonSchemas : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir;
    // A project in a plain folder (no git): its gates are trusted as they are.
    root_ = *dir_ / "root";
    testing::write_project(root_);
    testing::write_file(root_ / "gates" / "small.yaml", kGate);
    ASSERT_EQ(cli({"gate", "lock"}).exit_code, 0);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static testing::CliResult cli(std::vector<std::string> args) {
    args.insert(args.begin(), {"--project", root_.string(), "--trust-worktree"});
    // cheat_harness and metrics_harness are the build's, named bare: on PATH.
    return testing::run_cli(kExe, args, dir_->path(), testing::with_on_path(std::filesystem::path(kExe).parent_path()));
  }
  static std::string ledger() { return (*dir_ / "ledger.db").string(); }
  static std::filesystem::path manifest(const std::string& name, const std::string& mode, const std::string& extra = "") {
    const auto path = *dir_ / (name + ".yaml");
    testing::write_file(path, "experiment: " + name + "\nhypothesis: h\npredicted_effect: p\ngate: small\n" +
                                  "candidate: {revision: WORKTREE, params: {mode: " + mode + "}}\n" +
                                  "base: {revision: WORKTREE, params: {mode: honest, slowdown: 2}}\n" + extra);
    return path;
  }
  // Runs the verb, expects `exit_code`, validates stdout against the schema; returns the document.
  static nlohmann::json check(const std::string& verb, std::vector<std::string> args, int exit_code) {
    const auto r = cli(args);
    EXPECT_EQ(r.exit_code, exit_code) << verb << "\n" << r.out << r.err;
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(r.out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << verb << ": not JSON: " << e.what() << "\n" << r.out;
      return doc;
    }
    const auto schema = exit_code == 2 ? std::string("error.schema.json") : kSchemaOf.at(verb);
    EXPECT_EQ(SchemaValidator(kRoot / "schemas" / schema).errors(doc), std::vector<std::string>{})
        << verb << " against " << schema << "\n" << doc.dump(1).substr(0, 4000);
    // What a verb prints at the top is what its schema declares (issue 27:
    // status --json printed a `verdict` its schema did not name, so a
    // client reading the schema could not know of it).
    const auto declared = nlohmann::json::parse(testing::read_file(kRoot / "schemas" / schema));
    if (doc.is_object() && declared.contains("properties")) {
      for (const auto& [key, value] : doc.items()) {
        EXPECT_TRUE(declared["properties"].contains(key)) << verb << " prints '" << key << "', which " << schema << " does not declare";
      }
    }
    validated_.insert(verb);
    return doc;
  }
  static testing::TempDir* dir_;
  static std::filesystem::path root_;
  static std::set<std::string> validated_;
};

testing::TempDir* JsonSchemas::dir_ = nullptr;
std::filesystem::path JsonSchemas::root_;
std::set<std::string> JsonSchemas::validated_;

TEST_F(JsonSchemas, EverySchemaIsAUsableJsonSchema) {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(kRoot / "schemas")) {
    if (e.path().extension() != ".json") continue;
    EXPECT_NO_THROW(SchemaValidator{e.path()}) << e.path();
    ++n;
  }
  EXPECT_GE(n, kSchemaOf.size());
  for (const auto& [verb, schema] : kSchemaOf) {
    if (verb == "trace analyze") continue;  // comes with its verb (issue 5)
    EXPECT_TRUE(std::filesystem::exists(kRoot / "schemas" / schema)) << verb << ": " << schema;
  }
}

// The CLI's own list of verbs: each one either has --json and a schema here,
// or is in kNotReporting with the reason.
TEST_F(JsonSchemas, EveryVerbThatReportsHasJsonAndASchema) {
  const auto verbs = testing::cli_verbs(kExe, {"--project", root_.string(), "--trust-worktree"});
  for (const auto& [verb, info] : verbs) {
    if (info.has_subcommands || kNotReporting.count(verb)) continue;
    EXPECT_NE(info.help.find("--json"), std::string::npos) << "densefeed " << verb << " reports but has no --json";
    EXPECT_TRUE(kSchemaOf.count(verb)) << "densefeed " << verb << " has no schema listed here";
    if (kSchemaOf.count(verb)) {
      EXPECT_TRUE(std::filesystem::exists(kRoot / "schemas" / kSchemaOf.at(verb))) << verb << ": " << kSchemaOf.at(verb);
    }
  }
  EXPECT_TRUE(verbs.count("status") && verbs.count("ledger show") && verbs.count("gate show")) << verbs.size() << " verbs";
}

TEST_F(JsonSchemas, EveryReportingVerbsDocumentValidates) {
  const std::string L = ledger();
  // 1 red (a few wrong elements), 2 green with a benchmark and a risk to review.
  const auto red = check("run", {"run", manifest("red", "few-wrong").string(), "--ledger", L, "--json", "--no-bench"}, 1);
  EXPECT_FALSE(red["next"].empty());
  const auto green = check("run", {"run", manifest("green", "honest", "risk: [numerics]\n").string(), "--ledger", L, "--json"}, 0);
  EXPECT_EQ(green["stages"]["bench"]["status"], "measured");
  // 3 queued, 4 queued then cancelled.
  check("submit", {"submit", manifest("queued", "honest").string(), "--ledger", L, "--json"}, 0);
  const auto two = check("submit", {"submit", manifest("a", "honest").string(), manifest("b", "zeros").string(), "--ledger", L, "--json"}, 0);
  EXPECT_EQ(two["queued"].size(), 2u);
  check("cancel", {"cancel", "4", "--ledger", L, "--json"}, 0);
  // A wait that runs out (no worker runs 3): the status as it is, exit 4.
  const auto waited = check("status", {"status", "3", "--wait", "--timeout", "0.3", "--ledger", L, "--json"}, 4);
  EXPECT_EQ(waited["state"], "queued") << waited.dump(1);
  // A wait that would never end, or a --timeout that would be ignored, is bad
  // input naming the flag (the hostile trial of stop 38: nan and 1e308 waited
  // for ever, --timeout without --wait was silently dropped).
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--wait", "--timeout", "nan"},
                                              {"--wait", "--timeout", "1e308"},
                                              {"--wait", "--timeout", "86401"},
                                              {"--wait", "--timeout", "-1"},
                                              {"--wait", "--timeout", "5s"},
                                              {"--timeout", "1"}}) {
    std::vector<std::string> args = {"status", "3", "--ledger", L, "--json"};
    args.insert(args.end(), bad.begin(), bad.end());
    const auto refused = check("status", args, 2);
    EXPECT_NE(refused.dump().find("--timeout"), std::string::npos) << bad.back() << "\n" << refused.dump(1);
  }

  // status's exit is the record's (experiment_summary.h): 3 queued is not
  // ended yet (4), 4 cancelled is neither green nor red (3).
  for (const auto& [id, code] : std::vector<std::pair<std::string, int>>{{"1", 1}, {"2", 0}, {"3", 4}, {"4", 3}}) {
    const auto s = check("status", {"status", id, "--ledger", L, "--json"}, code);
    EXPECT_FALSE(s["next"].empty()) << id;
  }
  const auto red_status = check("status", {"status", "1", "--ledger", L, "--json"}, 1);
  const auto repro = check("repro", {"repro", "1", red_status["stages"]["gate"]["failing_cases"][0]["case"].get<std::string>(),
                                     "--ledger", L, "--json"}, 0);
  EXPECT_EQ(repro["commands"][1]["arm"], "candidate") << repro.dump(1);
  // Three elements off in every case: an indexing defect, not rounding.
  EXPECT_EQ(red_status["stages"]["gate"]["failing_cases"].size(), 3u) << red_status.dump(1);
  EXPECT_EQ(red_status["next"][0]["kind"], "inspect-elements") << red_status["next"].dump(1);
  // Issue 27: the next steps come from the record, in run and status alike.
  // Issue 30: a rerun step's command is densefeed replaying the case,
  // linked to this experiment (the harness's own commands: densefeed repro).
  EXPECT_EQ(red["next"], red_status["next"]) << red["next"].dump(1) << "\n" << red_status["next"].dump(1);
  bool rerun = false;
  for (const auto& step : red_status["next"]) {
    if (!step.contains("command") || step["command"][1] != "run") continue;
    rerun = true;
    const auto argv = step["command"].dump();
    EXPECT_EQ(step["command"][0], "densefeed") << step.dump(1);
    EXPECT_NE(argv.find("\"--failing-of\",\"1\",\"--case\""), std::string::npos) << step.dump(1);
    EXPECT_FALSE(step.contains("env")) << step.dump(1);
  }
  EXPECT_TRUE(rerun) << red_status["next"].dump(1);

  check("ledger list", {"ledger", "list", "--ledger", L, "--json"}, 0);
  check("ledger list", {"ledger", "list", "--verdict", "red", "--ledger", L, "--json"}, 0);
  for (const char* id : {"1", "2", "3", "4"}) check("ledger show", {"ledger", "show", id, "--ledger", L, "--json"}, 0);
  check("ledger compare", {"ledger", "compare", "1", "2", "--ledger", L, "--json"}, 0);
  check("ledger verify", {"ledger", "verify", "--ledger", L, "--json"}, 0);
  const auto head = check("ledger head", {"ledger", "head", "--ledger", L, "--json"}, 0);
  EXPECT_GT(head["seq"].get<int>(), 0) << head.dump();
  const auto backup = check("ledger backup", {"ledger", "backup", (*dir_ / "backup.db").string(), "--ledger", L, "--json"}, 0);
  EXPECT_EQ(backup["head"], head["head"]);
  const auto recovered = check("ledger recover", {"ledger", "recover", "--ledger", L, "--json"}, 0);
  EXPECT_EQ(recovered["recovered"].size(), 0u) << recovered.dump();  // every run here reached the ledger
  for (const std::vector<std::string>& page : {std::vector<std::string>{"2"}, {"--gate", "small"}, {}}) {
    std::vector<std::string> args = {"report", "-o", (*dir_ / "report.html").string(), "--ledger", L, "--json"};
    args.insert(args.begin() + 1, page.begin(), page.end());
    const auto written = check("report", args, 0);
    EXPECT_EQ(written["chain"]["ok"], true) << written.dump();
  }
  check("audit", {"audit", "--ledger", L, "--json"}, 0);
  check("promote", {"promote", "2", "--by", "carol", "--ledger", L, "--json"}, 1);  // refused: category not approved
  check("review reject", {"review", "reject", "2", "--by", "alice", "--ledger", L, "--json"}, 0);
  check("review approve", {"review", "approve", "2", "--by", "alice", "--note", "tf32 error understood", "--ledger", L, "--json"}, 0);
  check("gate list", {"gate", "list", "--json"}, 0);
  check("gate show", {"gate", "show", "small", "--json"}, 0);
  check("gate verify", {"gate", "verify", "--json"}, 0);
  check("bench calibrate", {"bench", "calibrate", "small", "--comparisons", "2", "--ledger", L, "--json"}, 0);
  check("machine calibrate", {"machine", "calibrate", "--cpu-only", "--ledger", L, "--json"}, 0);

  // A promotion that runs its pre-registered acceptance criteria.
  const auto accept = "risk: [production]\nacceptance:\n  command: [metrics_harness, \"prefill=10,10.2,9.9\", \"prefill_kv=10.1\"]\n"
                      "  criteria: [\"prefill_kv <= 1.05 * prefill\"]\n";
  check("run", {"run", manifest("accepted", "honest", accept).string(), "--ledger", L, "--json", "--no-bench"}, 0);
  check("review approve", {"review", "approve", "6", "--by", "alice", "--ledger", L, "--json"}, 0);
  const auto promoted = check("promote", {"promote", "6", "--by", "carol", "--ledger", L, "--json"}, 0);
  EXPECT_EQ(promoted["acceptance"], "pass");
  check("ledger show", {"ledger", "show", "6", "--ledger", L, "--json"}, 0);
  const auto promoted_status = check("status", {"status", "6", "--ledger", L, "--json"}, 0);
  EXPECT_EQ(promoted_status["stages"]["acceptance"]["verdict"], "pass");

  // Tensor comparisons: red (exit 1) and green.
  const auto runs = *dir_ / "ledger-runs" / "1";
  check("compare", {"compare", (runs / "reference-002" / "out" / "y.npy").string(), (runs / "candidate-002" / "out" / "y.npy").string(),
                    "--partition-axis", "0", "--partition-parts", "10", "--json"},
        1);
  const auto green_runs = *dir_ / "ledger-runs" / "2";
  check("compare", {"compare", (green_runs / "reference-000" / "out" / "y.npy").string(), (green_runs / "candidate-000" / "out" / "y.npy").string(),
                    "--rel-l2", "1e-5", "--json"},
        0);
  // A reference that cannot be read: verdict error (exit 3), the same document.
  testing::write_file(*dir_ / "broken-reference.npy", "junk");
  const auto broken = check("compare", {"compare", (*dir_ / "broken-reference.npy").string(),
                                        (green_runs / "candidate-000" / "out" / "y.npy").string(), "--json"},
                            3);
  EXPECT_EQ(broken["verdict"], "error") << broken.dump();

  // Issue 30: densefeed narrow's document, and its refusal of a green experiment.
  const auto narrowed = check("narrow", {"narrow", "1", "--ledger", L, "--json", "--budget", "120s", "--jobs", "2"}, 0);
  EXPECT_EQ(narrowed["experiment"], 1) << narrowed.dump(1);
  check("narrow", {"narrow", "2", "--ledger", L, "--json"}, 2);

  // init makes a project of a git repository.
  const auto fresh = *dir_ / "fresh";
  std::filesystem::create_directories(fresh);
  ASSERT_EQ(testing::run_cli("/usr/bin/git", {"init", "-q", "-b", "main", fresh.string()}, dir_->path()).exit_code, 0);
  const auto made = check("init", {"init", fresh.string(), "--json"}, 0);
  EXPECT_EQ(made["trusted_ref"], "main") << made.dump();

  // The ledger export is its own JSON document.
  const auto exported = cli({"ledger", "export", "--ledger", L});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(SchemaValidator(kRoot / "schemas" / "ledger-export.schema.json").errors(nlohmann::json::parse(exported.out)),
            std::vector<std::string>{});

  // A write into the cached export of the trusted ref (in a git project of
  // its own: the rest runs --trust-worktree): the next run records a tamper
  // event (issue 25), `audit` fails (exit 1, its document) until a person
  // acknowledges it.
  {
    const auto git_project = *dir_ / "git-project";
    const auto env = testing::with_on_path(std::filesystem::path(kExe).parent_path());
    ASSERT_EQ(testing::locked_project(git_project, {{"gates/small.yaml", kGate}}, kExe, env), "");
    const auto in_git = [&](std::vector<std::string> args) { return testing::run_cli(kExe, args, git_project, env); };
    const std::string GL = (git_project / ".densefeed" / "ledger.db").string();
    ASSERT_EQ(in_git({"run", manifest("before-tamper", "honest").string(), "--no-bench", "--json"}).exit_code, 0);
    auto sha = testing::git(git_project, {"rev-parse", "main"}).out;
    while (!sha.empty() && sha.back() == '\n') sha.pop_back();
    const auto exported_tree = git_project / ".densefeed" / "ledger-exports" / sha;
    ASSERT_TRUE(std::filesystem::is_directory(exported_tree)) << exported_tree;
    testing::write_file(exported_tree / "planted.py", "print('planted')\n");
    const auto after = in_git({"run", manifest("after-tamper", "honest").string(), "--no-bench", "--json"});
    ASSERT_EQ(after.exit_code, 0) << after.out << after.err;
    EXPECT_NE(after.err.find("tamper event 1"), std::string::npos) << after.err;
    const auto audited = [&](int code) {
      const auto r = in_git({"audit", "--ledger", GL, "--json"});
      EXPECT_EQ(r.exit_code, code) << r.out << r.err;
      EXPECT_EQ(SchemaValidator(kRoot / "schemas" / "audit.schema.json").errors(nlohmann::json::parse(r.out, nullptr, false)),
                std::vector<std::string>{}) << r.out;
    };
    audited(1);
    const auto ack = in_git({"audit", "acknowledge", "1", "--by", "alice", "--note", "a test wrote it", "--ledger", GL, "--json"});
    EXPECT_EQ(ack.exit_code, 0) << ack.out << ack.err;
    EXPECT_EQ(SchemaValidator(kRoot / "schemas" / "audit-acknowledge.schema.json").errors(nlohmann::json::parse(ack.out, nullptr, false)),
              std::vector<std::string>{}) << ack.out;
    validated_.insert("audit acknowledge");
    audited(0);
  }

  // Bad input gets the error document, on every family of verbs.
  check("status", {"status", "99", "--ledger", L, "--json"}, 2);
  check("ledger show", {"ledger", "show", "x", "--ledger", L, "--json"}, 2);
  check("gate show", {"gate", "show", "nope", "--json"}, 2);
  check("compare", {"compare", "/nonexistent.npy", "/nonexistent.npy", "--json"}, 2);
  check("submit", {"submit", "/nonexistent.yaml", "--ledger", L, "--json"}, 2);
  check("run", {"run", manifest("undeclared", "honest", "").string(), "--ledger", L, "--json", "--bogus-flag"}, 2);

  for (const auto& [verb, schema] : kSchemaOf) {
    if (verb == "trace analyze") continue;
    EXPECT_TRUE(validated_.count(verb)) << verb << " was never run here";
  }
}

// `trace analyze` comes from another change (issue 5); validated when present.
TEST_F(JsonSchemas, TraceAnalyzeValidatesWhenTheVerbExists) {
  const auto help = cli({"trace", "analyze", "--help"});
  if (help.exit_code != 0 || !std::filesystem::exists(kRoot / "schemas" / "trace-report.schema.json")) {
    GTEST_SKIP() << "densefeed has no `trace analyze` verb or schemas/trace-report.schema.json yet";
  }
  const auto trace = *dir_ / "trace.json";
  testing::write_file(trace, R"({"traceEvents": [
    {"name": "prefill", "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
    {"name": "kv_transfer", "ph": "X", "pid": 1, "tid": 2, "ts": 200, "dur": 500}]})");
  const auto r = cli({"trace", "analyze", trace.string(), "--json"});
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out << r.err;
  EXPECT_EQ(SchemaValidator(kRoot / "schemas" / "trace-report.schema.json").errors(nlohmann::json::parse(r.out)),
            std::vector<std::string>{});
}

}  // namespace
}  // namespace densefeed
