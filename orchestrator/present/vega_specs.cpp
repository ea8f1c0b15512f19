#include "vega_specs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

J base_spec(const std::string& title, const std::string& subtitle, int width, int height) {
  J title_doc = {{"text", title}, {"anchor", "start"}, {"fontSize", 13}};
  if (!subtitle.empty()) title_doc["subtitle"] = subtitle;
  return {{"$schema", "https://vega.github.io/schema/vega/v5.json"},
          {"description", title},
          {"width", width},
          {"height", height},
          {"padding", 8},
          {"autosize", {{"type", "pad"}}},
          {"title", title_doc}};
}

J field(const char* scale, const char* name) { return {{"scale", scale}, {"field", name}}; }

// One line per series and a point per datum (outlined when it failed): the
// marks of the series charts over data "points" {x, y, series, failed,
// description}; line width and point area in Vega's px units.
void add_series_marks(J& marks, const char* name, double stroke_width, double point_size) {
  marks.push_back({{"type", "group"},
                   {"from", {{"facet", {{"name", "series"}, {"data", "points"}, {"groupby", "series"}}}}},
                   {"marks", J::array({{{"type", "line"},
                                        {"from", {{"data", "series"}}},
                                        {"aria", false},
                                        {"encode", {{"enter", {{"x", field("x", "x")}, {"y", field("y", "y")},
                                                               {"stroke", field("color", "series")}, {"strokeWidth", {{"value", stroke_width}}}}}}}}})}});
  marks.push_back({{"type", "symbol"},
                   {"name", name},
                   {"from", {{"data", "points"}}},
                   {"encode",
                    {{"enter",
                      {{"x", field("x", "x")},
                       {"y", field("y", "y")},
                       {"size", {{"value", point_size}}},
                       {"fill", field("color", "series")},
                       {"stroke", J::array({{{"test", "datum.failed"}, {"value", kFailOutlineColor}}, {{"value", "#ffffff"}}})},
                       {"strokeWidth", {{"value", 2}}},
                       {"description", {{"field", "description"}}},
                       {"tooltip", {{"field", "description"}}}}}}}});
}


const J& verdict_colours() {
  static const J c = {{"scale", "verdict"}, {"field", "verdict"}};
  return c;
}

J verdict_scale() {
  return {{"name", "verdict"},
          {"type", "ordinal"},
          {"domain", {"faster", "same", "inconclusive", "slower"}},
          {"range", {kGreenColor, "#7f7f7f", "#bcbd22", kRedColor}}};
}

}  // namespace

