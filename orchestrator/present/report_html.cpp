#include "report_html.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <fstream>

#include <fmt/format.h>

#include "error.h"
#include "experiment_state.h"
#include "printable.h"
#include "report_context.h"
#include "report_page.h"
#include "report_trends.h"
#include "vega_bundle.h"
#include "vega_specs.h"
#include "workspace.h"

namespace densefeed {
namespace {

using namespace report_page;

// --- the experiment page --------------------------------------------------

struct CaseAxes {
  std::string rows, columns;
  std::vector<std::string> groups;  // other keys that vary
};

CaseAxes case_axes(const std::vector<GateCaseRow>& cases, const ReportAxes& wanted) {
  std::vector<std::string> order;
  std::map<std::string, std::set<std::string>> values;
  std::map<std::string, bool> numeric;
  for (const auto& c : cases) {
    if (!c.values.is_object()) continue;
    for (const auto& [k, v] : c.values.items()) {
      if (!values.count(k)) {
        order.push_back(k);
        numeric[k] = true;
      }
      values[k].insert(case_value(v));
      numeric[k] = numeric[k] && v.is_number();
    }
  }
  CaseAxes a;
  const auto usable = [&](const std::string& k) { return values.count(k) && numeric[k]; };
  if (usable(wanted.rows) && usable(wanted.columns)) {
    a.rows = wanted.rows;
    a.columns = wanted.columns;
  } else {
    for (const auto& k : order) {
      if (!numeric[k] || values[k].size() < 2) continue;
      if (a.rows.empty()) a.rows = k;
      else if (a.columns.empty()) a.columns = k;
    }
    if (a.columns.empty()) std::swap(a.rows, a.columns);  // one varying key: one row
  }
  for (const auto& k : order) {
    if (k != a.rows && k != a.columns && values[k].size() > 1) a.groups.push_back(k);
  }
  return a;
}

std::string group_of(const J& case_json, const CaseAxes& axes) {
  std::string g;
  for (const auto& k : axes.groups) {
    // An empty value (seq_lens: "" for one sequence) is the key's default: left out of the name.
    if (case_json.contains(k) && !case_value(case_json[k]).empty()) g += fmt::format("{}{}={}", g.empty() ? "" : " ", k, case_value(case_json[k]));
  }
  return g;
}

std::vector<std::string> sorted_numeric(std::set<std::string> values) {
  std::vector<std::string> v(values.begin(), values.end());
  std::sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) { return std::stod(a) < std::stod(b); });
  return v;
}

// The gate run's verdict, its facts, why it was not green, the lock's problems.
void gate_heading(Page& page, const GateRunRow& run) {
  page.add(fmt::format("<h2 id=\"gate\">Gate <code>{}</code>: <span class=\"verdict-{}\" data-gate-verdict>{}</span></h2>\n",
                       html_escape(run.gate), html_escape(run.verdict), html_escape(run.verdict)));
  page.add(fmt::format("<p>profile {}, seed {}, {} cases, {:.1f} s; gate file sha256 <code>{}</code>; sandbox: {}.</p>\n",
                       html_escape(run.profile), html_escape(run.seed), run.cases.size(), run.wall_s.value_or(0),
                       html_escape(run.gate_sha256), html_escape(run.sandbox.empty() ? "not recorded" : run.sandbox)));
  if (!run.reason.empty()) page.add("<p><b>Why:</b> " + html_escape(run.reason) + "</p>\n");
  for (const auto& p : run.lock_problems) page.notice("Lock: " + p, "bad");
}

using OutputMetric = std::pair<std::string, std::string>;  // (output, metric)

// Every (output, metric) in the order recorded.
std::vector<OutputMetric> recorded_metrics(const std::vector<GateCaseRow>& cases) {
  std::vector<OutputMetric> metrics;
  for (const auto& c : cases) {
    for (const auto& m : c.metrics) {
      const std::pair<std::string, std::string> key{m.output, m.metric};
      if (std::find(metrics.begin(), metrics.end(), key) == metrics.end()) metrics.push_back(key);
    }
  }
  return metrics;
}

// The cases that carry one (output, metric), grouped by the case keys other
// than the table's rows and columns.
struct MetricGroups {
  std::vector<std::string> groups;  // in the order first seen
  std::map<std::string, std::set<std::string>> rows, columns;
  std::map<std::string, std::vector<std::pair<const GateCaseRow*, const MetricRow*>>> in_group;  // (case, metric row)
  std::optional<double> bound;
};

MetricGroups metric_groups(const std::vector<GateCaseRow>& cases, const CaseAxes& axes, const std::string& output, const std::string& metric) {
  MetricGroups mg;
  for (const auto& c : cases) {
    const J& cj = c.values;
    if (!cj.contains(axes.columns) || (!axes.rows.empty() && !cj.contains(axes.rows))) continue;
    for (const auto& m : c.metrics) {
      if (m.output != output || m.metric != metric) continue;
      const std::string g = group_of(cj, axes);
      if (!mg.in_group.count(g)) mg.groups.push_back(g);
      mg.in_group[g].push_back({&c, &m});
      mg.rows[g].insert(axes.rows.empty() ? "all" : case_value(cj[axes.rows]));
      mg.columns[g].insert(case_value(cj[axes.columns]));
      mg.bound = known(m.bound);
    }
  }
  return mg;
}

