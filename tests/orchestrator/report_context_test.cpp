// Issue 31: what every report states besides the results: provenance (the
// text report's WARNING), the environment the benchmark ran on, next steps,
// the trends of a gate's error headroom and bench medians, and the markdown
// summary for a pull request (report_markdown.h). Each printer is a function
// of the record the ledger's rows make (experiment_record_from_rows, the
// function Ledger::record uses); no browser starts here (the Chromium test
// of the linked folder is tests/e2e/report_html_test.cpp's ReportContext.*).
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ledger_record.h"
#include "report_html.h"
#include "report_markdown.h"

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

J metric(const std::string& output, double value, double bound, bool passed) {
  return {{"output", output}, {"metric", "rel_l2"}, {"value", value}, {"bound", bound}, {"passed", passed ? 1 : 0}, {"first_failing_slice", nullptr}};
}

J provenance(bool clean) {
  return {{"project", "/src/proj"}, {"commit", "0123456789abcdef0123"}, {"clean", clean}, {"gate_store", "main (export)"},
          {"notes", clean ? J::array() : J::array({"the checkout has uncommitted changes", "gates from the worktree"})}};
}

// Rows as Ledger::show gives them: a gate run of the cases given.
J rows(std::int64_t id, const std::string& verdict, const J& cases, bool clean) {
  const J run = {{"gate", "tile"}, {"verdict", verdict}, {"reason", verdict == "red" ? "1 of 2 cases red" : ""}, {"profile", "quick"}, {"seed", 7},
                 {"wall_s", 1.5}, {"gate_sha256", "ab"}, {"sandbox", "on"}, {"lock_problems", J::array()}, {"provenance", provenance(clean)},
                 {"cases", cases}};
  return {{"id", id}, {"name", "tile|<b>"}, {"state", "finished"}, {"gate", "tile"}, {"candidate_params", J::object()}, {"base_params", J::object()},
          {"gate_run", run}, {"bench_cases", J::array()}, {"trace_findings", J::array()}, {"events", J::array()}, {"acceptance", nullptr},
          {"environment", nullptr}};
}

J red_cases() {
  return J::array({{{"case_index", 0}, {"case_label", "T=64"}, {"case_json", {{"T", 64}}}, {"verdict", "green"}, {"reason", ""},
                    {"metrics", J::array({metric("out", 1e-4, 1e-2, true)})}},
                   {{"case_index", 1}, {"case_label", "T=128"}, {"case_json", {{"T", 128}}}, {"verdict", "red"},
                    {"reason", "out: rel_l2 2.000e-01 over its bound 1.000e-02"}, {"metrics", J::array({metric("out", 0.2, 1e-2, false)})}}});
}

ExperimentRecord red_record(bool clean) {
  ExperimentRecord r = experiment_record_from_rows(rows(3, "red", red_cases(), clean));
  r.summary.verdict = "red";
  r.summary.verdict_stage = "gate";
  return r;
}

// A green, benchmarked record with its environment row (gpus and clocks as the columns hold them: JSON text).
ExperimentRecord green_record(std::int64_t id, double candidate_median) {
  J cases = J::array({{{"case_index", 0}, {"case_label", "T=64"}, {"case_json", {{"T", 64}}}, {"verdict", "green"}, {"reason", ""},
                       {"metrics", J::array({metric("out", 1e-3, 1e-2, true)})}}});
  J r = rows(id, "green", cases, true);
  r["bench_cases"] = J::array({{{"case_label", "T=64"}, {"verdict", "faster"}, {"reason", "faster"}, {"unit", "ms"}, {"speedup", 2.0 / candidate_median},
                                {"speedup_lo", 1.2}, {"speedup_hi", 1.3}, {"ci_confidence", 0.95}, {"p_value", 0.001}, {"threshold", 0.01},
                                {"rounds", 12}, {"base_median", 2.0}, {"candidate_median", candidate_median}, {"rounds_json", J::array()}}});
  r["environment"] = {{"host", "gpu7"}, {"cpu_model", "AMD EPYC 9654"}, {"gpus", J::array({{{"name", "NVIDIA H100"}, {"uuid", "GPU-1"}, {"driver", "580.1"}},
                                                                                            {{"name", "NVIDIA H100"}, {"uuid", "GPU-2"}, {"driver", "580.1"}}})},
                      {"cuda_version", "13.0"}, {"compiler", "GNU 12.2.0"}, {"flags", "-O3"}, {"clocks", "{\"base\":1980,\"candidate\":1975}"}};
  ExperimentRecord rec = experiment_record_from_rows(r);
  rec.summary.verdict = "green";
  rec.summary.verdict_stage = "bench";
  return rec;
}

