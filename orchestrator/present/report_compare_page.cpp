#include "report_compare_page.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "report_context.h"
#include "report_page.h"
#include "vega_specs.h"

namespace densefeed {
namespace {

using namespace report_page;

std::string experiment_link(const ReportLinks& links, const ExperimentRecord& r) {
  const auto it = links.experiments.find(r.id());
  return link(it == links.experiments.end() ? "" : it->second, fmt::format("#{} {}", r.id(), r.summary.name));
}

// "o.rel_l2 1.234e-02 / 1.000e-05; ..." and the largest value / bound.
std::pair<std::string, std::optional<double>> metrics_text(const GateCaseRow& c) {
  std::string text;
  std::optional<double> worst;
  for (const auto& m : c.metrics) {
    text += fmt::format("{}{}.{} {} / {}", text.empty() ? "" : "; ", m.output, m.metric, sci(known(m.value)), sci(known(m.bound)));
    if (m.bound > 0 && !std::isnan(m.value)) worst = std::max(worst.value_or(0), m.value / m.bound);
  }
  return {text, worst};
}

void cases_section(Page& page, const ExperimentRecord& a, const ExperimentRecord& b) {
  page.add("<h2 id=\"gate\">Gate cases side by side</h2>\n");
  if (!a.gate_run && !b.gate_run) {
    page.add("<p>Neither experiment has a gate run yet.</p>\n");
    return;
  }
  std::vector<std::string> labels;
  std::map<std::string, std::pair<const GateCaseRow*, const GateCaseRow*>> by_label;
  for (const auto& [r, first] : {std::pair{&a, true}, std::pair{&b, false}}) {
    if (!r->gate_run) continue;
    for (const auto& c : r->gate_run->cases) {
      if (!by_label.count(c.label)) labels.push_back(c.label);
      (first ? by_label[c.label].first : by_label[c.label].second) = &c;
    }
  }
  HistoryChart chart;
  chart.title = "error headroom (error / tolerance) per case";
  chart.subtitle = "dashed: the tolerance; outlined points are over it";
  chart.y_title = "error / tolerance (log)";
  chart.order = {fmt::format("#{}", a.id()), fmt::format("#{}", b.id())};
  chart.rule = 1;
  chart.rule_label = "tolerance";
  chart.legend = labels.size() <= 12;
  Table t;
  t.id = "compare cases";
  t.head = {"case", fmt::format("#{} verdict", a.id()), fmt::format("#{} error / bound", a.id()), fmt::format("#{} verdict", b.id()),
            fmt::format("#{} error / bound", b.id()), "headroom change (b / a)"};
  for (const auto& label : labels) {
    const auto [ca, cb] = by_label[label];
    std::vector<std::string> row = {td(label)};
    std::optional<double> ha, hb;
    for (const auto& [c, x, h] : {std::tuple{ca, chart.order[0], &ha}, std::tuple{cb, chart.order[1], &hb}}) {
      if (!c) {
        row.push_back("<td></td>");
        row.push_back("<td></td>");
        continue;
      }
      const auto [text, worst] = metrics_text(*c);
      *h = worst;
      row.push_back(tdv(c->verdict));
      row.push_back(td(text));
      if (worst && *worst > 0) {
        chart.points.push_back({x, label, *worst, c->verdict != "green", fmt::format("{} {}: error / tolerance {:.3g}", x, label, *worst)});
      }
    }
    row.push_back(tdn(ha && hb && *ha > 0 ? fmt::format("{:.3g}x", *hb / *ha) : "—"));
    t.rows.push_back(row);
    t.red.push_back((ca && ca->verdict != "green") || (cb && cb->verdict != "green"));
  }
  if (!chart.points.empty()) page.add("<div class=\"charts\">\n" + page.chart("compare-headroom", history_lines_spec(chart)) + "</div>\n");
  else page.add("<p data-exact-headroom>All cases exact (error 0) in both experiments.</p>\n");
  page.add(t.html());
}

void bench_section(Page& page, const ExperimentRecord& a, const ExperimentRecord& b) {
  page.add("<h2 id=\"bench\">Benchmark side by side</h2>\n");
  std::vector<std::string> labels;
  std::map<std::string, std::pair<const BenchCaseRow*, const BenchCaseRow*>> by_label;
  for (const auto& [r, first] : {std::pair{&a, true}, std::pair{&b, false}}) {
    for (const auto& c : r->bench_cases) {
      if (!by_label.count(c.label)) labels.push_back(c.label);
      (first ? by_label[c.label].first : by_label[c.label].second) = &c;
    }
  }
  if (labels.empty()) {
    page.add("<p>Neither experiment has a benchmark (a benchmark runs only after a green gate).</p>\n");
    return;
  }
  Table t;
  t.id = "compare bench";
  t.head = {"bench case"};
  for (const auto* r : {&a, &b}) {
    for (const char* h : {"base median", "candidate median", "speedup", "interval", "verdict"}) t.head.push_back(fmt::format("#{} {}", r->id(), h));
  }
  for (const auto& label : labels) {
    std::vector<std::string> row = {td(label)};
    bool slower = false;
    for (const BenchCaseRow* c : {by_label[label].first, by_label[label].second}) {
      if (!c) {
        for (int i = 0; i < 5; ++i) row.push_back("<td></td>");
        continue;
      }
      slower = slower || c->verdict == "slower";
      row.push_back(tdn(general(known(c->base_median)) + " " + c->unit));
      row.push_back(tdn(general(known(c->candidate_median)) + " " + c->unit));
      row.push_back(tdn(fixed3(known(c->speedup))));
      row.push_back(tdn(fmt::format("[{}, {}]", fixed3(known(c->lo)), fixed3(known(c->hi)))));
      row.push_back(tdv(c->verdict));
    }
    t.rows.push_back(row);
    t.red.push_back(slower);
  }
  page.add(t.html());
}

std::string cell(const J& v) { return v.is_null() ? "" : v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

ReportPage compare_report(const ExperimentRecord& a, const ExperimentRecord& b, const ExperimentComparison& differences, const LedgerFacts& facts,
                          const std::string& vega_scripts, const ReportLinks& links) {
  Page page("compare", fmt::format("Experiment {} against experiment {}", a.id(), b.id()), facts);
  if (!links.index.empty()) page.nav(link(links.index, "index"));
  Table who;
  who.id = "compare experiments";
  who.head = {"", "experiment", "gate", "state", "verdict", "candidate", "provenance", "environment"};
  for (const auto& [r, name] : {std::pair{&a, "a"}, std::pair{&b, "b"}}) {
    const ProvenanceLine p = provenance_line(r->gate_run ? r->gate_run->provenance : J());
    who.rows.push_back({td(name), td_html(experiment_link(links, *r)), td(r->summary.gate), td(to_string(r->summary.state)), tdv(r->gate_verdict()),
                        td(r->candidate.revision + " " + r->candidate.params.dump()), td(p.text), td(environment_line(*r))});
    who.red.push_back(p.known && !p.clean);
    if (p.known && !p.clean) page.notice(fmt::format("Experiment {}: provenance {}", r->id(), p.text), "warn");
  }
  page.add(who.html());
  if (a.summary.gate != b.summary.gate) {
    page.notice(fmt::format("The experiments ran different gates ({} and {}): their cases are matched by label only.", a.summary.gate, b.summary.gate), "warn");
  }
  cases_section(page, a, b);
  bench_section(page, a, b);
  Table d;
  d.id = "differences";
  d.head = {"field", "a", "b", "delta (b - a)", "ratio (b / a)"};
  for (const auto& row : differences.differences) {
    d.rows.push_back({td(cell(row["field"])), td(cell(row["a"])), td(cell(row["b"])), tdn(row.contains("delta") ? general(row["delta"].get<double>()) : ""),
                      tdn(row.contains("ratio") ? general(row["ratio"].get<double>()) : "")});
  }
  page.add(fmt::format("<h2 id=\"differences\">Every recorded field that differs ({}; densefeed ledger compare {} {})</h2>\n", d.rows.size(), a.id(), b.id()) +
           (d.rows.empty() ? std::string("<p>None.</p>\n") : d.html()));
  return page.finish(vega_scripts);
}

}  // namespace densefeed