// One group of one (output, metric): a heatmap, a trend chart (when any
// value is positive) and the table of the same numbers.
void metric_group_charts(Page& page, const CaseAxes& axes, const std::string& output, const std::string& metric, const MetricGroups& mg,
                         const std::string& g) {
  const std::optional<double> bound = mg.bound;
  HeatmapChart h;
  h.title = fmt::format("{}.{}{}", output, metric, g.empty() ? "" : " — " + g);
  h.subtitle = fmt::format("outlined cells exceed the bound {}", sci(bound));
  h.row_key = axes.rows;
  h.column_key = axes.columns;
  h.value_title = metric;
  h.rows = axes.rows.empty() ? std::vector<std::string>{"all"} : sorted_numeric(mg.rows.at(g));
  h.columns = sorted_numeric(mg.columns.at(g));
  h.bound = bound;
  TrendChart t;
  t.title = fmt::format("{}.{} against {}{}", output, metric, axes.columns, g.empty() ? "" : " — " + g);
  t.x_title = axes.columns;
  t.y_title = metric + " (log)";
  t.series_title = axes.rows;
  t.bound = bound;
  Table table;
  table.id = fmt::format("metric {}.{} {}", output, metric, g);
  table.head = {axes.rows.empty() ? "" : axes.rows + " \\ " + axes.columns};
  for (const auto& col : h.columns) table.head.push_back(col);
  std::map<std::pair<std::string, std::string>, const MetricRow*> at;
  for (const auto& [c, m] : mg.in_group.at(g)) {
    const J& cj = c->values;
    at[{axes.rows.empty() ? "all" : case_value(cj[axes.rows]), case_value(cj[axes.columns])}] = m;
  }
  for (const auto& r : h.rows) {
    std::vector<std::string> row = {"<th>" + html_escape(r) + "</th>"};
    std::vector<TrendPoint> line;
    for (const auto& col : h.columns) {
      const auto it = at.find({r, col});
      if (it == at.end()) {
        row.push_back("<td></td>");
        continue;
      }
      const MetricRow& m = *it->second;
      const auto value = known(m.value);
      const bool failed = !m.passed;
      const std::string where = fmt::format("{}{}={}{}", axes.rows.empty() ? "" : axes.rows + "=" + r + " ", axes.columns, col,
                                            g.empty() ? "" : " " + g);
      const std::string description =
          fmt::format("{}: {}.{} {} {} the bound {}", where, output, metric, sci(value), failed ? "over" : "within", sci(bound));
      h.cells.push_back({r, col, value, failed, value ? fmt::format("{:.2e}", *value) : "NaN", description});
      row.push_back(fmt::format("<td class=\"num{}\" data-cell=\"{}\">{}</td>", failed ? " red" : "", html_escape(where), sci(value)));
      if (value && *value > 0) line.push_back({axes.rows.empty() ? "all" : axes.rows + "=" + r, std::stod(col), *value, failed, description});
    }
    t.points.insert(t.points.end(), line.begin(), line.end());
    table.rows.push_back(row);
  }
  page.add("<div class=\"charts\">\n" + page.chart("heatmap", heatmap_spec(h)));
  if (!t.points.empty()) page.add(page.chart("trend", trend_spec(t)));
  page.add("</div>\n" + table.html());
}

// Per (output, metric): a heading, then each group's charts and table.
void metric_charts(Page& page, const std::vector<GateCaseRow>& cases, const CaseAxes& axes, const std::vector<OutputMetric>& metrics) {
  if (axes.columns.empty()) return;
  for (const auto& [output, metric] : metrics) {
    const MetricGroups mg = metric_groups(cases, axes, output, metric);
    // One varying key: "o.rel_l2 over batch", never "over - × batch".
    const std::string over = axes.rows.empty() ? axes.columns : axes.rows + " × " + axes.columns;
    page.add(fmt::format("<h3>{}.{} over {} (bound {})</h3>\n", html_escape(output), html_escape(metric), html_escape(over), sci(mg.bound)));
    // An exact output (every case's error 0) has nothing a colour scale could
    // show: a heat map of zeros on a made-up scale says less than the sentence.
    bool exact = true;
    for (const auto& [g, rows] : mg.in_group) {
      for (const auto& cm : rows) exact = exact && cm.second->passed && cm.second->value == 0;
    }
    if (exact && !mg.in_group.empty()) {
      std::size_t n = 0;
      for (const auto& [g, rows] : mg.in_group) n += rows.size();
      page.add(fmt::format("<p data-exact=\"{}.{}\">All cases exact (error 0): {} case(s), {}.{} = 0 in each (bound {}).</p>\n",
                           html_escape(output), html_escape(metric), n, html_escape(output), html_escape(metric), sci(mg.bound)));
      continue;
    }
    for (const auto& g : mg.groups) metric_group_charts(page, axes, output, metric, mg, g);
  }
}

// Per-slice: the ledger keeps the first slice over the bound, per failing case and metric.
void slice_section(Page& page, const std::vector<GateCaseRow>& cases, const CaseAxes& axes, const std::vector<OutputMetric>& metrics) {
  Table slices;
  slices.id = "slices";
  slices.head = {"case", "output", "metric", "value", "first failing slice"};
  HeatmapChart sh;
  std::set<std::string> srows, scols;
  for (const auto& c : cases) {
    for (const auto& m : c.metrics) {
      if (!m.first_failing_slice) continue;
      const auto slice = *m.first_failing_slice;
      slices.rows.push_back({td(c.label), td(m.output), td(m.metric), tdn(sci(known(m.value))), tdn(std::to_string(slice))});
      slices.red.push_back(true);
      const J& cj = c.values;
      if (!axes.columns.empty() && cj.contains(axes.columns) && (axes.rows.empty() || cj.contains(axes.rows)) && m.metric == (metrics.empty() ? "" : metrics[0].second)) {
        const std::string r = axes.rows.empty() ? "all" : case_value(cj[axes.rows]);
        const std::string col = case_value(cj[axes.columns]);
        const std::string g = group_of(cj, axes);
        const std::string row = g.empty() ? r : r + " " + g;
        srows.insert(row);
        scols.insert(col);
        sh.cells.push_back({row, col, static_cast<double>(slice), false, std::to_string(slice),
                            fmt::format("{} ({}): {}.{} first fails at slice {}", c.label, g, m.output, m.metric, slice)});
      }
    }
  }
  page.add("<h3 id=\"slices\">Per-slice errors of partitioned outputs</h3>\n");
  if (slices.rows.empty()) {
    page.add("<p>No slice of a partitioned output went over its bound (the ledger records, for each failing case and metric of an "
             "output with a partition axis, the first slice over the bound).</p>\n");
    return;
  }
  page.add("<p>The ledger records, for each failing case and metric of an output with a partition axis, the first slice (index "
           "along that axis, in order) that goes over the bound.</p>\n");
  if (!sh.cells.empty()) {
    sh.title = fmt::format("first failing slice ({}.{})", metrics[0].first, metrics[0].second);
    sh.row_key = axes.rows;
    sh.column_key = axes.columns;
    sh.value_title = "slice";
    sh.log_scale = false;
    sh.rows.assign(srows.begin(), srows.end());
    std::sort(sh.rows.begin(), sh.rows.end(), [](const std::string& a, const std::string& b) {
      const double x = std::stod(a), y = std::stod(b);
      return x != y ? x < y : a < b;
    });
    sh.columns = sorted_numeric(scols);
    page.add("<div class=\"charts\">\n" + page.chart("slices", heatmap_spec(sh)) + "</div>\n");
  }
  page.add(slices.html());
}

