#include "error_trend.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

namespace densefeed {
namespace {

struct Fit {
  double slope = 0;
  double r2 = 0;  // coefficient of determination of the log-log fit
};

// Least-squares fit of log2(y) on log2(x) over finite positive points.
std::optional<Fit> log_log_fit(const std::vector<std::pair<double, double>>& points) {
  std::vector<std::pair<double, double>> p;
  for (auto [x, y] : points) {
    if (x > 0 && y > 0 && std::isfinite(y)) p.emplace_back(std::log2(x), std::log2(y));
  }
  if (p.size() < 3) return std::nullopt;
  double mx = 0, my = 0;
  for (auto [x, y] : p) {
    mx += x;
    my += y;
  }
  mx /= p.size();
  my /= p.size();
  double sxy = 0, sxx = 0, syy = 0;
  for (auto [x, y] : p) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) * (x - mx);
    syy += (y - my) * (y - my);
  }
  if (sxx == 0) return std::nullopt;
  return Fit{sxy / sxx, syy == 0 ? 1.0 : (sxy * sxy) / (sxx * syy)};
}

// "rel_l2 ~ shards^0.16 (R^2 0.98), grows x1.12 per 2x shards (shards 2..64)",
// or, where no power law fits, the largest step between neighbours, which is
// then the finding ("x19900 from shards=1 to 2").
std::string describe_trend(const std::string& metric, const std::string& axis,
                           const std::vector<std::pair<double, double>>& points) {
  const auto fit = log_log_fit(points);
  if (!fit) return "";
  std::vector<std::pair<double, double>> p;
  for (auto pt : points) {
    if (pt.second > 0 && std::isfinite(pt.second)) p.push_back(pt);
  }
  const std::string range = fmt::format("({} {}..{})", axis, p.front().first, p.back().first);
  double lo = p.front().second, hi = lo;
  for (auto pt : p) {
    lo = std::min(lo, pt.second);
    hi = std::max(hi, pt.second);
  }
  // Values that barely move are noise around a level: a fit means nothing.
  if (hi / lo < 1.5) return fmt::format("flat: every value within x{:.2f} of the smallest {}", hi / lo, range);
  if (fit->r2 < 0.9) {
    std::size_t at = 1;
    double step = 0;
    for (std::size_t i = 1; i < p.size(); ++i) {
      const double r = std::max(p[i].second / p[i - 1].second, p[i - 1].second / p[i].second);
      if (r > step) {
        step = r;
        at = i;
      }
    }
    return fmt::format("no power law in {} (R^2 {:.2f}); largest step x{:.3g} ({}) from {}={} to {} {}", axis, fit->r2, step,
                       p[at].second > p[at - 1].second ? "up" : "down", axis, p[at - 1].first, p[at].first, range);
  }
  const double factor = std::exp2(fit->slope);
  const std::string law = fmt::format("{} ~ {}^{:.2f} (R^2 {:.2f})", metric, axis, fit->slope, fit->r2);
  if (factor >= 1.1) return fmt::format("{}, grows x{:.2f} per 2x {} {}", law, factor, axis, range);
  if (factor <= 1 / 1.1) return fmt::format("{}, shrinks x{:.2f} per 2x {} {}", law, 1 / factor, axis, range);
  return fmt::format("{}, flat {}", law, range);
}

struct RegimePoint {
  double x, y;
  std::int64_t parts;  // the case's parts (gate_structure.h); 0: unknown
};