J heatmap_spec(const HeatmapChart& chart) {
  const int cell_w = 62, cell_h = 24;
  J spec = base_spec(chart.title, chart.subtitle, cell_w * static_cast<int>(chart.columns.size()),
                     cell_h * static_cast<int>(chart.rows.size()));
  // A log scale needs a positive domain: an output whose every error is 0
  // against a bound of 0 (an exact copy, max_abs 0) is coloured linearly.
  const bool positive = std::any_of(chart.cells.begin(), chart.cells.end(),
                                    [](const HeatmapCell& c) { return c.value && std::isfinite(*c.value) && *c.value > 0; });
  const bool log_scale = chart.log_scale && positive && (!chart.bound || *chart.bound > 0);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  J cells = J::array();
  for (const auto& c : chart.cells) {
    J v = {{"row", c.row}, {"column", c.column}, {"text", c.text}, {"failed", c.failed}, {"description", c.description}};
    if (c.value && std::isfinite(*c.value) && (!log_scale || *c.value > 0)) {
      v["value"] = *c.value;
      lo = std::min(lo, *c.value);
      hi = std::max(hi, *c.value);
    } else {
      v["value"] = nullptr;
    }
    cells.push_back(v);
  }
  if (!std::isfinite(lo)) lo = hi = chart.bound.value_or(1);
  J color = {{"name", "color"}, {"type", log_scale ? "log" : "linear"}, {"clamp", true}};
  if (chart.bound) {
    // The bound is the diverging scheme's midpoint; the domain holds it with room either side.
    const double b = *chart.bound;
    if (log_scale) {
      color["domain"] = {std::min(lo, b / 10), std::max(hi, b * 10)};
    } else {
      color["domain"] = {std::min(lo, b - 1), std::max(hi, b + 1)};
    }
    color["domainMid"] = b;
    color["scheme"] = "blueorange";
  } else {
    color["domain"] = {lo, hi > lo ? hi : lo + 1};
    color["scheme"] = "blues";
  }
  spec["data"] = J::array({{{"name", "cells"}, {"values", cells}}});
  spec["scales"] = J::array({{{"name", "x"}, {"type", "band"}, {"domain", chart.columns}, {"range", "width"}, {"padding", 0.04}},
                             {{"name", "y"}, {"type", "band"}, {"domain", chart.rows}, {"range", "height"}, {"padding", 0.06}},
                             color});
  spec["axes"] = J::array({{{"orient", "top"}, {"scale", "x"}, {"title", chart.column_key}, {"domain", false}, {"ticks", false}},
                           {{"orient", "left"}, {"scale", "y"}, {"title", chart.row_key}, {"domain", false}, {"ticks", false}}});
  spec["legends"] = J::array({{{"fill", "color"}, {"type", "gradient"}, {"title", chart.value_title}, {"format", log_scale ? ".0e" : (chart.log_scale ? ".1e" : "d")},
                               {"gradientLength", std::max(80, cell_h * static_cast<int>(chart.rows.size()))}}});
  spec["marks"] = J::array(
      {{{"type", "rect"},
        {"name", "mark-cells"},
        {"from", {{"data", "cells"}}},
        {"encode",
         {{"enter",
           {{"x", field("x", "column")},
            {"width", {{"scale", "x"}, {"band", 1}}},
            {"y", field("y", "row")},
            {"height", {{"scale", "y"}, {"band", 1}}},
            {"fill", J::array({{{"test", "datum.value === null"}, {"value", "#cccccc"}}, field("color", "value")})},
            {"stroke", J::array({{{"test", "datum.failed"}, {"value", kFailOutlineColor}}, {{"value", "#ffffff"}}})},
            {"strokeWidth", J::array({{{"test", "datum.failed"}, {"value", 3}}, {{"value", 0.5}}})},
            {"description", {{"field", "description"}}},
            {"tooltip", {{"field", "description"}}}}}}}},
       {{"type", "text"},
        {"from", {{"data", "cells"}}},
        {"interactive", false},
        {"aria", false},
        {"encode",
         {{"enter",
           {{"x", {{"scale", "x"}, {"field", "column"}, {"band", 0.5}}},
            {"y", {{"scale", "y"}, {"field", "row"}, {"band", 0.5}}},
            {"align", {{"value", "center"}}},
            {"baseline", {{"value", "middle"}}},
            {"fontSize", {{"value", 10}}},
            {"fontWeight", J::array({{{"test", "datum.failed"}, {"value", "bold"}}, {{"value", "normal"}}})},
            {"fill", {{"value", "#111111"}}},
            {"text", {{"field", "text"}}}}}}}}});
  return spec;
}

J trend_spec(const TrendChart& chart) {
  J spec = base_spec(chart.title, chart.bound ? "dashed: the bound; outlined points exceed it" : "", 300, 200);
  J points = J::array(), xs = J::array();
  std::vector<double> seen;
  for (const auto& p : chart.points) {
    points.push_back({{"series", p.series}, {"x", p.x}, {"y", p.y}, {"failed", p.failed}, {"description", p.description}});
    if (std::find(seen.begin(), seen.end(), p.x) == seen.end()) seen.push_back(p.x);
  }
  std::sort(seen.begin(), seen.end());
  for (double x : seen) xs.push_back(x);
  J data = J::array({{{"name", "points"}, {"values", points}}});
  J ydomain = {{"fields", J::array({{{"data", "points"}, {"field", "y"}}})}};
  if (chart.bound) {
    data.push_back({{"name", "bound"}, {"values", J::array({{{"y", *chart.bound}}})}});
    ydomain["fields"].push_back({{"data", "bound"}, {"field", "y"}});
  }
  spec["data"] = data;
  spec["scales"] = J::array({{{"name", "x"}, {"type", "log"}, {"base", 2}, {"domain", {{"data", "points"}, {"field", "x"}}},
                              {"range", "width"}, {"nice", false}, {"padding", 12}},
                             {{"name", "y"}, {"type", "log"}, {"domain", ydomain}, {"range", "height"}, {"nice", true}},
                             {{"name", "color"}, {"type", "ordinal"}, {"domain", {{"data", "points"}, {"field", "series"}}}, {"range", "category"}}});
  spec["axes"] = J::array({{{"orient", "bottom"}, {"scale", "x"}, {"title", chart.x_title}, {"values", xs}, {"format", "d"}},
                           {{"orient", "left"}, {"scale", "y"}, {"title", chart.y_title}, {"format", ".0e"}, {"grid", true}}});
  spec["legends"] = J::array({{{"stroke", "color"}, {"title", chart.series_title}, {"symbolType", "stroke"}}});
  J marks = J::array();
  add_series_marks(marks, "mark-points", 2, 50);
  if (chart.bound) {
    marks.push_back({{"type", "rule"},
                     {"name", "mark-bound"},
                     {"from", {{"data", "bound"}}},
                     {"encode", {{"enter", {{"x", {{"value", 0}}}, {"x2", {{"signal", "width"}}}, {"y", field("y", "y")},
                                            {"stroke", {{"value", kRedColor}}}, {"strokeDash", {{"value", {6, 3}}}},
                                            {"description", {{"signal", "'bound ' + format(datum.y, '.1e')"}}}}}}}});
    marks.push_back({{"type", "text"},
                     {"from", {{"data", "bound"}}},
                     {"aria", false},
                     {"encode", {{"enter", {{"x", {{"signal", "width"}}}, {"y", {{"scale", "y"}, {"field", "y"}, {"offset", -4}}},
                                            {"align", {{"value", "right"}}}, {"fill", {{"value", kRedColor}}},
                                            {"text", {{"signal", "'bound ' + format(datum.y, '.1e')"}}}}}}}});
  }
  spec["marks"] = marks;
  return spec;
}