// Every case: its verdict, each metric's value and bound, its reason; red rows for cases not green.
void every_case_table(Page& page, const std::vector<GateCaseRow>& cases) {
  Table all;
  all.id = "cases";
  all.head = {"#", "case", "verdict", "metrics (value / bound)", "reason"};
  for (const auto& c : cases) {
    std::string ms;
    for (const auto& m : c.metrics) {
      ms += fmt::format("{}{}.{} {} / {}", ms.empty() ? "" : "; ", m.output, m.metric, sci(known(m.value)), sci(known(m.bound)));
    }
    all.rows.push_back({tdn(std::to_string(c.index)), td(c.label), tdv(c.verdict), td(ms), td(c.reason)});
    all.red.push_back(c.verdict != "green");
  }
  page.add("<h3>Every case</h3>\n" + all.html());
}

void gate_section(Page& page, const GateRunRow& run, const ReportAxes& wanted) {
  gate_heading(page, run);
  const std::vector<GateCaseRow>& cases = run.cases;
  const CaseAxes axes = case_axes(cases, wanted);
  const std::vector<OutputMetric> metrics = recorded_metrics(cases);
  metric_charts(page, cases, axes, metrics);
  slice_section(page, cases, axes, metrics);
  every_case_table(page, cases);
}

void bench_section(Page& page, const ExperimentRecord& record) {
  page.add("<h2 id=\"bench\">Benchmark</h2>\n");
  const auto& run = record.gate_run;
  const auto& cases = record.bench_cases;
  if (cases.empty()) {
    if (!run) {
      page.notice("No benchmark: the gate has not run.");
    } else if (run->verdict != "green") {
      page.notice(fmt::format("No benchmark: the gate is {}. densefeed never measures, stores or prints a speedup for an experiment "
                              "whose gate is not green.", run->verdict), "bad");
    } else if (const StageOutcome& bench = record.summary.stage("bench");
               bench.verdict == StageVerdict::red || bench.verdict == StageVerdict::error) {
      // The stage failed before it recorded a case (the candidate crashed
      // in bench mode, or the base failed): its verdict, never "not run".
      page.notice(fmt::format("The benchmark is {}: {}", to_string(bench.verdict), bench.reason), "bad");
    } else {
      page.notice("No benchmark recorded: the gate is green but no bench case ran (--no-bench, or the gate declares none).");
    }
    return;
  }
  std::vector<SpeedupMark> marks;
  Table summary;
  summary.id = "bench";
  summary.head = {"bench case", "verdict", "speedup", "interval", "confidence", "predicted", "noise threshold", "p", "rounds",
                  "warm-up (base / candidate)", "base median", "candidate median", "reason"};
  for (const auto& b : cases) {
    const std::string unit = b.unit;
    std::vector<BenchSample> samples;
    Table rounds;
    rounds.id = "rounds " + b.label;
    rounds.head = {"round", "base samples (" + unit + ")", "candidate samples (" + unit + ")"};
    int r = 0;
    for (const auto& round : b.samples) {
      ++r;
      std::vector<std::string> cells = {tdn(std::to_string(r))};
      for (const char* arm : {"base", "candidate"}) {
        const std::vector<double>& xs = std::string(arm) == "base" ? round.base_ms : round.candidate_ms;
        std::string text;
        int i = 0;
        for (const double v : xs) {
          text += fmt::format("{}{:.4g}", text.empty() ? "" : ", ", v);
          samples.push_back({r, arm, i++, static_cast<int>(xs.size()), v, fmt::format("round {} {} {:.4g} {}", r, arm, v, unit)});
        }
        cells.push_back(tdn(text));
      }
      rounds.rows.push_back(cells);
    }
    const std::string label = b.label;
    page.add(fmt::format("<h3>{}: <span class=\"verdict-{}\">{}</span></h3>\n<p>{}</p>\n", html_escape(label),
                         b.verdict == "slower" ? "red" : "green", html_escape(b.verdict), html_escape(b.reason)));
    page.add("<div class=\"charts\">\n" + page.chart("bench-samples", bench_samples_spec(fmt::format("{}: samples per round ({})", label, unit), unit, samples)) +
             "</div>\n" + rounds.html());
    SpeedupMark m;
    m.label = label;
    m.speedup = known(b.speedup).value_or(0);
    m.lo = known(b.lo).value_or(m.speedup);
    m.hi = known(b.hi).value_or(m.speedup);
    m.predicted = b.predicted_speedup;
    m.threshold = known(b.threshold);
    m.verdict = b.verdict;
    m.description = fmt::format("{}: speedup {} [{}, {}], {}", label, fixed3(m.speedup), fixed3(m.lo), fixed3(m.hi), m.verdict);
    marks.push_back(m);
    summary.rows.push_back({td(label), tdv(m.verdict), tdn(fixed3(m.speedup)), tdn(fmt::format("[{}, {}]", fixed3(m.lo), fixed3(m.hi))),
                            tdn(fmt::format("{:.1f} %", 100 * known(b.ci_confidence).value_or(0))), tdn(fixed3(m.predicted)),
                            tdn(fmt::format("{:.1f} %", 100 * m.threshold.value_or(0))), tdn(general(known(b.p_value))), tdn(std::to_string(b.rounds)),
                            tdn(b.base_warmup_s && b.candidate_warmup_s ? fmt::format("{:.1f} s / {:.1f} s", *b.base_warmup_s, *b.candidate_warmup_s)
                                                                        : std::string("not recorded")),
                            tdn(general(known(b.base_median)) + " " + unit), tdn(general(known(b.candidate_median)) + " " + unit), td(b.reason)});
    summary.red.push_back(m.verdict == "slower");
  }
  page.add("<h3>Speedup</h3>\n<div class=\"charts\">\n" + page.chart("speedup", speedup_spec("speedup with its confidence interval", marks)) + "</div>\n" +
           summary.html());
}