// A line's trend, fitted within one partitioning regime at a time: a law
// fitted across unpartitioned and partitioned points (one chunk and many)
// describes neither (issue 30: "~T^3.5" over both). Where the line holds one
// regime or none is known, the one description as before; else one per
// regime with points, "partitioned: ..." / "unpartitioned: ...".
std::vector<std::string> describe_by_regime(const std::string& metric, const std::string& axis, const std::vector<RegimePoint>& line) {
  std::vector<std::pair<double, double>> all, split[2];
  bool known = false;
  for (const auto& p : line) {
    all.emplace_back(p.x, p.y);
    if (p.parts > 0 && std::isfinite(p.y)) {
      known = true;
      split[p.parts > 1 ? 1 : 0].emplace_back(p.x, p.y);
    }
  }
  std::vector<std::string> out;
  if (!known || split[0].empty() || split[1].empty()) {
    if (auto text = describe_trend(metric, axis, all); !text.empty()) out.push_back(text);
    return out;
  }
  for (int regime : {0, 1}) {
    if (auto text = describe_trend(metric, axis, split[regime]); !text.empty()) {
      out.push_back(fmt::format("{}: {}", regime == 1 ? "partitioned" : "unpartitioned", text));
    }
  }
  // The step between the regimes, where the line crosses from the last
  // unpartitioned point to the first partitioned one ("x2.04e+04 from
  // shards=1 to 2"): what partitioning adds, in one figure.
  const auto& u = split[0].back();
  const auto& p = split[1].front();
  if (u.first < p.first && u.second > 0 && p.second > 0) {
    out.push_back(fmt::format("unpartitioned to partitioned: x{:.3g} from {}={} to {}", p.second / u.second, axis, u.first, p.first));
  }
  return out;
}

}  // namespace

std::optional<PowerLawFit> fit_power_law(const std::vector<std::pair<double, double>>& points) {
  const auto fit = log_log_fit(points);
  if (!fit) return std::nullopt;
  PowerLawFit f;
  f.exponent = fit->slope;
  f.r2 = fit->r2;
  bool first = true;
  for (auto [x, y] : points) {
    if (!(x > 0 && y > 0 && std::isfinite(y))) continue;
    ++f.points;
    f.lo = first ? y : std::min(f.lo, y);
    f.hi = first ? y : std::max(f.hi, y);
    f.x_first = first ? x : std::min(f.x_first, x);
    f.x_last = first ? x : std::max(f.x_last, x);
    first = false;
  }
  return f;
}

