// The report's charts as Vega 5 specifications (https://vega.github.io/vega/docs/),
// built as JSON from plain structs: one function per kind of chart. Every
// item a chart draws carries a `description` (Vega writes it as the SVG
// element's aria-label), so the page's text and its charts say the same thing.
// Units are the caller's and are named in the titles (ms for benchmark
// samples and trace intervals).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace densefeed {

inline constexpr const char* kGreenColor = "#2ca02c";
inline constexpr const char* kRedColor = "#d62728";
// The outline of a cell or point over its bound: a colour no other mark uses,
// so that a screenshot shows where failures are drawn.
inline constexpr const char* kFailOutlineColor = "#ff00aa";

// One cell of a rows x columns table of a metric (e.g. T x shards).
struct HeatmapCell {
  std::string row, column;      // values as the case wrote them
  std::optional<double> value;  // none: no value (NaN), drawn grey
  bool failed = false;          // over the bound: outlined in red
  std::string text;             // drawn in the cell
  std::string description;
};
struct HeatmapChart {
  std::string title, subtitle, row_key, column_key, value_title;
  std::vector<std::string> rows, columns;  // in display order (top to bottom, left to right)
  std::vector<HeatmapCell> cells;
  std::optional<double> bound;  // the colour scale's midpoint (diverging: under it blue, over it orange)
  bool log_scale = true;        // colour on a log scale (errors); false: linear (slice indices)
};
nlohmann::ordered_json heatmap_spec(const HeatmapChart& chart);

// Lines of y against x, one per series, on log-log axes, with the bound as a dashed rule.
struct TrendPoint {
  std::string series;
  double x = 0, y = 0;  // both > 0
  bool failed = false;
  std::string description;
};
struct TrendChart {
  std::string title, x_title, y_title, series_title;
  std::vector<TrendPoint> points;  // per series in ascending x
  std::optional<double> bound;
};
nlohmann::ordered_json trend_spec(const TrendChart& chart);

// A figure per experiment, experiments left to right in the order given
// (categories), one line per series on a log y axis, with a dashed rule
// (e.g. 1: the tolerance of an error headroom). Points whose y is not > 0
// are the caller's to leave out (a log axis has no 0).
struct HistoryPoint {
  std::string x;       // the experiment's label, one of `order`
  std::string series;  // a case (headroom) or a bench case and arm (medians)
  double y = 0;        // > 0
  bool failed = false;  // outlined
  std::string description;
};
struct HistoryChart {
  std::string title, subtitle, y_title;
  std::vector<std::string> order;
  std::vector<HistoryPoint> points;
  std::optional<double> rule;
  std::string rule_label;  // "tolerance"
  bool legend = true;      // false: many series, named by the points' descriptions only
};
nlohmann::ordered_json history_lines_spec(const HistoryChart& chart);

// Every sample of both arms, round by round (x: round, the arms side by side within it).
struct BenchSample {
  int round = 0;  // from 1
  std::string arm;  // base | candidate
  int index = 0, count = 1;  // the sample's place within its round
  double value = 0;
  std::string description;
};
nlohmann::ordered_json bench_samples_spec(const std::string& title, const std::string& unit, const std::vector<BenchSample>& samples);

// Speedups with their confidence interval, the predicted speedup and the noise band 1 ± threshold.
struct SpeedupMark {
  std::string label;  // the y (experiment page: bench case) or x (gate page: experiment) category
  double speedup = 0, lo = 0, hi = 0;
  std::optional<double> predicted;
  std::optional<double> threshold;  // fraction
  std::string verdict;              // faster | slower | same | inconclusive
  std::string description;
};
nlohmann::ordered_json speedup_spec(const std::string& title, const std::vector<SpeedupMark>& marks);

// Past this many experiments a gate's history is drawn at a fixed width
// (kGateHistoryMaxWidth px, so that it and its legend fit the page's 1180 px) without their names on the axis.
inline constexpr int kGateHistoryLabelled = 15;
inline constexpr int kGateHistoryMaxWidth = 960;

// A gate's history: experiments left to right in the order given; measured
// speedups with intervals, predicted ones, and the red experiments marked where they fell.
struct RedMark {
  std::string label;
  std::string description;
};
nlohmann::ordered_json gate_history_spec(const std::string& title, const std::vector<std::string>& order,
                                         const std::vector<SpeedupMark>& speedups, const std::vector<RedMark>& reds);

// Where a check's A and B overlap: a band across every lane and a strip
// above them, in a colour no other mark uses.
inline constexpr const char* kOverlapColor = "#00a884";

// A trace check's intervals on their lanes, the analysis window shaded, the
// overlap of A and B shaded green; each A interval's colour is the fraction
// of it that is exposed (not overlapped), B's are grey.
struct LaneInterval {
  std::string lane, name;
  double start_ms = 0, end_ms = 0;  // from the window's start
  double exposed_fraction = 0;      // 0..1
  std::string description;
  std::string role;                 // a | b | '' (a listed interval of a share or an older ledger)
};
struct OverlapBand {
  double start_ms = 0, end_ms = 0;  // from the window's start
  std::string description;
};
nlohmann::ordered_json lane_timeline_spec(const std::string& title, const std::vector<LaneInterval>& intervals,
                                          const std::vector<OverlapBand>& overlaps, double window_ms, const std::string& colour_title);

// An acceptance run's criteria: per criterion, its left side (a dot, green
// when the criterion holds, red when not) against its right side (a black
// tick), on one shared axis of the metrics' unit.
struct CriterionMark {
  std::string criterion;
  double lhs = 0, rhs = 0;
  bool passed = false;
  std::string description;
};
nlohmann::ordered_json acceptance_spec(const std::string& title, const std::vector<CriterionMark>& criteria);

// Counts stacked per category (ledger page: experiments per day and verdict).
struct StackedCount {
  std::string category, stack;  // day, verdict
  int count = 0;
  std::string description;
};
nlohmann::ordered_json stacked_bar_spec(const std::string& title, const std::string& x_title,
                                        const std::vector<StackedCount>& counts, const std::vector<std::string>& stacks,
                                        const std::vector<std::string>& colours);

// One horizontal bar per category (queue states).
nlohmann::ordered_json bar_spec(const std::string& title, const std::vector<std::pair<std::string, int>>& counts);

}  // namespace densefeed