J history_lines_spec(const HistoryChart& chart) {
  const int width = std::clamp(60 * static_cast<int>(chart.order.size()), 240, kGateHistoryMaxWidth);
  J spec = base_spec(chart.title, chart.subtitle, width, 220);
  J points = J::array();
  for (const auto& p : chart.points) {
    points.push_back({{"x", p.x}, {"series", p.series}, {"y", p.y}, {"failed", p.failed}, {"description", p.description}});
  }
  J data = J::array({{{"name", "points"}, {"values", points}}});
  J ydomain = {{"fields", J::array({{{"data", "points"}, {"field", "y"}}})}};
  if (chart.rule) {
    data.push_back({{"name", "rule"}, {"values", J::array({{{"y", *chart.rule}}})}});
    ydomain["fields"].push_back({{"data", "rule"}, {"field", "y"}});
  }
  spec["data"] = data;
  spec["scales"] = J::array({{{"name", "x"}, {"type", "point"}, {"domain", chart.order}, {"range", "width"}, {"padding", 0.5}},
                             {{"name", "y"}, {"type", "log"}, {"domain", ydomain}, {"range", "height"}, {"nice", true}},
                             {{"name", "color"}, {"type", "ordinal"}, {"domain", {{"data", "points"}, {"field", "series"}}}, {"range", "category"}}});
  J x_axis = {{"orient", "bottom"}, {"scale", "x"}, {"title", "experiment"}, {"labelAngle", -30}, {"labelAlign", "right"}, {"labelLimit", 160}};
  if (static_cast<int>(chart.order.size()) > kGateHistoryLabelled) x_axis["labels"] = false;
  spec["axes"] = J::array({x_axis, {{"orient", "left"}, {"scale", "y"}, {"title", chart.y_title}, {"format", ".1e"}, {"grid", true}}});
  if (chart.legend) spec["legends"] = J::array({{{"stroke", "color"}, {"title", "series"}, {"symbolType", "stroke"}}});
  J marks = J::array();
  add_series_marks(marks, "mark-history", 1.5, 40);
  if (chart.rule) {
    const std::string label = fmt::format("'{} ' + format(datum.y, '.3g')", chart.rule_label);
    marks.push_back({{"type", "rule"},
                     {"name", "mark-rule"},
                     {"from", {{"data", "rule"}}},
                     {"encode", {{"enter", {{"x", {{"value", 0}}}, {"x2", {{"signal", "width"}}}, {"y", field("y", "y")},
                                            {"stroke", {{"value", kRedColor}}}, {"strokeDash", {{"value", {6, 3}}}},
                                            {"description", {{"signal", label}}}}}}}});
  }
  spec["marks"] = marks;
  return spec;
}

J bench_samples_spec(const std::string& title, const std::string& unit, const std::vector<BenchSample>& samples) {
  J spec = base_spec(title, "every sample of both arms, round by round (rounds interleave the arms)", 460, 200);
  J values = J::array();
  for (const auto& s : samples) {
    // Base left of the round's centre, candidate right, samples spread across their half.
    const double half = s.arm == "base" ? -0.4 : 0.05;
    const double x = s.round + half + 0.35 * (s.count > 1 ? static_cast<double>(s.index) / (s.count - 1) : 0.5);
    values.push_back({{"round", s.round}, {"arm", s.arm}, {"x", x}, {"value", s.value}, {"description", s.description}});
  }
  spec["data"] = J::array({{{"name", "samples"}, {"values", values}}});
  spec["scales"] = J::array({{{"name", "x"}, {"type", "linear"}, {"domain", {{"data", "samples"}, {"field", "x"}}}, {"range", "width"},
                              {"nice", false}, {"zero", false}, {"padding", 8}},
                             {{"name", "y"}, {"type", "linear"}, {"domain", {{"data", "samples"}, {"field", "value"}}}, {"range", "height"},
                              {"nice", true}, {"zero", false}},
                             {{"name", "arm"}, {"type", "ordinal"}, {"domain", {"base", "candidate"}}, {"range", {"#1f77b4", "#ff7f0e"}}}});
  spec["axes"] = J::array({{{"orient", "bottom"}, {"scale", "x"}, {"title", "round"}, {"tickMinStep", 1}, {"format", "d"}},
                           {{"orient", "left"}, {"scale", "y"}, {"title", unit}, {"grid", true}}});
  spec["legends"] = J::array({{{"fill", "arm"}, {"title", "arm"}}});
  spec["marks"] = J::array({{{"type", "symbol"},
                             {"name", "mark-samples"},
                             {"from", {{"data", "samples"}}},
                             {"encode", {{"enter", {{"x", field("x", "x")}, {"y", field("y", "value")}, {"size", {{"value", 30}}},
                                                    {"fill", field("arm", "arm")}, {"fillOpacity", {{"value", 0.8}}},
                                                    {"description", {{"field", "description"}}}}}}}}});
  return spec;
}