std::vector<TrendTable> build_trend_tables(const GateResult& result, const std::string& row_key,
                                           const std::string& column_key) {
  // Keys that vary across cases, other than the two axes, define the groups.
  std::map<std::string, std::set<std::string>> seen_values;
  for (const auto& c : result.cases) {
    for (const auto& [k, v] : c.gate_case.values.items()) seen_values[k].insert(v.dump());
  }
  std::vector<std::string> group_keys;
  for (const auto& [k, values] : seen_values) {
    if (k != row_key && k != column_key && values.size() > 1) group_keys.push_back(k);
  }

  struct Key {
    std::string output, metric, group;
    bool operator<(const Key& o) const { return std::tie(output, metric, group) < std::tie(o.output, o.metric, o.group); }
  };
  struct Point {
    double row, column, value;
    bool crossed;
    std::int64_t parts;  // 0: unknown
  };
  std::map<Key, TrendTable> tables;
  std::map<Key, std::vector<Point>> points;
  std::vector<Key> order;
  for (const auto& c : result.cases) {
    const auto& v = c.gate_case.values;
    if (!v.contains(row_key) || !v.contains(column_key) || !v[row_key].is_number() || !v[column_key].is_number()) continue;
    std::string group;
    for (const auto& k : group_keys) {
      if (!v.contains(k)) continue;
      // An empty string is a key's "not set" (e.g. seq_lens: one sequence).
      std::string text = v[k].is_string() ? v[k].get<std::string>() : v[k].dump();
      if (text.empty()) continue;
      group += (group.empty() ? "" : " ") + k + "=" + text;
    }
    for (const auto& o : c.outputs) {
      for (const auto& m : o.comparison.checks) {
        Key key{o.output, m.metric, group};
        auto [it, inserted] = tables.try_emplace(key);
        if (inserted) {
          order.push_back(key);
          it->second = TrendTable{o.output, m.metric, m.bound, group, row_key, column_key, {}, {}, {}, {}, {}};
        }
        points[key].push_back({v[row_key].get<double>(), v[column_key].get<double>(), m.value, !m.passed, c.parts.value_or(0)});
      }
    }
  }

  std::vector<TrendTable> out;
  for (const auto& key : order) {
    TrendTable t = tables[key];
    std::set<double> row_values, column_values;
    for (const auto& p : points[key]) {
      row_values.insert(p.row);
      column_values.insert(p.column);
    }
    const std::vector<double> rows(row_values.begin(), row_values.end());
    const std::vector<double> columns(column_values.begin(), column_values.end());
    for (double r : rows) t.rows.push_back(fmt::format("{}", r));
    for (double c : columns) t.columns.push_back(fmt::format("{}", c));
    t.cells.assign(rows.size(), std::vector<double>(columns.size(), NAN));
    t.crossed.assign(rows.size(), std::vector<bool>(columns.size(), false));
    std::vector<std::vector<std::int64_t>> parts(rows.size(), std::vector<std::int64_t>(columns.size(), 0));
    for (const auto& p : points[key]) {
      const auto r = std::lower_bound(rows.begin(), rows.end(), p.row) - rows.begin();
      const auto c = std::lower_bound(columns.begin(), columns.end(), p.column) - columns.begin();
      t.cells[r][c] = p.value;
      t.crossed[r][c] = p.crossed;
      parts[r][c] = p.parts;
    }
    // Along each row (e.g. error against shards at fixed T), then each column.
    for (std::size_t r = 0; r < rows.size(); ++r) {
      std::vector<RegimePoint> line;
      for (std::size_t c = 0; c < columns.size(); ++c) line.push_back({columns[c], t.cells[r][c], parts[r][c]});
      for (const auto& text : describe_by_regime(t.metric, column_key, line)) t.trends.push_back(fmt::format("{}={}: {}", row_key, t.rows[r], text));
    }
    for (std::size_t c = 0; c < columns.size(); ++c) {
      std::vector<RegimePoint> line;
      for (std::size_t r = 0; r < rows.size(); ++r) line.push_back({rows[r], t.cells[r][c], parts[r][c]});
      for (const auto& text : describe_by_regime(t.metric, row_key, line)) t.trends.push_back(fmt::format("{}={}: {}", column_key, t.columns[c], text));
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string render_trend_table(const TrendTable& t) {
  std::string s = fmt::format("{} {} by {} (rows) and {} (columns){}; * = over the bound {:.1e}\n", t.output, t.metric,
                              t.row_key, t.column_key, t.group.empty() ? "" : ", " + t.group, t.bound);
  s += fmt::format("  {:>8}", t.row_key + " \\ " + t.column_key);
  for (const auto& c : t.columns) s += fmt::format(" {:>10}", c);
  s += "\n";
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    s += fmt::format("  {:>8}", t.rows[r]);
    for (std::size_t c = 0; c < t.columns.size(); ++c) {
      const double v = t.cells[r][c];
      std::string cell = std::isnan(v) ? "-" : fmt::format("{:.2e}{}", v, t.crossed[r][c] ? "*" : " ");
      s += fmt::format(" {:>10}", cell);
    }
    s += "\n";
  }
  for (const auto& line : t.trends) s += "  trend: " + line + "\n";
  return s;
}

nlohmann::ordered_json trend_table_json(const TrendTable& t) {
  const auto numbers = [](const std::vector<std::string>& axis) {
    std::vector<double> out;
    for (const auto& v : axis) out.push_back(std::stod(v));
    return out;
  };
  nlohmann::ordered_json cells = nlohmann::ordered_json::array();
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    nlohmann::ordered_json row = nlohmann::ordered_json::array();
    for (std::size_t c = 0; c < t.columns.size(); ++c) {
      row.push_back(std::isnan(t.cells[r][c]) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(t.cells[r][c]));
    }
    cells.push_back(row);
  }
  return {{"output", t.output}, {"metric", t.metric}, {"bound", t.bound}, {"group", t.group},
          {"rows_key", t.row_key}, {"columns_key", t.column_key}, {"rows", numbers(t.rows)}, {"columns", numbers(t.columns)},
          {"values", cells}, {"crossed", t.crossed}, {"trends", t.trends}};
}

}  // namespace densefeed