void trace_section(Page& page, const std::vector<TraceFindingRow>& findings) {
  if (findings.empty()) return;
  page.add("<h2 id=\"trace\">Trace findings</h2>\n");
  Table t;
  t.id = "trace";
  t.head = {"arm", "check", "a", "b", "value", "bound", "verdict", "reason"};
  for (const auto& f : findings) {
    const J& d = f.details;
    const std::string unit = str(d, "unit");
    const auto fmt_value = [&](std::optional<double> v) {
      if (!v) return std::string("—");
      return unit == "ms" ? fmt::format("{:.4g} ms", *v) : fmt::format("{:.1f} %", 100 * *v);
    };
    const bool passed = f.passed;
    t.rows.push_back({td(f.arm), td(f.kind), td(str(d, "a")), td(str(d, "b")), tdn(fmt_value(f.value)),
                      tdn(fmt_value(f.bound)), tdv(passed ? "green" : "red"), td(str(d, "reason"))});
    t.red.push_back(!passed);
    const J& window = d["window"];
    const double w0 = num(window, "start_ns").value_or(0), w1 = num(window, "end_ns").value_or(0);
    const auto ms = [&](const J& s, const char* key) { return (num(s, key).value_or(0) - w0) / 1e6; };
    const auto lane_of = [](const J& s) { return str(s, "lane") + (s.contains("rank") ? fmt::format(" (rank {})", str(s, "rank")) : ""); };
    const bool share = f.kind == "share";
    std::vector<LaneInterval> lanes;
    std::vector<OverlapBand> overlaps;
    Table it;
    it.id = fmt::format("intervals {} {}", f.arm, f.index);
    const J involved = d.value("involved", J::array());
    if (!share && !involved.empty()) {
      // The check's A and B slices on their lanes and where they meet (the overlap, shaded).
      it.head = {"lane", "role", "slice", "start (ms)", "end (ms)", "exposed (ms)"};
      for (const auto& s : involved) {
        const bool a = str(s, "role") == "a";
        const double start = ms(s, "start_ns"), end = ms(s, "end_ns"), exposed = num(s, "ns").value_or(0) / 1e6;
        const std::string lane = lane_of(s);
        std::string description = fmt::format("{}: {} {} on {}: {:.3f} to {:.3f} ms", f.arm, a ? "A" : "B", str(s, "name"), lane, start, end);
        if (a) description += fmt::format(", {:.3f} ms exposed", exposed);
        lanes.push_back({lane, str(s, "name"), start, end, a && end > start ? std::clamp(exposed / (end - start), 0.0, 1.0) : 0, description,
                         a ? "a" : "b"});
        it.rows.push_back({td(lane), td(a ? "A" : "B"), td(str(s, "name")), tdn(fmt::format("{:.3f}", start)), tdn(fmt::format("{:.3f}", end)),
                           tdn(a ? fmt::format("{:.3f}", exposed) : "")});
      }
      for (const auto& o : d.value("overlaps", J::array())) {
        const double start = ms(o, "start_ns"), end = ms(o, "end_ns");
        overlaps.push_back({start, end, fmt::format("{}: overlap of A and B: {:.3f} to {:.3f} ms", f.arm, start, end)});
      }
    } else {
      it.head = {"lane", "slice", "start (ms)", "end (ms)", share ? "in the selection (ms)" : "exposed (ms)"};
      for (const auto& s : d.value("intervals", J::array())) {
        const double start = ms(s, "start_ns"), end = ms(s, "end_ns");
        const double ns = num(s, "ns").value_or(0) / 1e6;
        const double fraction = end > start ? std::clamp(ns / (end - start), 0.0, 1.0) : 0;
        const std::string lane = lane_of(s);
        lanes.push_back({lane, str(s, "name"), start, end, fraction,
                         fmt::format("{} on {}: {:.3f} to {:.3f} ms, {:.3f} ms {}", str(s, "name"), lane, start, end, ns,
                                     share ? "in the selection" : "exposed"),
                         ""});
        it.rows.push_back({td(lane), td(str(s, "name")), tdn(fmt::format("{:.3f}", start)), tdn(fmt::format("{:.3f}", end)), tdn(fmt::format("{:.3f}", ns))});
      }
    }
    page.add(fmt::format("<h3>{} arm, {} check {}: <span class=\"verdict-{}\">{}</span></h3>\n", html_escape(f.arm),
                         html_escape(f.kind), f.index, passed ? "green" : "red", passed ? "passed" : "failed"));
    if (lanes.empty()) {
      page.add("<p>The check names no intervals (nothing was exposed, or the selection matched nothing).</p>\n");
    } else {
      const std::string title =
          involved.empty() ? fmt::format("{} arm: {} intervals ({} of {} listed)", f.arm, f.kind, lanes.size(), str(d, "intervals_total"))
                           : fmt::format("{} arm: A = {}, B = {} ({} of {} slices drawn, {} overlap segments)", f.arm, str(d, "a"), str(d, "b"),
                                         lanes.size(), str(d, "involved_total"), overlaps.size());
      page.add("<div class=\"charts\">\n" +
               page.chart("lane-timeline", lane_timeline_spec(title, lanes, overlaps, (w1 - w0) / 1e6, share ? "in the selection" : "exposed")) +
               "</div>\n" + it.html());
      if (!involved.empty()) {
        Table ot;
        ot.id = fmt::format("overlaps {} {}", f.arm, f.index);
        ot.head = {"overlap start (ms)", "end (ms)", "length (ms)"};
        for (const auto& o : overlaps) {
          ot.rows.push_back({tdn(fmt::format("{:.3f}", o.start_ms)), tdn(fmt::format("{:.3f}", o.end_ms)), tdn(fmt::format("{:.3f}", o.end_ms - o.start_ms))});
        }
        page.add(overlaps.empty() ? fmt::format("<p data-no-overlap>A and B never overlap in the window ({} arm).</p>\n", html_escape(f.arm))
                                  : fmt::format("<p>{} segment(s) where A and B overlap, {:.3f} ms in all{}:</p>\n", overlaps.size(),
                                                [&] { double sum = 0; for (const auto& o : overlaps) sum += o.end_ms - o.start_ms; return sum; }(),
                                                d.value("overlaps_total", 0) > static_cast<int>(overlaps.size()) ? fmt::format(" (of {} listed)", str(d, "overlaps_total")) : "") +
                                        ot.html());
      }
    }
  }
  page.add("<h3>All checks</h3>\n" + t.html());
}