// The [lo, hi] of every figure a speedup chart draws, 1 included: Vega warns
// about (and draws nothing for) a data-driven domain over an empty data set.
J speedup_domain(const std::vector<SpeedupMark>& marks) {
  double lo = 1, hi = 1;
  for (const auto& m : marks) {
    for (double v : {m.lo, m.hi, m.speedup}) lo = std::min(lo, v), hi = std::max(hi, v);
    if (m.predicted) lo = std::min(lo, *m.predicted), hi = std::max(hi, *m.predicted);
    if (m.threshold) lo = std::min(lo, 1 - *m.threshold), hi = std::max(hi, 1 + *m.threshold);
  }
  const double pad = std::max(0.02, 0.05 * (hi - lo));
  return {lo - pad, hi + pad};
}

J speedup_spec(const std::string& title, const std::vector<SpeedupMark>& marks) {
  J spec = base_spec(title, "dot: speedup; bar: its confidence interval; hollow diamond: predicted; grey band: 1 ± the noise threshold",
                     420, 36 * static_cast<int>(std::max<std::size_t>(1, marks.size())));
  J values = J::array(), labels = J::array();
  for (const auto& m : marks) {
    J v = {{"label", m.label}, {"speedup", m.speedup}, {"lo", m.lo}, {"hi", m.hi}, {"verdict", m.verdict}, {"description", m.description},
           {"predicted", m.predicted ? J(*m.predicted) : J(nullptr)}};
    if (m.threshold) {
      v["band_lo"] = 1 - *m.threshold;
      v["band_hi"] = 1 + *m.threshold;
    }
    values.push_back(v);
    labels.push_back(m.label);
  }
  spec["data"] = J::array({{{"name", "marks"}, {"values", values}},
                           {{"name", "predicted"}, {"source", "marks"}, {"transform", J::array({{{"type", "filter"}, {"expr", "datum.predicted !== null"}}})}},
                           {{"name", "band"}, {"source", "marks"}, {"transform", J::array({{{"type", "filter"}, {"expr", "datum.band_lo != null"}}})}},
                           {{"name", "one"}, {"values", J::array({{{"x", 1}}})}}});
  spec["scales"] = J::array(
      {{{"name", "x"}, {"type", "linear"}, {"zero", false}, {"nice", true}, {"range", "width"}, {"domain", speedup_domain(marks)}},
       {{"name", "y"}, {"type", "band"}, {"domain", labels}, {"range", "height"}, {"padding", 0.3}},
       verdict_scale()});
  spec["axes"] = J::array({{{"orient", "bottom"}, {"scale", "x"}, {"title", "speedup (base / candidate, > 1: candidate faster)"}, {"grid", true}},
                           {{"orient", "left"}, {"scale", "y"}}});
  spec["legends"] = J::array({{{"fill", "verdict"}, {"title", "bench verdict"}}});
  spec["marks"] = J::array(
      {{{"type", "rect"}, {"name", "mark-noise"}, {"from", {{"data", "band"}}},
        {"encode", {{"enter", {{"x", field("x", "band_lo")}, {"x2", field("x", "band_hi")}, {"y", field("y", "label")},
                               {"height", {{"scale", "y"}, {"band", 1}}}, {"fill", {{"value", "#999999"}}}, {"fillOpacity", {{"value", 0.25}}},
                               {"description", {{"signal", "'noise band ' + format(datum.band_lo, '.3f') + ' to ' + format(datum.band_hi, '.3f')"}}}}}}}},
       {{"type", "rule"}, {"from", {{"data", "one"}}}, {"aria", false},
        {"encode", {{"enter", {{"x", field("x", "x")}, {"y", {{"value", 0}}}, {"y2", {{"signal", "height"}}}, {"stroke", {{"value", "#444444"}}}}}}}},
       {{"type", "rule"}, {"name", "mark-interval"}, {"from", {{"data", "marks"}}},
        {"encode", {{"enter", {{"x", field("x", "lo")}, {"x2", field("x", "hi")}, {"y", {{"scale", "y"}, {"field", "label"}, {"band", 0.5}}},
                               {"stroke", verdict_colours()}, {"strokeWidth", {{"value", 3}}},
                               {"description", {{"signal", "'interval ' + format(datum.lo, '.3f') + ' to ' + format(datum.hi, '.3f')"}}}}}}}},
       {{"type", "symbol"}, {"name", "mark-speedup"}, {"from", {{"data", "marks"}}},
        {"encode", {{"enter", {{"x", field("x", "speedup")}, {"y", {{"scale", "y"}, {"field", "label"}, {"band", 0.5}}}, {"size", {{"value", 90}}},
                               {"fill", verdict_colours()}, {"stroke", {{"value", "#000000"}}}, {"description", {{"field", "description"}}}}}}}},
       {{"type", "symbol"}, {"name", "mark-predicted"}, {"from", {{"data", "predicted"}}},
        {"encode", {{"enter", {{"x", field("x", "predicted")}, {"y", {{"scale", "y"}, {"field", "label"}, {"band", 0.5}}}, {"shape", {{"value", "diamond"}}},
                               {"size", {{"value", 110}}}, {"fill", {{"value", "transparent"}}}, {"stroke", {{"value", "#000000"}}}, {"strokeWidth", {{"value", 1.5}}},
                               {"description", {{"signal", "'predicted ' + format(datum.predicted, '.3f')"}}}}}}}}});
  return spec;
}