LedgerFacts facts() {
  LedgerFacts f;
  f.ledger_file = "ledger.db";
  f.chain.ok = true;
  return f;
}

TEST(ReportContext, MarkdownOfARedExperimentGivesVerdictWarningRedCasesNextAndEnvironment) {
  NextStep step;
  step.kind = "rerun-case";
  step.suggestion = "rerun case T=128 alone";
  step.command = {"densefeed", "run", "m.yaml", "--case", "T=128"};
  const std::string md = experiment_markdown(red_record(false), {step});
  EXPECT_EQ(md.rfind("### densefeed: experiment 3 tile\\|&lt;b&gt;: :x: **red** (gate)\n\ngate tile: :x: **red** — 1 of 2 cases red\n\n", 0), 0u) << md;
  EXPECT_NE(md.find("> [!WARNING]\n> Provenance: WARNING (/src/proj; gates from main (export)): the checkout has uncommitted changes; gates from the worktree\n"),
            std::string::npos) << md;
  EXPECT_NE(md.find("**Gate** (profile quick, seed 7): 2 case(s), 1 green, 1 not green.\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| T=128 | red | out.rel\\_l2 | 2.000e-01 | 1.000e-02 | 20 | out: rel\\_l2 2.000e-01 over its bound 1.000e-02 |\n"), std::string::npos) << md;
  EXPECT_EQ(md.find("| T=64 |"), std::string::npos) << "a green case is counted, not listed";
  EXPECT_NE(md.find("**Bench**: not run: a speedup is never measured for a gate that is not green.\n"), std::string::npos) << md;
  EXPECT_NE(md.find("1. [rerun-case] rerun case T=128 alone `densefeed run m.yaml --case T=128`\n"), std::string::npos) << md;
  EXPECT_NE(md.find("<sub>environment: not recorded (no benchmark ran); provenance: WARNING"), std::string::npos) << md;
  // A clean run has no warning.
  EXPECT_EQ(experiment_markdown(red_record(true), {}).find("[!WARNING]"), std::string::npos);
}

TEST(ReportContext, MarkdownOfABenchmarkedExperimentTablesMediansSpeedupIntervalAndVerdict) {
  const std::string md = experiment_markdown(green_record(4, 1.6), {});
  EXPECT_EQ(md.rfind("### densefeed: experiment 4 tile\\|&lt;b&gt;: :white_check_mark: **green**\n", 0), 0u) << md;
  EXPECT_NE(md.find("| bench case | base median | candidate median | speedup | interval | verdict |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| T=64 | 2 ms | 1.6 ms | 1.250x | [1.200, 1.300] at 95 % | :white_check_mark: **faster** |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("<sub>environment: host gpu7; CPU AMD EPYC 9654; GPU NVIDIA H100 (driver 580.1) x2; CUDA 13.0; compiler GNU 12.2.0 (-O3); "
                    "SM clocks base 1980 MHz, candidate 1975 MHz; provenance: /src/proj at commit 0123456789ab; gates from main (export)</sub>\n"),
            std::string::npos) << md;
  EXPECT_EQ(md.find("[!WARNING]"), std::string::npos);
}

// A line feed is one_line()'s "\n", whose backslash is escaped in turn: it renders as \n.
TEST(ReportContext, MarkdownEscapesWhatAManifestOrHarnessWrote) {
  EXPECT_EQ(markdown_escape("a|b [x](http://e) <img> `c` *d*\nnext"), "a\\|b \\[x\\](http://e) &lt;img&gt; \\`c\\` \\*d\\*\\\\nnext");
}

TEST(ReportContext, ExperimentPageStatesProvenanceWarningAndEnvironment) {
  const ReportPage red = experiment_report(red_record(false), facts(), ReportAxes{}, "");
  EXPECT_NE(red.html.find("<dd data-provenance=\"warning\">WARNING (/src/proj; gates from main (export)): the checkout has uncommitted changes; "
                          "gates from the worktree</dd>"),
            std::string::npos) << red.html;
  EXPECT_NE(red.html.find("<p class=\"notice warn\" data-notice>Provenance: WARNING"), std::string::npos) << red.html;
  EXPECT_NE(red.html.find("<dd data-environment>not recorded (no benchmark ran)</dd>"), std::string::npos);
  const ReportPage green = experiment_report(green_record(4, 1.6), facts(), ReportAxes{}, "");
  EXPECT_NE(green.html.find("<dd data-provenance=\"clean\">/src/proj at commit 0123456789ab; gates from main (export)</dd>"), std::string::npos);
  EXPECT_NE(green.html.find("<dd data-environment>host gpu7; CPU AMD EPYC 9654; GPU NVIDIA H100 (driver 580.1) x2;"), std::string::npos) << green.html;
  EXPECT_EQ(green.html.find("Provenance: WARNING"), std::string::npos);
}

