// The printers of one experiment, each a function of plain values: the text
// report and the run's JSON view (report.h, report_json.h) of an outcome
// built here, and the HTML page's gate section (report_html.h) of a ledger
// record written here. No process runs and no browser starts.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "report.h"
#include "ledger_printers.h"
#include "ledger_record.h"
#include "report_html.h"

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

CaseResult gate_case(const std::string& label, int t) {
  CaseResult c;
  c.gate_case.values = {{"T", t}};
  c.gate_case.label = label;
  return c;
}

// A green gate of one case and a benchmark whose one case could not decide.
ExperimentOutcome inconclusive_bench() {
  ExperimentOutcome o;
  o.experiment_id = 7;
  o.manifest.name = "tile";
  o.gate_result.cases.push_back(gate_case("T=64", 64));
  BenchCaseResult b;
  b.bench_case.values = {{"T", 64}};
  b.bench_case.label = "T=64";
  b.decision.verdict = BenchVerdict::inconclusive;
  b.decision.reason = "needs 6 more rounds";
  b.decision.speedup = 1.004;
  BenchResult bench;
  bench.cases.push_back(b);
  o.bench = bench;
  return o;
}

TEST(ReportText, AnInconclusiveBenchCaseIsSaidInconclusiveWithItsReason) {
  const std::string text = render_text_report(inconclusive_bench());
  EXPECT_NE(text.find("\n  T=64: inconclusive — speedup 1.004x,"), std::string::npos) << text;
  EXPECT_NE(text.find("\n    needs 6 more rounds\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nverdict: green (gate); benchmark: inconclusive 1 of 1   (experiment 7,"), std::string::npos) << text;
}