J gate_history_spec(const std::string& title, const std::vector<std::string>& order, const std::vector<SpeedupMark>& speedups,
                    const std::vector<RedMark>& reds) {
  // 70 px per experiment while their names fit; past kGateHistoryLabelled
  // experiments the chart keeps a fixed width, drops the names (the table
  // below has them) and draws smaller marks, so a long history is one screen
  // wide rather than 70 px x N.
  const auto n = static_cast<int>(order.size());
  const bool dense = n > kGateHistoryLabelled;
  const double mark_scale = dense ? 0.25 : 1.0;
  J spec = base_spec(title,
                     dense ? fmt::format("{} experiments left to right in the order recorded (names in the table); dot: measured speedup with its interval; "
                                         "hollow diamond: predicted; red cross: a red gate", n)
                           : "left to right in the order recorded; dot: measured speedup with its interval; hollow diamond: predicted; red cross: a red gate (no speedup is measured)",
                     std::clamp(70 * n, 320, kGateHistoryMaxWidth), 240);
  J values = J::array(), red = J::array();
  for (const auto& m : speedups) {
    values.push_back({{"label", m.label}, {"speedup", m.speedup}, {"lo", m.lo}, {"hi", m.hi}, {"verdict", m.verdict},
                      {"predicted", m.predicted ? J(*m.predicted) : J(nullptr)}, {"description", m.description}});
  }
  for (const auto& r : reds) red.push_back({{"label", r.label}, {"y", 1.0}, {"description", r.description}});
  spec["data"] = J::array({{{"name", "speedups"}, {"values", values}},
                           {{"name", "predicted"}, {"source", "speedups"}, {"transform", J::array({{{"type", "filter"}, {"expr", "datum.predicted !== null"}}})}},
                           {{"name", "red"}, {"values", red}},
                           {{"name", "one"}, {"values", J::array({{{"y", 1}}})}}});
  spec["scales"] = J::array(
      {{{"name", "x"}, {"type", "point"}, {"domain", order}, {"range", "width"}, {"padding", 0.6}},
       {{"name", "y"}, {"type", "linear"}, {"zero", false}, {"nice", true}, {"range", "height"}, {"domain", speedup_domain(speedups)}},
       verdict_scale()});
  J x_axis = {{"orient", "bottom"}, {"scale", "x"}, {"labelAngle", -30}, {"labelAlign", "right"}, {"labelLimit", 160}};
  if (dense) x_axis = {{"orient", "bottom"}, {"scale", "x"}, {"labels", false}, {"ticks", false}, {"title", fmt::format("{} experiments, in the order recorded", n)}};
  spec["axes"] = J::array({x_axis, {{"orient", "left"}, {"scale", "y"}, {"title", "speedup (> 1: candidate faster)"}, {"grid", true}}});
  spec["legends"] = J::array({{{"fill", "verdict"}, {"title", "bench verdict"}}});
  spec["marks"] = J::array(
      {{{"type", "rule"}, {"from", {{"data", "one"}}}, {"aria", false},
        {"encode", {{"enter", {{"y", field("y", "y")}, {"x", {{"value", 0}}}, {"x2", {{"signal", "width"}}}, {"stroke", {{"value", "#444444"}}}}}}}},
       {{"type", "rule"}, {"name", "mark-interval"}, {"from", {{"data", "speedups"}}},
        {"encode", {{"enter", {{"x", field("x", "label")}, {"y", field("y", "lo")}, {"y2", field("y", "hi")}, {"stroke", verdict_colours()},
                               {"strokeWidth", {{"value", dense ? 1 : 3}}},
                               {"description", {{"signal", "'interval ' + format(datum.lo, '.3f') + ' to ' + format(datum.hi, '.3f')"}}}}}}}},
       {{"type", "symbol"}, {"name", "mark-speedup"}, {"from", {{"data", "speedups"}}},
        {"encode", {{"enter", {{"x", field("x", "label")}, {"y", field("y", "speedup")}, {"size", {{"value", 80 * mark_scale}}}, {"fill", verdict_colours()},
                               {"stroke", {{"value", "#000000"}}}, {"description", {{"field", "description"}}}}}}}},
       {{"type", "symbol"}, {"name", "mark-predicted"}, {"from", {{"data", "predicted"}}},
        {"encode", {{"enter", {{"x", field("x", "label")}, {"y", field("y", "predicted")}, {"shape", {{"value", "diamond"}}}, {"size", {{"value", 110 * mark_scale}}},
                               {"fill", {{"value", "transparent"}}}, {"stroke", {{"value", "#000000"}}}, {"strokeWidth", {{"value", 1.5}}},
                               {"description", {{"signal", "'predicted ' + format(datum.predicted, '.3f')"}}}}}}}},
       {{"type", "symbol"}, {"name", "mark-red"}, {"from", {{"data", "red"}}},
        {"encode", {{"enter", {{"x", field("x", "label")}, {"y", field("y", "y")}, {"shape", {{"value", "cross"}}}, {"angle", {{"value", 45}}},
                               {"size", {{"value", 160 * mark_scale}}}, {"fill", {{"value", kRedColor}}}, {"description", {{"field", "description"}}}}}}}}});
  return spec;
}