// An exact gate (every error 0, against bounds of 0 and above) draws no heat
// map of zeros on a made-up scale, and says so; a one-axis grid's heading
// names its axis without a "-".
TEST(ReportContext, AnExactOneAxisGateSaysAllCasesExactAndTitlesItsOneAxis) {
  J cases = J::array();
  for (int b : {1, 8, 64}) {
    J m0 = metric("out", 0, 0, true);
    m0["metric"] = "max_abs";
    cases.push_back({{"case_index", cases.size()}, {"case_label", fmt::format("batch={}", b)}, {"case_json", {{"batch", b}, {"H", 4}}},
                     {"verdict", "green"}, {"reason", ""}, {"metrics", J::array({metric("o", 0, 1e-5, true), m0})}});
  }
  const ReportPage page = experiment_report(experiment_record_from_rows(rows(5, "green", cases, true)), facts(), ReportAxes{}, "");
  EXPECT_EQ(page.charts, 0) << page.html;
  EXPECT_EQ(page.html.find("data-chart=\"heatmap\""), std::string::npos);
  EXPECT_NE(page.html.find("<h3>o.rel_l2 over batch (bound 1.000e-05)</h3>\n<p data-exact=\"o.rel_l2\">All cases exact (error 0): 3 case(s), o.rel_l2 = 0 in each"),
            std::string::npos) << page.html;
  EXPECT_NE(page.html.find("<p data-exact=\"out.max_abs\">All cases exact (error 0)"), std::string::npos) << page.html;
  EXPECT_EQ(page.html.find("over - ×"), std::string::npos);
  // One case off 0: the heat map is back.
  cases[1]["metrics"][0]["value"] = 1e-7;
  const ReportPage drawn = experiment_report(experiment_record_from_rows(rows(5, "green", cases, true)), facts(), ReportAxes{}, "");
  EXPECT_NE(drawn.html.find("data-chart=\"heatmap\""), std::string::npos);
  EXPECT_NE(drawn.html.find("<h3>o.rel_l2 over batch (bound 1.000e-05)</h3>"), std::string::npos);
}

// The gate page's trends: error / tolerance per case per experiment, and the
// bench medians, each as a chart and a table; the latest experiment's next steps.
TEST(ReportContext, GatePageDrawsHeadroomAndMedianTrendsAndTheLatestNextSteps) {
  const std::vector<ExperimentRecord> records = {red_record(false), green_record(4, 1.6), green_record(6, 1.0)};
  const J list = J::array({{{"id", 3}, {"name", "a"}, {"verdict", "red"}}, {{"id", 4}, {"name", "b"}, {"verdict", "green"}},
                           {{"id", 6}, {"name", "c"}, {"verdict", "green"}}});
  NextStep step;
  step.kind = "promote";
  step.suggestion = "promote it";
  const ReportPage page = gate_report("tile", "", list, J::array(), J::array(), facts(), "", records, {{6, {step}}, {3, {}}});
  EXPECT_NE(page.html.find("data-chart=\"headroom\""), std::string::npos);
  EXPECT_NE(page.html.find("data-chart=\"medians\""), std::string::npos);
  EXPECT_NE(page.html.find("<td class=\"num red\" data-headroom=\"#3 T=128\">20</td>"), std::string::npos) << page.html;
  EXPECT_NE(page.html.find("<td class=\"num\" data-headroom=\"#3 T=64\">0.01</td>"), std::string::npos);
  EXPECT_NE(page.html.find("<td class=\"num\" data-headroom=\"#6 T=64\">0.1</td>"), std::string::npos);
  EXPECT_NE(page.html.find("#3 tile|<b> T=128: error / tolerance 20 (out.rel_l2)"), std::string::npos) << "the point's description";
  EXPECT_NE(page.html.find("<td>#6 tile|&lt;b&gt;</td><td>T=64</td><td class=\"num\">2 ms</td><td class=\"num\">1 ms</td><td class=\"num\">2.000</td>"),
            std::string::npos) << page.html;
  EXPECT_NE(page.html.find("Next for the latest experiment, #6 (cheapest first)"), std::string::npos);
  EXPECT_NE(page.html.find("<li data-next=\"promote\">"), std::string::npos);
  EXPECT_NE(page.html.find("1 of 3 experiment(s) ran from a checkout or gate store that was not clean"), std::string::npos);
}

}  // namespace
}  // namespace densefeed