void acceptance_and_review_section(Page& page, const ExperimentRecord& record) {
  page.add("<h2 id=\"review\">Review, promotion and acceptance</h2>\n");
  Table events;
  events.id = "events";
  events.head = {"at", "event", "owner", "host", "pid", "detail"};
  for (const auto& e : record.events) {
    events.rows.push_back({td(e.at), td(e.event), td(e.owner), td(e.owner_host), tdn(e.owner_pid ? std::to_string(*e.owner_pid) : ""), td(e.detail)});
  }
  page.add("<h3>Life of the experiment</h3>\n" + events.html());
  Table reviews;
  reviews.id = "reviews";
  reviews.head = {"at", "category", "decision", "reviewer", "note"};
  for (const auto& r : record.reviews) {
    reviews.rows.push_back({td(r.reviewed_at), td(r.category), td(r.decision), td(r.reviewer), td(r.note)});
    reviews.red.push_back(r.decision == "reject");
  }
  std::string categories;
  for (const auto& [k, v] : record.categories.items()) {
    categories += fmt::format("{}{}: {}", categories.empty() ? "" : ", ", k, case_value(v));
  }
  page.add(fmt::format("<h3>Reviews</h3>\n<p>Risk categories (latest decision): {}</p>\n", html_escape(categories.empty() ? "none declared" : categories)));
  page.add(reviews.rows.empty() ? "<p>No review recorded.</p>\n" : reviews.html());
  const J& promotion = record.promotion;
  page.add(promotion.is_object() ? fmt::format("<p data-promotion>Promoted by <b>{}</b> at {}.</p>\n", html_escape(str(promotion, "promoted_by")),
                                               html_escape(str(promotion, "promoted_at")))
                                 : "<p>Not promoted.</p>\n");
  page.add("<h3 id=\"acceptance\">Acceptance</h3>\n");
  const auto& runs = record.acceptance_runs;
  if (runs.empty()) {
    std::string criteria;
    for (const auto& c : record.acceptance_criteria()) criteria += "<li><code>" + html_escape(case_value(c)) + "</code></li>";
    page.add(criteria.empty() ? "<p>No acceptance criteria in the manifest.</p>\n"
                              : "<p>No acceptance run yet. Criteria written before any result:</p><ul>" + criteria + "</ul>\n");
  }
  for (const auto& a : runs) {
    Table t;
    t.id = "acceptance " + std::to_string(a.id);
    t.head = {"criterion", "statistic", "left", "right", "verdict"};
    std::vector<CriterionMark> marks;
    for (const auto& c : a.criteria) {
      const bool passed = c.value("passed", false);
      t.rows.push_back({td(str(c, "criterion")), td(str(c, "statistic")), tdn(general(num(c, "lhs"))), tdn(general(num(c, "rhs"))),
                        tdv(passed ? "green" : "red")});
      t.red.push_back(!passed);
      if (num(c, "lhs") && num(c, "rhs")) {
        marks.push_back({str(c, "criterion"), *num(c, "lhs"), *num(c, "rhs"), passed,
                         fmt::format("{}: left {}, right {}, {}", str(c, "criterion"), general(num(c, "lhs")), general(num(c, "rhs")), passed ? "holds" : "fails")});
      }
    }
    if (!marks.empty()) {
      page.add("<div class=\"charts\">\n" +
               page.chart("acceptance", acceptance_spec(fmt::format("acceptance run {} ({} {})", a.id, a.verdict, a.started_at), marks)) +
               "</div>\n");
    }
    page.add(fmt::format("<p>Run {} at {}: <span class=\"verdict-{}\">{}</span> {}</p>\n", a.id, html_escape(a.started_at),
                         a.verdict == "pass" ? "green" : "red", html_escape(a.verdict), html_escape(a.reason)) +
             t.html());
  }
}

}  // namespace

std::string html_escape(const std::string& raw) {
  const std::string text = one_line(raw);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

// What to try next (next_steps.h: the argv an agent runs), cheapest first.
void next_steps_list(Page& page, const std::vector<NextStep>& next, const std::string& heading = "Next (cheapest first)") {
  if (next.empty()) return;
  std::string items;
  for (const auto& s : next) {
    std::string command;
    for (const auto& a : s.command) command += (command.empty() ? "" : " ") + html_escape(a);
    items += fmt::format("<li data-next=\"{}\"><b>[{}]</b> {}{}<br><small>why: {}</small></li>\n", html_escape(s.kind), html_escape(s.kind),
                         html_escape(s.suggestion), command.empty() ? "" : "<br><code>" + command + "</code>", html_escape(s.why));
  }
  page.add("<h2 id=\"next\">" + html_escape(heading) + "</h2>\n<ol>\n" + items + "</ol>\n");
}

// Where the gate run came from (a WARNING as the text report gives it) and
// what the benchmark ran on.
void context_section(Page& page, const ExperimentRecord& record) {
  const ProvenanceLine p = provenance_line(record.gate_run ? record.gate_run->provenance : J());
  page.add(fmt::format("<dl class=\"facts\" data-context>\n<dt>provenance</dt><dd data-provenance=\"{}\">{}</dd>\n"
                       "<dt>environment</dt><dd data-environment>{}</dd>\n</dl>\n",
                       !p.known ? "unknown" : p.clean ? "clean" : "warning", html_escape(p.text), html_escape(environment_line(record))));
  if (p.known && !p.clean) page.notice("Provenance: " + p.text, "warn");
}

// The compare pages of a folder that hold this experiment, and its harness logs.
void links_section(Page& page, const ExperimentRecord& record, const ReportLinks& links) {
  const std::int64_t id = record.id();
  std::string compares;
  for (const auto& [ab, href] : links.compares) {
    if (ab.first != id && ab.second != id) continue;
    compares += "<li>" + link(href, fmt::format("experiment {} against experiment {}", ab.first, ab.second)) + "</li>";
  }
  if (!compares.empty()) page.add("<h2 id=\"compare\">Compared with</h2>\n<ul data-compares>" + compares + "</ul>\n");
  const auto it = links.logs.find(id);
  if (it == links.logs.end()) return;
  Table t;
  t.id = "harness logs";
  t.head = {"process", "case", "stream", "bytes", "log"};
  std::map<std::string, std::string> case_of;  // candidate-NNN -> its case's label
  if (record.gate_run) {
    for (const auto& c : record.gate_run->cases) case_of[fmt::format("candidate-{:03}", c.index)] = c.label;
  }
  for (const auto& l : it->second) {
    const std::string size = l.truncated ? fmt::format("{} (last {} of {})", l.bytes, l.bytes, l.original_bytes) : std::to_string(l.bytes);
    t.rows.push_back({td(l.process), td(case_of.count(l.process) ? case_of[l.process] : ""), td(l.stream), tdn(size),
                      td_html(link(l.href, l.stream + ".log"))});
  }
  page.add("<h2 id=\"logs\">Harness logs</h2>\n<p>Each process's stdout and stderr as the run folder kept them, copied into this report.</p>\n" +
           (t.rows.empty() ? std::string("<p>The run folder holds no logs.</p>\n") : t.html()));
}

// An experiment's id, linked to its page when the folder has one.
std::string id_cell(const ReportLinks& links, std::int64_t id) {
  const auto it = links.experiments.find(id);
  return it == links.experiments.end() ? tdn(std::to_string(id)) : "<td class=\"num\">" + link(it->second, std::to_string(id)) + "</td>";
}

// Per experiment: where its gate run came from (WARNING rows red), what its
// benchmark ran on, and the compare pages that hold it.
void records_context_section(Page& page, const std::vector<ExperimentRecord>& records, const ReportLinks& links) {
  if (records.empty()) return;
  Table t;
  t.id = "provenance";
  t.head = {"id", "experiment", "provenance", "environment", "compare"};
  int warnings = 0;
  for (const auto& r : records) {
    const ProvenanceLine p = provenance_line(r.gate_run ? r.gate_run->provenance : J());
    std::string compares;
    for (const auto& [ab, href] : links.compares) {
      if (ab.second == r.id()) compares += (compares.empty() ? "" : " ") + link(href, fmt::format("against #{}", ab.first));
    }
    t.rows.push_back({id_cell(links, r.id()), td(r.summary.name), td(p.text), td(environment_line(r)), td_html(compares)});
    t.red.push_back(p.known && !p.clean);
    warnings += p.known && !p.clean;
  }
  if (warnings) page.notice(fmt::format("{} of {} experiment(s) ran from a checkout or gate store that was not clean (provenance WARNING).", warnings,
                                        records.size()), "warn");
  page.add("<h2 id=\"context\">Provenance and environment</h2>\n" + t.html());
}

// A folder's index: its gate pages and compare pages.
void index_section(Page& page, const ReportLinks& links) {
  if (links.index.empty()) return;
  std::string gates, compares;
  for (const auto& [g, href] : links.gates) gates += "<li>" + link(href, "gate " + g) + "</li>";
  for (const auto& [ab, href] : links.compares) compares += "<li>" + link(href, fmt::format("experiment {} against experiment {}", ab.first, ab.second)) + "</li>";
  page.add("<h2 id=\"pages\">Pages</h2>\n<p>Every experiment's page is linked from its id below.</p>\n<h3>Gates</h3>\n<ul data-gates>" + gates +
           "</ul>\n" + (compares.empty() ? "" : "<h3>Compare pages (each experiment against the one before it on its gate)</h3>\n<ul data-compares>" + compares + "</ul>\n"));
}

// The links above a folder's page: the index, and the gate's page.
std::string nav_html(const ReportLinks& links, const std::string& gate) {
  if (links.index.empty()) return "";
  std::string nav = link(links.index, "index");
  if (const auto g = links.gates.find(gate); !gate.empty() && g != links.gates.end()) nav += " " + link(g->second, "gate " + gate);
  return nav;
}

}  // namespace