TEST(ReportText, ARedCaseIsListedWithItsReasonAndWorstElement) {
  ExperimentOutcome o;
  o.verdict = Verdict::red;
  o.gate_result.verdict = Verdict::red;
  o.gate_result.reason = "1 of 2 cases red";
  o.gate_result.cases.push_back(gate_case("T=64", 64));
  CaseResult red = gate_case("T=8000", 8000);
  red.verdict = Verdict::red;
  red.reason = "out: rel_l2 over its bound";
  OutputResult out;
  out.output = "out";
  out.comparison.verdict = Verdict::red;
  out.comparison.worst_index = {3, 1};
  out.comparison.worst_candidate = 2;
  out.comparison.worst_reference = 1;
  red.outputs.push_back(out);
  o.gate_result.cases.push_back(red);
  o.bench_skipped = "the gate is red";
  const std::string text = render_text_report(o);
  EXPECT_NE(text.find("\ngate: red — 1 of 2 cases red\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  not green:\n    [red] T=8000: out: rel_l2 over its bound\n"
                      "      out: worst element [3,1]: candidate 2, reference 1\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("[green] T=64"), std::string::npos) << text;
  EXPECT_NE(text.find("\nbench: not run (the gate is red)\n"), std::string::npos) << text;
}

// A red experiment as the ledger's record holds it: T=64 green, T=128 red on
// out.rel_l2 (with an unbounded max_abs and an undefined value), a bench case
// on a base the agent wrote, a failed trace check, a promotion and an
// acceptance run.
ExperimentRecord red_record() {
  ExperimentRecord r;
  r.summary.id = 9;
  r.summary.name = "tile";
  r.summary.submitted_at = "2026-12-01T10:00:00Z";
  r.summary.state = ExperimentState::finished;
  r.summary.verdict = "red";
  r.summary.verdict_stage = "gate";
  r.summary.reason = "1 of 2 cases red";
  StageOutcome gate;
  gate.stage = "gate";
  gate.verdict = StageVerdict::red;
  gate.failure.kind = FailureKind::tolerance;
  gate.failure.who = FailureWho::candidate;
  gate.failure.output = "out";
  gate.failure.metric = "rel_l2";
  gate.reason = "out: rel_l2 over its bound";
  StageOutcome bench;
  bench.stage = "bench";
  bench.verdict = StageVerdict::skipped;
  bench.reason = "the gate is red";
  r.summary.stages = {gate, bench};
  r.summary.base_origin.kind = BaseOriginKind::worktree;
  r.summary.base_origin.reason = "the base is the worktree";
  r.author = "ana";
  r.manifest_path = "experiments/tile.yaml";
  r.manifest_sha256 = "cd";
  r.hypothesis = "tiles\nhelp";
  r.predicted_effect = "1.2x";
  r.candidate.revision = "WORKTREE";
  r.candidate.params = {{"tile", 64}};
  r.base.revision = "main";
  GateRunRow run;
  run.gate = "tile";
  run.verdict = "red";
  run.reason = "1 of 2 cases red";
  run.profile = "quick";
  run.seed = "7";
  run.gate_sha256 = "0123456789abcdef0123";
  GateCaseRow green;
  green.label = "T=64";
  green.verdict = "green";
  green.metrics.push_back({"out", "rel_l2", 1e-4, 1e-2, true, 0, {}, std::nullopt});
  GateCaseRow red;
  red.index = 1;
  red.label = "T=128";
  red.verdict = "red";
  red.reason = "out: rel_l2 over its bound";
  red.metrics.push_back({"out", "rel_l2", 0.2, 1e-2, false, 0, {3, 1}, std::nullopt});
  red.metrics.push_back({"out", "max_abs", 5, INFINITY, true, 0, {}, std::nullopt});
  red.metrics.push_back({"lse", "rel_l2", NAN, 1e-2, false, 0, {}, std::nullopt});
  run.cases = {green, red};
  r.gate_run = run;
  BenchCaseRow b;
  b.label = "T=64";
  b.verdict = "faster";
  b.speedup = 1.25;
  b.lo = 1.2;
  b.hi = 1.3;
  b.p_value = 0.001;
  b.rounds = 12;
  b.base_median = 2.5;
  b.candidate_median = 2;
  b.timing_flags = J::array({{{"kind", "clock"}, {"reason", "the clock moved"}}});
  r.bench_cases.push_back(b);
  TraceFindingRow t;
  t.arm = "candidate";
  t.index = 0;
  t.kind = "overlap";
  t.passed = false;
  t.bound = 0.9;
  r.trace_findings.push_back(t);
  r.categories = {{"numerics", "approve"}};
  r.promotion = {{"id", 1}, {"promoted_by", "bo"}, {"promoted_at", "2026-12-02T00:00:00Z"}};
  r.acceptance_runs.push_back({1, "2026-12-02T00:00:00Z", "fail", "one criterion fails",
                               J::array({{{"criterion", "a <= b"}, {"statistic", "median"}, {"lhs", 2.0}, {"rhs", 1.0}, {"passed", false}}})});
  return r;
}

TEST(ReportText, LedgerShowOfARecordNamesTheRedCaseItsMetricsAndEveryStage) {
  std::ostringstream out;
  print_ledger_show(out, red_record());
  const std::string text = out.str();
  EXPECT_EQ(text,
            "experiment 9 'tile' by 'ana', submitted 2026-12-01T10:00:00Z\n"
            "  manifest experiments/tile.yaml (sha256 cd)\n"
            "  hypothesis: tiles\\nhelp\n"
            "  predicted:  1.2x\n"
            "  candidate WORKTREE {\"tile\":64}   base main {}\n"
            "  verdict: red (gate) — 1 of 2 cases red\n"
            "  stage gate       red [tolerance by candidate, out.rel_l2] — out: rel_l2 over its bound\n"
            "  stage bench      skipped — the gate is red\n"
            "  gate tile (sha256 0123456789abcdef), profile quick, seed 7: red — 1 of 2 cases red\n"
            "    green  T=64                                               out.rel_l2=1.00e-04 (bound 1.0e-02)\n"
            "    red    T=128                                              out.rel_l2=2.00e-01 (bound 1.0e-02) lse.rel_l2=nan (bound 1.0e-02)\n"
            "  base: worktree — the base is the worktree; a base the agent wrote: promotion needs --accept-agent-base\n"
            "  bench T=64: faster — speedup 1.250x [1.200, 1.300], p = 0.001, 12 rounds; base 2.5 ms, candidate 2 ms\n"
            "    timed by the candidate (promotion needs --accept-candidate-timing)\n"
            "    clock: the clock moved\n"
            "  trace candidate check 0 (overlap): FAILED — value -, bound 0.9\n"
            "  state: finished; numerics: approve; promoted by bo at 2026-12-02T00:00:00Z\n"
            "  acceptance: fail — one criterion fails\n"
            "    FAIL   a <= b                                           median 2 vs 1\n");
}

TEST(ReportJson, AnUnrecordedRunShowsItsOwnCasesAndBenchmark) {
  const J doc = report_json(inconclusive_bench(), "ledger.db");
  EXPECT_TRUE(doc["record"].is_null());
  EXPECT_EQ(doc["experiment_id"], 7);
  EXPECT_EQ(doc["ledger"], "ledger.db");
  ASSERT_EQ(doc["stages"]["gate"]["cases"].size(), 1u);
  EXPECT_EQ(doc["stages"]["gate"]["cases"][0]["case"], "T=64");
  EXPECT_EQ(doc["stages"]["gate"]["cases"][0]["reference_session"], nullptr);
  ASSERT_EQ(doc["stages"]["bench"]["cases"].size(), 1u);
  EXPECT_EQ(doc["stages"]["bench"]["cases"][0]["verdict"], "inconclusive");
  EXPECT_EQ(doc["stages"]["bench"]["cases"][0]["reason"], "needs 6 more rounds");
  EXPECT_EQ(doc["stages"]["bench"]["cases"][0]["calibrated_floor"], nullptr);
  EXPECT_EQ(doc["stages"]["trace"]["arms"], J::array());
}

J metric(double value, double bound, bool passed) {
  return {{"output", "out"}, {"metric", "rel_l2"}, {"value", value}, {"bound", bound}, {"passed", passed ? 1 : 0},
          {"first_failing_slice", nullptr}};
}

// A ledger show record (schemas/ledger-show.schema.json) of a red gate run:
// T=64 green, T=128 red.
J red_gate_record() {
  J cases = J::array();
  cases.push_back({{"case_index", 0}, {"case_label", "T=64"}, {"case_json", {{"T", 64}}}, {"verdict", "green"}, {"reason", ""},
                   {"metrics", J::array({metric(1e-4, 1e-2, true)})}});
  cases.push_back({{"case_index", 1}, {"case_label", "T=128"}, {"case_json", {{"T", 128}}}, {"verdict", "red"},
                   {"reason", "out: rel_l2 2.000e-01 over its bound 1.000e-02"}, {"metrics", J::array({metric(0.2, 1e-2, false)})}});
  const J run = {{"gate", "tile"}, {"verdict", "red"}, {"reason", "1 of 2 cases red"}, {"profile", "quick"}, {"seed", 1},
                 {"wall_s", 1.5}, {"gate_sha256", "ab"}, {"sandbox", "on"}, {"lock_problems", J::array()}, {"cases", cases}};
  return {{"id", 3}, {"name", "tile"}, {"state", "recorded"}, {"gate", "tile"}, {"candidate_params", J::object()},
          {"base_params", J::object()}, {"gate_run", run}, {"bench_cases", J::array()}, {"trace_findings", J::array()},
          {"events", J::array()}, {"acceptance", nullptr}};
}

TEST(ReportHtmlGateSection, ARedGateRunNamesItsFailingCaseInARedRowAndCell) {
  LedgerFacts facts;
  facts.ledger_file = "ledger.db";
  facts.chain.ok = true;
  const ReportPage page = experiment_report(experiment_record_from_rows(red_gate_record()), facts, ReportAxes{}, "");
  const std::string& html = page.html;
  EXPECT_NE(html.find("data-gate-verdict>red</span>"), std::string::npos) << html;
  EXPECT_NE(html.find("<p><b>Why:</b> 1 of 2 cases red</p>"), std::string::npos) << html;
  EXPECT_NE(html.find("<tr class=\"red\"><td class=\"num\">1</td><td>T=128</td><td class=\"verdict-red\">red</td>"
                      "<td>out.rel_l2 2.000e-01 / 1.000e-02</td><td>out: rel_l2 2.000e-01 over its bound 1.000e-02</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<tr><td class=\"num\">0</td><td>T=64</td><td class=\"verdict-green\">green</td>"), std::string::npos) << html;
  // The heatmap's table marks the failing case's cell, and only it.
  EXPECT_NE(html.find("<td class=\"num red\" data-cell=\"T=128\">2.000e-01</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td class=\"num\" data-cell=\"T=64\">1.000e-04</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("No slice of a partitioned output went over its bound"), std::string::npos) << html;
}

// A green gate whose bench stage is red (the candidate crashed in bench
// mode, before any case was recorded): the page says the benchmark is red
// and why, and the outcome names the verdict's stage (a hostile trial: the
// page showed only "Gate: green" and "No benchmark recorded").
TEST(ReportHtmlGateSection, ARedBenchStageAfterAGreenGateIsShownRedWithItsReason) {
  J rows = red_gate_record();
  rows["gate_run"]["verdict"] = "green";
  rows["gate_run"]["reason"] = "";
  for (auto& c : rows["gate_run"]["cases"]) c["verdict"] = "green", c["reason"] = "", c["metrics"] = J::array({metric(1e-4, 1e-2, true)});
  ExperimentRecord record = experiment_record_from_rows(rows);
  const std::string why = "the candidate was killed by signal 11 (SIGSEGV) in bench mode";
  record.summary.verdict = "red";
  record.summary.verdict_stage = "bench";
  record.summary.reason = why;
  record.summary.stages = {StageOutcome{"gate", StageVerdict::green, {}, "", std::nullopt, ""},
                           StageOutcome{"bench", StageVerdict::red, {}, why, std::nullopt, ""}};
  LedgerFacts facts;
  facts.ledger_file = "ledger.db";
  facts.chain.ok = true;
  const ReportPage page = experiment_report(record, facts, ReportAxes{}, "");
  EXPECT_NE(page.html.find("<p class=\"notice bad\" data-notice>The benchmark is red: " + why + "</p>"), std::string::npos) << page.html;
  EXPECT_NE(page.html.find("<p>Verdict: <span class=\"verdict-red\">red</span> (bench) — " + why + "</p>"), std::string::npos) << page.html;
  EXPECT_EQ(page.html.find("No benchmark recorded"), std::string::npos) << page.html;
}

// The fields the HTML page reads come from the rows into the record.
TEST(ReportHtmlGateSection, TheRecordCarriesTheRowsThePageReads) {
  J rows = red_gate_record();
  rows["bench_cases"] = J::array({{{"case_label", "T=64"}, {"rounds_json", J::array({{{"base_ms", {2.0, 2.5}}, {"candidate_ms", {1.5}}}})}}});
  rows["reviews"] = J::array({{{"category", "numerics"}, {"decision", "reject"}, {"reviewer", "bo"}, {"note", "no"}, {"reviewed_at", "t"}}});
  rows["acceptance"] = {{"criteria", J::array({"a <= b"})}};
  rows["acceptance_runs"] = J::array({{{"id", 4}, {"started_at", "s"}, {"verdict", "pass"}, {"reason", ""}, {"criteria", J::array()}}});
  const ExperimentRecord r = experiment_record_from_rows(rows);
  ASSERT_TRUE(r.gate_run);
  EXPECT_EQ(r.gate_run->gate, "tile");
  EXPECT_EQ(r.gate_run->sandbox, "on");
  ASSERT_EQ(r.bench_cases.size(), 1u);
  ASSERT_EQ(r.bench_cases[0].samples.size(), 1u);
  EXPECT_EQ(r.bench_cases[0].samples[0].base_ms, (std::vector<double>{2.0, 2.5}));
  EXPECT_EQ(r.bench_cases[0].samples[0].candidate_ms, (std::vector<double>{1.5}));
  ASSERT_EQ(r.reviews.size(), 1u);
  EXPECT_EQ(r.reviews[0].decision, "reject");
  EXPECT_EQ(r.reviews[0].reviewer, "bo");
  EXPECT_EQ(r.acceptance_criteria(), J::array({"a <= b"}));
  ASSERT_EQ(r.acceptance_runs.size(), 1u);
  EXPECT_EQ(r.acceptance_runs[0].id, 4);
  EXPECT_EQ(r.acceptance_runs[0].started_at, "s");
}

}  // namespace
}  // namespace densefeed

namespace densefeed {
namespace {

// Issue 31: a stage line says what happened, not a bare verdict word.
TEST(NewcomerStages, ABenchOfOnlyInconclusiveCasesANoAcceptanceAndAStageNeverReachedSaySo) {
  ExperimentRecord r = red_record();
  r.summary.verdict = "green";
  r.summary.verdict_stage = "";
  r.summary.reason = "";
  r.summary.stages[0].verdict = StageVerdict::green;
  r.summary.stages[0].failure = {};
  r.summary.stages[0].reason = "";
  r.summary.stages[1].verdict = StageVerdict::green;
  r.summary.stages[1].reason = "";
  StageOutcome trace;
  trace.stage = "trace";  // pending: never reached
  StageOutcome acceptance;
  acceptance.stage = "acceptance";
  r.summary.stages.push_back(trace);
  r.summary.stages.push_back(acceptance);
  r.bench_cases.resize(1);
  r.bench_cases[0].label = "T=64";
  r.bench_cases[0].verdict = "inconclusive";
  r.has_acceptance = false;
  std::ostringstream out;
  print_ledger_show(out, r);
  const std::string text = out.str();
  EXPECT_NE(text.find("  stage bench      inconclusive — 1 of 1 case(s) inconclusive"), std::string::npos) << text;
  EXPECT_EQ(text.find("stage bench      green"), std::string::npos) << text;
  EXPECT_NE(text.find("  stage trace      not run\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  stage acceptance not declared"), std::string::npos) << text;
  // Declared but not run yet: promote runs it.
  r.has_acceptance = true;
  r.bench_cases.push_back(r.bench_cases[0]);
  r.bench_cases[1].verdict = "faster";
  std::ostringstream again;
  print_ledger_show(again, r);
  EXPECT_NE(again.str().find("  stage acceptance not run yet — densefeed promote runs"), std::string::npos) << again.str();
  EXPECT_NE(again.str().find("  stage bench      green — 1 faster, 1 inconclusive"), std::string::npos) << again.str();
}

}  // namespace
}  // namespace densefeed
