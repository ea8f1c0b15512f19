#include "report_trends.h"

#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "vega_specs.h"

namespace densefeed::report_page {
namespace {

std::string label_of(const ExperimentRecord& r) { return fmt::format("#{} {}", r.id(), r.summary.name); }

std::string experiment_link(const ReportLinks& links, const ExperimentRecord& r) {
  const auto it = links.experiments.find(r.id());
  return link(it == links.experiments.end() ? "" : it->second, fmt::format("#{}", r.id()));
}

struct Headroom {
  double ratio = 0;
  bool failed = false;
  std::string worst;  // output.metric
};

std::optional<Headroom> headroom(const GateCaseRow& c) {
  std::optional<Headroom> h;
  for (const auto& m : c.metrics) {
    if (!(m.bound > 0) || std::isnan(m.value)) continue;
    const double ratio = m.value / m.bound;
    if (!h || ratio > h->ratio) h = Headroom{ratio, !m.passed, m.output + "." + m.metric};
  }
  if (h) h->failed = h->failed || c.verdict != "green";
  return h;
}

void headroom_section(Page& page, const std::vector<ExperimentRecord>& records, const ReportLinks& links) {
  page.add("<h2 id=\"headroom\">Error headroom: measured error / tolerance</h2>\n"
           "<p>Per case, the largest measured error / tolerance over its outputs' metrics (1: at the tolerance; over 1: red).</p>\n");
  HistoryChart chart;
  chart.title = "error headroom per case, by experiment";
  chart.subtitle = "dashed: the tolerance (1); outlined points are over it; exact cases (0) are in the table only";
  chart.y_title = "error / tolerance (log)";
  chart.rule = 1;
  chart.rule_label = "tolerance";
  std::vector<std::string> cases;  // in the order first seen
  std::map<std::string, std::map<std::int64_t, Headroom>> at;
  bool any = false;
  for (const auto& r : records) {
    if (!r.gate_run) continue;
    chart.order.push_back(label_of(r));
    for (const auto& c : r.gate_run->cases) {
      const auto h = headroom(c);
      if (!h) continue;
      any = true;
      if (!at.count(c.label)) cases.push_back(c.label);
      at[c.label][r.id()] = *h;
      if (h->ratio > 0) {
        chart.points.push_back({label_of(r), c.label, h->ratio, h->failed,
                                fmt::format("{} {}: error / tolerance {:.3g} ({})", label_of(r), c.label, h->ratio, h->worst)});
      }
    }
  }
  if (!any) {
    page.add("<p>No gate run of these experiments recorded a metric with a tolerance above 0.</p>\n");
    return;
  }
  chart.legend = cases.size() <= 12;
  if (chart.points.empty()) {
    page.add("<p data-exact-headroom>All cases exact (error 0) in every experiment: no headroom to draw.</p>\n");
  } else {
    page.add("<div class=\"charts\">\n" + page.chart("headroom", history_lines_spec(chart)) + "</div>\n");
  }
  Table t;
  t.id = "headroom";
  t.head = {"case"};
  std::vector<const ExperimentRecord*> run;
  for (const auto& r : records) {
    if (r.gate_run) run.push_back(&r);
  }
  for (const auto* r : run) t.head.push_back(fmt::format("#{}", r->id()));
  for (const auto& c : cases) {
    std::vector<std::string> row = {td(c)};
    bool red = false;
    for (const auto* r : run) {
      const auto it = at[c].find(r->id());
      if (it == at[c].end()) {
        row.push_back("<td></td>");
        continue;
      }
      red = red || it->second.failed;
      row.push_back(fmt::format("<td class=\"num{}\" data-headroom=\"#{} {}\">{:.3g}</td>", it->second.failed ? " red" : "", r->id(),
                                html_escape(c), it->second.ratio));
    }
    t.rows.push_back(row);
    t.red.push_back(false);
  }
  std::string heads;
  for (const auto* r : run) heads += (heads.empty() ? "" : ", ") + experiment_link(links, *r);
  page.add(t.html() + "<p>Experiments: " + heads + "</p>\n");
}

void median_section(Page& page, const std::vector<ExperimentRecord>& records) {
  page.add("<h2 id=\"medians\">Benchmark medians</h2>\n");
  HistoryChart chart;
  chart.title = "median time per bench case and arm, by experiment";
  chart.subtitle = "only experiments whose gate was green have a benchmark";
  Table t;
  t.id = "medians";
  t.head = {"experiment", "bench case", "base median", "candidate median", "speedup", "verdict"};
  std::string unit;
  for (const auto& r : records) {
    bool benched = false;
    for (const auto& b : r.bench_cases) {
      benched = true;
      unit = b.unit;
      for (const auto& [arm, v] : {std::pair{"base", b.base_median}, std::pair{"candidate", b.candidate_median}}) {
        if (!(v > 0)) continue;
        chart.points.push_back({label_of(r), b.label + " " + arm, v, b.verdict == "slower",
                                fmt::format("{} {} {}: median {:.4g} {}", label_of(r), b.label, arm, v, b.unit)});
      }
      t.rows.push_back({td(label_of(r)), td(b.label), tdn(general(known(b.base_median)) + " " + b.unit),
                        tdn(general(known(b.candidate_median)) + " " + b.unit), tdn(fixed3(known(b.speedup))), tdv(b.verdict)});
      t.red.push_back(b.verdict == "slower");
    }
    if (benched) chart.order.push_back(label_of(r));
  }
  if (t.rows.empty()) {
    page.add("<p>No experiment of this page has a benchmark.</p>\n");
    return;
  }
  chart.y_title = fmt::format("median ({}, log)", unit);
  if (!chart.points.empty()) page.add("<div class=\"charts\">\n" + page.chart("medians", history_lines_spec(chart)) + "</div>\n");
  page.add(t.html());
}

}  // namespace

void gate_trend_sections(Page& page, const std::vector<ExperimentRecord>& records, const ReportLinks& links) {
  if (records.empty()) return;
  headroom_section(page, records, links);
  median_section(page, records);
}

}  // namespace densefeed::report_page
