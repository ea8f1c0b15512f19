// How an error metric moves across a gate's grid: a table of the metric
// against two case keys (e.g. rows T, columns shards), one table per value of
// the other keys that vary, and the growth per doubling along each axis.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gate_result.h"

namespace densefeed {

struct TrendTable {
  std::string output;
  std::string metric;  // "rel_l2" | "max_abs"
  double bound = 0;
  std::string group;   // the other varying keys, e.g. "regime=long-memory"
  std::string row_key;
  std::string column_key;
  std::vector<std::string> rows;     // row values, ascending
  std::vector<std::string> columns;  // column values, ascending
  // cells[r][c]: metric value, NaN where no case (or no value) exists.
  std::vector<std::vector<double>> cells;
  std::vector<std::vector<bool>> crossed;  // over the bound
  // One line per row and per column with at least 3 points, e.g.
  // "T=8192: rel_l2 ~ shards^0.50, grows x1.41 per 2x shards (shards 2..64)":
  // the exponent is the slope of the least-squares fit of log2(value) on
  // log2(axis value).
  std::vector<std::string> trends;
};

// The power law y ~ x^exponent fitted by least squares of log2(y) on
// log2(x) over the points with x > 0 and finite y > 0; nullopt with fewer
// than 3 such points or a single x. r2: coefficient of determination of
// that log-log fit. The same fit the trend lines print and trend bounds
// (gate_spec.h TrendBound) judge.
struct PowerLawFit {
  double exponent = 0;
  double r2 = 0;
  std::size_t points = 0;
  double lo = 0, hi = 0;  // smallest and largest y fitted
  double x_first = 0, x_last = 0;  // smallest and largest x fitted
};
std::optional<PowerLawFit> fit_power_law(const std::vector<std::pair<double, double>>& points);

// Tables for every output and metric whose gate bound exists, over
// `row_key` x `column_key` (both must be numeric case keys). Cases lacking
// either key are left out; a case shared by several groups is in each.
std::vector<TrendTable> build_trend_tables(const GateResult& result, const std::string& row_key,
                                           const std::string& column_key);

// Fixed-width text rendering.
std::string render_trend_table(const TrendTable& table);

nlohmann::ordered_json trend_table_json(const TrendTable& table);

}  // namespace densefeed