namespace {

// What to try next (next_steps.h: the argv an agent runs), the experiments
// that replay or narrow this one (parent and children), and what densefeed
// narrow concluded.
std::string experiment_href(const ReportLinks& links, std::int64_t id) {
  const auto it = links.experiments.find(id);
  return it == links.experiments.end() ? "" : it->second;
}

void next_and_narrowing_section(Page& page, const ExperimentRecord& record, const std::vector<NextStep>& next, const ReportLinks& links) {
  if (record.parent_id) {
    page.add(fmt::format("<p data-parent>Step <b>{}</b> of {} (densefeed report {}).</p>\n", html_escape(record.step),
                         link(experiment_href(links, *record.parent_id), fmt::format("experiment {}", *record.parent_id)), *record.parent_id));
  }
  for (const auto& n : record.narrowings) {
    page.add(fmt::format("<h2>Narrowed</h2>\n<p data-narrowing>layer <b>{}</b>: {}</p>\n", html_escape(n.layer), html_escape(n.conclusion)));
    Table t;
    t.id = "narrowing";
    t.head = {"experiment", "step", "cases", "red", "s", "shows"};
    for (const auto& s : n.result.value("steps", J::array())) {
      t.rows.push_back({td(std::to_string(s.value("experiment", 0))), td(s.value("step", "")), tdn(std::to_string(s.value("cases", 0))),
             tdn(std::to_string(s.value("red", 0))), tdn(fmt::format("{:.1f}", s.value("seconds", 0.0))), td(s.value("shows", ""))});
    }
    page.add(t.html());
  }
  if (!record.children.empty()) {
    Table t;
    t.id = "children";
    t.head = {"experiment", "step"};
    for (const auto& [id, step] : record.children) t.rows.push_back({td_html(link(experiment_href(links, id), std::to_string(id))), td(step)});
    page.add("<h2>Replays and narrowing steps</h2>\n" + t.html());
  }
  next_steps_list(page, next);
}

}  // namespace