J lane_timeline_spec(const std::string& title, const std::vector<LaneInterval>& intervals, const std::vector<OverlapBand>& overlaps,
                     double window_ms, const std::string& colour_title) {
  std::vector<std::string> lanes;
  for (const auto& i : intervals) {
    if (std::find(lanes.begin(), lanes.end(), i.lane) == lanes.end()) lanes.push_back(i.lane);
  }
  J spec = base_spec(title,
                     overlaps.empty() && std::none_of(intervals.begin(), intervals.end(), [](const LaneInterval& i) { return i.role == "b"; })
                         ? "shaded: the analysis window; bars: the intervals the check names, coloured by the fraction exposed"
                         : "orange: the analysis window; green bands: where A and B overlap; A's bars coloured by the fraction exposed, B's grey",
                     720, std::max(60, 34 * static_cast<int>(lanes.size())));
  J values = J::array();
  for (const auto& i : intervals) {
    values.push_back({{"lane", i.lane}, {"name", i.name}, {"start", i.start_ms}, {"end", i.end_ms}, {"exposed", i.exposed_fraction},
                      {"role", i.role}, {"description", i.description}});
  }
  J bands = J::array();
  for (const auto& o : overlaps) bands.push_back({{"start", o.start_ms}, {"end", o.end_ms}, {"description", o.description}});
  spec["data"] = J::array({{{"name", "intervals"}, {"values", values}},
                           {{"name", "overlaps"}, {"values", bands}},
                           {{"name", "window"}, {"values", J::array({{{"start", 0}, {"end", window_ms}}})}}});
  spec["scales"] = J::array({{{"name", "x"}, {"type", "linear"}, {"domain", {{"fields", J::array({{{"data", "window"}, {"field", "start"}}, {{"data", "window"}, {"field", "end"}},
                                                                                                  {{"data", "intervals"}, {"field", "end"}}})}}},
                              {"range", "width"}, {"nice", false}, {"zero", true}},
                             {{"name", "y"}, {"type", "band"}, {"domain", lanes}, {"range", "height"}, {"padding", 0.25}},
                             {{"name", "exposed"}, {"type", "linear"}, {"domain", {0, 1}}, {"range", {"#9ecae1", kRedColor}}}});
  spec["axes"] = J::array({{{"orient", "bottom"}, {"scale", "x"}, {"title", "ms from the window's start"}, {"grid", true}},
                           {{"orient", "left"}, {"scale", "y"}, {"labelLimit", 260}}});
  spec["legends"] = J::array({{{"fill", "exposed"}, {"type", "gradient"}, {"title", colour_title}, {"format", ".0%"}}});
  spec["marks"] = J::array(
      {{{"type", "rect"}, {"name", "mark-window"}, {"from", {{"data", "window"}}},
        {"encode", {{"enter", {{"x", field("x", "start")}, {"x2", field("x", "end")}, {"y", {{"value", 0}}}, {"y2", {{"signal", "height"}}},
                               {"fill", {{"value", "#fdd0a2"}}}, {"fillOpacity", {{"value", 0.35}}},
                               {"description", {{"signal", "'window 0 to ' + format(datum.end, '.3f') + ' ms'"}}}}}}}},
       {{"type", "rect"}, {"name", "mark-intervals"}, {"from", {{"data", "intervals"}}},
        {"encode", {{"enter", {{"x", field("x", "start")}, {"x2", field("x", "end")}, {"y", field("y", "lane")}, {"height", {{"scale", "y"}, {"band", 1}}},
                               {"fill", J::array({{{"test", "datum.role === 'b'"}, {"value", "#bdbdbd"}}, field("exposed", "exposed")})},
                               {"stroke", {{"value", "#333333"}}}, {"strokeWidth", {{"value", 0.5}}},
                               {"description", {{"field", "description"}}}, {"tooltip", {{"field", "description"}}}}}}}},
       // Over the bars so that the overlap shows on both lanes; drawn at least 1 px wide.
       {{"type", "rect"}, {"name", "mark-overlap"}, {"from", {{"data", "overlaps"}}},
        {"encode", {{"enter", {{"x", field("x", "start")}, {"x2", {{"signal", "max(scale('x', datum.end), scale('x', datum.start) + 1)"}}},
                               {"y", {{"value", 0}}}, {"y2", {{"signal", "height"}}},
                               {"fill", {{"value", kOverlapColor}}}, {"fillOpacity", {{"value", 0.35}}},
                               {"description", {{"field", "description"}}}, {"tooltip", {{"field", "description"}}}}}}}},
       // The same segments as an opaque strip along the top: the overlap's colour, unblended, where a screenshot can find it.
       {{"type", "rect"}, {"name", "mark-overlap-strip"}, {"from", {{"data", "overlaps"}}}, {"aria", false},
        {"encode", {{"enter", {{"x", field("x", "start")}, {"x2", {{"signal", "max(scale('x', datum.end), scale('x', datum.start) + 1)"}}},
                               {"y", {{"value", -7}}}, {"y2", {{"value", -1}}}, {"fill", {{"value", kOverlapColor}}}}}}}}});
  return spec;
}

