// The printers of one experiment, each a function of plain values: the text
// report and the run's JSON view (report.h, report_json.h) of an outcome
// built here, and the HTML page's gate section (report_html.h) of a ledger
// record written here. No process runs and no browser starts.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "report.h"
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

}  // namespace
}  // namespace densefeed