ReportPage experiment_report(const ExperimentRecord& record, const LedgerFacts& facts, const ReportAxes& axes, const std::string& vega_scripts,
                             const std::vector<NextStep>& next, const ReportLinks& links) {
  const ExperimentSummary& summary = record.summary;
  const std::string id = std::to_string(record.id());
  Page page("experiment", fmt::format("Experiment {}: {}", id, summary.name), facts);
  page.nav(nav_html(links, summary.gate));
  const std::string state = to_string(summary.state);
  const auto& run = record.gate_run;
  page.add(fmt::format("<p>by <b>{}</b>, submitted {}; state <b data-state>{}</b>; gate <code>{}</code>; manifest {} (sha256 <code>{}</code>).</p>\n",
                       html_escape(record.author), html_escape(summary.submitted_at), html_escape(state), html_escape(summary.gate),
                       html_escape(record.manifest_path), html_escape(record.manifest_sha256)));
  page.add(fmt::format("<p>candidate <code>{}</code> {} &nbsp; base <code>{}</code> {}</p>\n", html_escape(record.candidate.revision),
                       html_escape(record.candidate.params.dump()), html_escape(record.base.revision), html_escape(record.base.params.dump())));
  context_section(page, record);
  if (!run) {
    if (summary.state == ExperimentState::queued || summary.state == ExperimentState::requeued) {
      page.notice(fmt::format("Experiment {} is {}: no stage has run yet, so there is no verdict, benchmark or trace to show. "
                              "A worker (densefeed worker) takes it from the queue.", id, state));
    } else if (summary.state == ExperimentState::started) {
      page.notice(fmt::format("Experiment {} is running: its gate has not finished.", id));
    } else {
      const std::string detail = record.events.empty() ? "" : record.events.back().detail;
      page.notice(fmt::format("Experiment {} was {} before its gate ran{}.", id, state, detail.empty() ? "" : ": " + detail), "warn");
    }
  }

  // Hypothesis, prediction and outcome side by side.
  std::string outcome;
  if (!run) {
    outcome = fmt::format("<p>No outcome yet (state {}).</p>", html_escape(state));
  } else {
    outcome = fmt::format("<p>Gate: <span class=\"verdict-{}\">{}</span>{}</p>", html_escape(run->verdict), html_escape(run->verdict),
                          run->reason.empty() ? "" : " — " + html_escape(run->reason));
    // The experiment's verdict where a later stage decided it (a red or
    // errored bench, trace or acceptance after a green gate).
    if (summary.verdict != "green" && summary.verdict != "pending" && !summary.verdict_stage.empty() && summary.verdict_stage != "gate") {
      outcome += fmt::format("<p>Verdict: <span class=\"verdict-{}\">{}</span> ({}){}</p>", html_escape(summary.verdict),
                             html_escape(summary.verdict), html_escape(summary.verdict_stage),
                             summary.reason.empty() ? "" : " — " + html_escape(summary.reason));
    }
    for (const auto& b : record.bench_cases) {
      outcome += fmt::format("<p>Bench {}: {} {}x [{}, {}]</p>", html_escape(b.label), html_escape(b.verdict), fixed3(known(b.speedup)),
                             fixed3(known(b.lo)), fixed3(known(b.hi)));
    }
    int failed = 0;
    for (const auto& f : record.trace_findings) failed += f.arm == "candidate" && !f.passed;
    if (!record.trace_findings.empty()) outcome += fmt::format("<p>Trace: {} candidate check(s) failed</p>", failed);
    for (const auto& a : record.acceptance_runs) outcome += "<p>Acceptance: " + html_escape(a.verdict) + "</p>";
  }
  page.add(fmt::format("<div class=\"side\"><div><h3>Hypothesis</h3><p>{}</p></div><div><h3>Prediction</h3><p>{}</p></div>"
                       "<div data-outcome><h3>Outcome</h3>{}</div></div>\n",
                       html_escape(record.hypothesis), html_escape(record.predicted_effect), outcome));
  if (run) gate_section(page, *run, axes);
  bench_section(page, record);
  trace_section(page, record.trace_findings);
  acceptance_and_review_section(page, record);
  next_and_narrowing_section(page, record, next, links);
  links_section(page, record, links);
  return page.finish(vega_scripts);
}

ReportPage gate_report(const std::string& gate, const std::string& since, const J& experiments, const J& speedups, const J& red_reasons,
                       const LedgerFacts& facts, const std::string& vega_scripts, const std::vector<ExperimentRecord>& records,
                       const NextStepsOf& next, const ReportLinks& links) {
  Page page("gate", fmt::format("Gate {}: its experiments{}", gate, since.empty() ? "" : " since " + since), facts);
  page.nav(nav_html(links, ""));
  if (experiments.empty()) {
    page.notice(fmt::format("No experiment on gate {}{} in this ledger.", gate, since.empty() ? "" : " since " + since));
    return page.finish(vega_scripts);
  }
  std::vector<std::string> order;
  std::map<std::int64_t, std::string> label_of;
  std::vector<RedMark> reds;
  Table t;
  t.id = "experiments";
  t.head = {"id", "experiment", "submitted", "state", "gate verdict", "bench case", "speedup", "interval", "predicted", "reason"};
  std::map<std::int64_t, std::vector<const J*>> speedups_of;
  for (const auto& s : speedups) {
    if (str(s, "gate") == gate) speedups_of[s["experiment_id"].get<std::int64_t>()].push_back(&s);
  }
  std::vector<SpeedupMark> marks;
  for (const auto& e : experiments) {
    const auto id = e["id"].get<std::int64_t>();
    const std::string label = fmt::format("#{} {}", id, str(e, "name"));
    order.push_back(label);
    label_of[id] = label;
    const std::string verdict = str(e, "verdict");
    if (verdict == "red" || verdict == "error") {
      reds.push_back({label, fmt::format("{}: gate {} — {}", label, verdict, str(e, "reason"))});
    }
    const auto& ss = speedups_of[id];
    if (ss.empty()) {
      t.rows.push_back({id_cell(links, id), td(str(e, "name")), td(str(e, "submitted_at")), td(str(e, "state")), tdv(verdict), td(""), td(""),
                        td(""), td(""), td(str(e, "reason"))});
      t.red.push_back(verdict == "red" || verdict == "error");
    }
    for (const J* s : ss) {
      SpeedupMark m;
      m.label = label;
      m.speedup = num(*s, "speedup").value_or(0);
      m.lo = num(*s, "speedup_lo").value_or(m.speedup);
      m.hi = num(*s, "speedup_hi").value_or(m.speedup);
      m.predicted = num(*s, "predicted_speedup");
      m.verdict = str(*s, "verdict");
      m.description = fmt::format("{} {}: speedup {} [{}, {}]{}", label, str(*s, "case_label"), fixed3(m.speedup), fixed3(m.lo), fixed3(m.hi),
                                  m.predicted ? ", predicted " + fixed3(m.predicted) : "");
      marks.push_back(m);
      t.rows.push_back({id_cell(links, id), td(str(e, "name")), td(str(e, "submitted_at")), td(str(e, "state")), tdv(verdict),
                        td(str(*s, "case_label")), tdn(fixed3(m.speedup)), tdn(fmt::format("[{}, {}]", fixed3(m.lo), fixed3(m.hi))),
                        tdn(fixed3(m.predicted)), td(str(e, "reason"))});
      t.red.push_back(false);
    }
  }
  page.add(fmt::format("<p>{} experiments, {} red or error, {} measured speedups.</p>\n", experiments.size(), reds.size(), marks.size()));
  page.add("<div class=\"charts\">\n" + page.chart("gate-history", gate_history_spec(fmt::format("{}: speedup by experiment", gate), order, marks, reds)) +
           "</div>\n" + t.html());
  Table reasons;
  reasons.id = "red reasons";
  reasons.head = {"failure", "runs", "experiments"};
  for (const auto& r : red_reasons) {
    if (str(r, "gate") != gate) continue;
    // Only the experiments of this page (--since).
    std::string ids;
    int runs = 0;
    const std::string all = str(r, "experiment_ids");
    for (std::size_t at = 0; at <= all.size();) {
      const auto comma = std::min(all.find(',', at), all.size());
      const std::string one = all.substr(at, comma - at);
      at = comma + 1;
      if (one.empty()) continue;
      if (label_of.count(std::stoll(one))) {
        ids += (ids.empty() ? "" : ", ") + one;
        ++runs;
      }
    }
    if (runs) reasons.rows.push_back({td(str(r, "failure")), tdn(std::to_string(runs)), td(ids)}), reasons.red.push_back(true);
  }
  page.add("<h2>Why experiments were red</h2>\n");
  page.add(reasons.rows.empty() ? "<p>No red or error gate run on this gate.</p>\n" : reasons.html());
  gate_trend_sections(page, records, links);
  records_context_section(page, records, links);
  if (!records.empty()) {
    const auto it = next.find(records.back().id());
    if (it != next.end()) next_steps_list(page, it->second, fmt::format("Next for the latest experiment, #{} (cheapest first)", records.back().id()));
  }
  return page.finish(vega_scripts);
}