J acceptance_spec(const std::string& title, const std::vector<CriterionMark>& criteria) {
  J spec = base_spec(title, "dot: the left side (green: the criterion holds, red: it fails); black tick: the right side", 420,
                     36 * static_cast<int>(std::max<std::size_t>(1, criteria.size())));
  J values = J::array(), labels = J::array();
  for (const auto& c : criteria) {
    values.push_back({{"criterion", c.criterion}, {"lhs", c.lhs}, {"rhs", c.rhs}, {"passed", c.passed}, {"description", c.description}});
    labels.push_back(c.criterion);
  }
  spec["data"] = J::array({{{"name", "criteria"}, {"values", values}}});
  spec["scales"] = J::array({{{"name", "x"}, {"type", "linear"}, {"zero", false}, {"nice", true}, {"range", "width"}, {"padding", 12},
                              {"domain", {{"fields", J::array({{{"data", "criteria"}, {"field", "lhs"}}, {{"data", "criteria"}, {"field", "rhs"}}})}}}},
                             {{"name", "y"}, {"type", "band"}, {"domain", labels}, {"range", "height"}, {"padding", 0.3}}});
  spec["axes"] = J::array({{{"orient", "bottom"}, {"scale", "x"}, {"grid", true}}, {{"orient", "left"}, {"scale", "y"}, {"labelLimit", 260}}});
  spec["marks"] = J::array(
      {{{"type", "rule"}, {"from", {{"data", "criteria"}}}, {"aria", false},
        {"encode", {{"enter", {{"x", field("x", "lhs")}, {"x2", field("x", "rhs")}, {"y", {{"scale", "y"}, {"field", "criterion"}, {"band", 0.5}}},
                               {"stroke", {{"value", "#999999"}}}, {"strokeWidth", {{"value", 2}}}}}}}},
       {{"type", "symbol"}, {"name", "mark-rhs"}, {"from", {{"data", "criteria"}}}, {"aria", false},
        {"encode", {{"enter", {{"x", field("x", "rhs")}, {"y", {{"scale", "y"}, {"field", "criterion"}, {"band", 0.5}}}, {"shape", {{"value", "stroke"}}},
                               {"angle", {{"value", 90}}}, {"size", {{"value", 300}}}, {"stroke", {{"value", "#000000"}}}, {"strokeWidth", {{"value", 3}}}}}}}},
       {{"type", "symbol"}, {"name", "mark-lhs"}, {"from", {{"data", "criteria"}}},
        {"encode", {{"enter", {{"x", field("x", "lhs")}, {"y", {{"scale", "y"}, {"field", "criterion"}, {"band", 0.5}}}, {"size", {{"value", 120}}},
                               {"fill", J::array({{{"test", "datum.passed"}, {"value", kGreenColor}}, {{"value", kRedColor}}})},
                               {"stroke", {{"value", "#000000"}}}, {"description", {{"field", "description"}}}, {"tooltip", {{"field", "description"}}}}}}}}});
  return spec;
}