ReportPage ledger_report(const J& experiments, const LedgerFacts& facts, const std::string& vega_scripts, const std::vector<ExperimentRecord>& records,
                         const NextStepsOf& next, const ReportLinks& links) {
  Page page("ledger", "The ledger", facts);
  index_section(page, links);
  if (experiments.empty()) {
    page.notice("The ledger holds no experiments yet: nothing has been submitted or run into it.");
    return page.finish(vega_scripts);
  }
  const std::vector<std::string> verdicts = {"green", "red", "error", "pending"};
  std::map<std::string, std::map<std::string, int>> per_day;
  std::map<std::string, int> states;
  std::map<std::string, std::set<std::string>> gates;
  for (const auto& e : experiments) {
    std::string verdict = str(e, "verdict");
    if (std::find(verdicts.begin(), verdicts.end(), verdict) == verdicts.end()) verdict = "pending";
    ++per_day[str(e, "submitted_at").substr(0, 10)][verdict];
    ++states[str(e, "state")];
    gates[str(e, "gate")].insert(str(e, "id"));
  }
  std::vector<StackedCount> counts;
  Table days;
  days.id = "per day";
  days.head = {"day"};
  days.head.insert(days.head.end(), verdicts.begin(), verdicts.end());
  days.head.push_back("all");
  for (const auto& [day, by] : per_day) {
    std::vector<std::string> row = {td(day)};
    int all = 0;
    for (const auto& v : verdicts) {
      const int n = by.count(v) ? by.at(v) : 0;
      all += n;
      row.push_back(tdn(std::to_string(n)));
      if (n) counts.push_back({day, v, n, fmt::format("{}: {} {}", day, n, v)});
    }
    row.push_back(tdn(std::to_string(all)));
    days.rows.push_back(row);
  }
  page.add(fmt::format("<p>{} experiments on {} gate(s), from {} to {}.</p>\n", experiments.size(), gates.size(),
                       html_escape(str(experiments.front(), "submitted_at")), html_escape(str(experiments.back(), "submitted_at"))));
  page.add("<h2>Experiments per day and gate verdict</h2>\n<div class=\"charts\">\n" +
           page.chart("per-day", stacked_bar_spec("experiments per day, by gate verdict", "day (UTC)", counts, verdicts,
                                                  {kGreenColor, kRedColor, "#9467bd", "#bbbbbb"})) +
           "</div>\n" + days.html());
  // The queue: experiments by state; the ones waiting or running are listed.
  std::vector<std::string> state_order;  // every state, the queue's first
  for (const auto s : {ExperimentState::queued, ExperimentState::requeued, ExperimentState::started, ExperimentState::cancel_requested,
                       ExperimentState::finished, ExperimentState::interrupted, ExperimentState::cancelled, ExperimentState::rejected,
                       ExperimentState::recorded}) {
    state_order.push_back(to_string(s));
  }
  std::vector<std::pair<std::string, int>> by_state;
  for (const auto& s : state_order) {
    if (states.count(s)) by_state.push_back({s, states[s]});
  }
  for (const auto& [s, n] : states) {
    if (std::find(state_order.begin(), state_order.end(), s) == state_order.end()) by_state.push_back({s, n});
  }
  Table st;
  st.id = "states";
  st.head = {"state", "experiments"};
  for (const auto& [s, n] : by_state) st.rows.push_back({td(s), tdn(std::to_string(n))});
  Table waiting;
  waiting.id = "queue";
  waiting.head = {"id", "experiment", "gate", "state", "submitted"};
  for (const auto& e : experiments) {
    const std::string s = str(e, "state");
    if (const auto typed = experiment_state_from(s); typed && is_running(*typed)) {
      waiting.rows.push_back({tdn(str(e, "id")), td(str(e, "name")), td(str(e, "gate")), td(s), td(str(e, "submitted_at"))});
    }
  }
  page.add("<h2>The queue</h2>\n<div class=\"charts\">\n" + page.chart("states", bar_spec("experiments by state", by_state)) + "</div>\n" + st.html());
  page.add(waiting.rows.empty() ? "<p data-queue-empty>Nothing is queued or running.</p>\n"
                                : fmt::format("<p>{} queued or running:</p>\n", waiting.rows.size()) + waiting.html());
  Table all;
  all.id = "experiments";
  all.head = {"id", "experiment", "gate", "state", "gate verdict", "submitted", "speedups / reason"};
  for (const auto& e : experiments) {
    std::string tail;
    for (const auto& s : e["speedups"]) {
      tail += fmt::format("{}{}: {} {}x [{}, {}]", tail.empty() ? "" : "; ", str(s, "case"), str(s, "verdict"), fixed3(num(s, "speedup")),
                          fixed3(num(s, "speedup_lo")), fixed3(num(s, "speedup_hi")));
    }
    if (tail.empty()) tail = str(e, "reason");
    all.rows.push_back({id_cell(links, e["id"].get<std::int64_t>()), td(str(e, "name")), td(str(e, "gate")), td(str(e, "state")), tdv(str(e, "verdict")), td(str(e, "submitted_at")), td(tail)});
    all.red.push_back(str(e, "verdict") == "red" || str(e, "verdict") == "error");
  }
  page.add("<h2>Every experiment</h2>\n" + all.html());
  records_context_section(page, records, links);
  Table steps;
  steps.id = "next";
  steps.head = {"id", "experiment", "next", "suggestion", "command"};
  for (const auto& r : records) {
    const auto it = next.find(r.id());
    if (it == next.end() || it->second.empty()) continue;
    const NextStep& n = it->second.front();
    std::string command;
    for (const auto& a : n.command) command += (command.empty() ? "" : " ") + a;
    steps.rows.push_back({id_cell(links, r.id()), td(r.summary.name), td(n.kind), td(n.suggestion), td(command)});
  }
  if (!steps.rows.empty()) page.add("<h2 id=\"next\">Next step of each experiment (the cheapest)</h2>\n" + steps.html());
  return page.finish(vega_scripts);
}

}  // namespace densefeed