J stacked_bar_spec(const std::string& title, const std::string& x_title, const std::vector<StackedCount>& counts,
                   const std::vector<std::string>& stacks, const std::vector<std::string>& colours) {
  std::vector<std::string> categories;
  for (const auto& c : counts) {
    if (std::find(categories.begin(), categories.end(), c.category) == categories.end()) categories.push_back(c.category);
  }
  J spec = base_spec(title, "", std::max(240, 28 * static_cast<int>(categories.size())), 200);
  J values = J::array();
  for (const auto& c : counts) {
    const auto at = std::find(stacks.begin(), stacks.end(), c.stack) - stacks.begin();
    values.push_back({{"category", c.category}, {"stack", c.stack}, {"order", at}, {"count", c.count}, {"description", c.description}});
  }
  spec["data"] = J::array({{{"name", "counts"}, {"values", values},
                            {"transform", J::array({{{"type", "stack"}, {"groupby", {"category"}}, {"field", "count"},
                                                     {"sort", {{"field", "order"}}}}})}}});
  spec["scales"] = J::array({{{"name", "x"}, {"type", "band"}, {"domain", categories}, {"range", "width"}, {"padding", 0.15}},
                             {{"name", "y"}, {"type", "linear"}, {"domain", {{"data", "counts"}, {"field", "y1"}}}, {"range", "height"}, {"nice", true}, {"zero", true}},
                             {{"name", "color"}, {"type", "ordinal"}, {"domain", stacks}, {"range", colours}}});
  spec["axes"] = J::array({{{"orient", "bottom"}, {"scale", "x"}, {"title", x_title}, {"labelAngle", categories.size() > 8 ? -45 : 0},
                            {"labelAlign", categories.size() > 8 ? "right" : "center"}},
                           {{"orient", "left"}, {"scale", "y"}, {"title", "experiments"}, {"tickMinStep", 1}, {"grid", true}}});
  spec["legends"] = J::array({{{"fill", "color"}, {"title", "gate verdict"}}});
  spec["marks"] = J::array({{{"type", "rect"}, {"name", "mark-bars"}, {"from", {{"data", "counts"}}},
                             {"encode", {{"enter", {{"x", field("x", "category")}, {"width", {{"scale", "x"}, {"band", 1}}}, {"y", field("y", "y0")},
                                                    {"y2", field("y", "y1")}, {"fill", field("color", "stack")},
                                                    {"description", {{"field", "description"}}}, {"tooltip", {{"field", "description"}}}}}}}}});
  return spec;
}

J bar_spec(const std::string& title, const std::vector<std::pair<std::string, int>>& counts) {
  J spec = base_spec(title, "", 300, std::max(40, 26 * static_cast<int>(counts.size())));
  J values = J::array(), labels = J::array();
  for (const auto& [k, n] : counts) {
    values.push_back({{"label", k}, {"count", n}, {"description", k + ": " + std::to_string(n)}});
    labels.push_back(k);
  }
  spec["data"] = J::array({{{"name", "counts"}, {"values", values}}});
  spec["scales"] = J::array({{{"name", "y"}, {"type", "band"}, {"domain", labels}, {"range", "height"}, {"padding", 0.2}},
                             {{"name", "x"}, {"type", "linear"}, {"domain", {{"data", "counts"}, {"field", "count"}}}, {"range", "width"}, {"nice", true}, {"zero", true}}});
  spec["axes"] = J::array({{{"orient", "bottom"}, {"scale", "x"}, {"title", "experiments"}, {"tickMinStep", 1}}, {{"orient", "left"}, {"scale", "y"}}});
  spec["marks"] = J::array({{{"type", "rect"}, {"name", "mark-bars"}, {"from", {{"data", "counts"}}},
                             {"encode", {{"enter", {{"y", field("y", "label")}, {"height", {{"scale", "y"}, {"band", 1}}}, {"x", {{"scale", "x"}, {"value", 0}}},
                                                    {"x2", field("x", "count")}, {"fill", {{"value", "#4c78a8"}}}, {"description", {{"field", "description"}}}}}}}},
                            {{"type", "text"}, {"from", {{"data", "counts"}}}, {"aria", false},
                             {"encode", {{"enter", {{"y", {{"scale", "y"}, {"field", "label"}, {"band", 0.5}}}, {"x", field("x", "count")}, {"dx", {{"value", 4}}},
                                                    {"baseline", {{"value", "middle"}}}, {"text", {{"field", "count"}}}}}}}}});
  return spec;
}

}  // namespace densefeed
