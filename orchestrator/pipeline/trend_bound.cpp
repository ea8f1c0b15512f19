#include "trend_bound.h"

#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "error_trend.h"

namespace densefeed {

void judge_trend_bounds(const GateSpec& gate, GateResult& result) {
  std::optional<std::string> part_key;
  if (gate.structure.partition && !gate.structure.partition->key.empty()) part_key = gate.structure.partition->key;
  for (const auto& out : gate.outputs) {
    for (const auto& bound : out.trends) {
      // Row key: every other case value, so that only `along` moves within a row.
      std::map<std::string, std::vector<std::size_t>> rows;
      std::map<std::string, std::string> row_text;
      std::vector<std::string> order;
      for (std::size_t i = 0; i < result.cases.size(); ++i) {
        const auto& values = result.cases[i].gate_case.values;
        if (!values.contains(bound.along) || !values[bound.along].is_number()) continue;
        // Along the partition key, only the partitioned regime: one part is
        // the unpartitioned computation, whose error is another law's
        // (a key the gate declares, never a count the candidate reports).
        if (part_key && bound.along == *part_key && values[bound.along].get<double>() <= 1) continue;
        nlohmann::ordered_json rest = nlohmann::ordered_json::object();
        std::string text;
        for (const auto& [k, v] : values.items()) {
          if (k == bound.along) continue;
          rest[k] = v;
          text += fmt::format("{}{}={}", text.empty() ? "" : " ", k, v.is_string() ? v.get<std::string>() : v.dump());
        }
        const std::string key = rest.dump();
        if (!rows.count(key)) order.push_back(key);
        rows[key].push_back(i);
        row_text[key] = text;
      }
      for (const auto& key : order) {
        TrendJudgement j;
        j.output = out.name;
        j.metric = bound.metric;
        j.along = bound.along;
        j.row = row_text[key];
        j.max_exponent = bound.max_exponent;
        std::vector<std::pair<double, double>> points;
        for (const auto i : rows[key]) {
          const auto& c = result.cases[i];
          for (const auto& o : c.outputs) {
            // Only outputs that were compared (both files opened) have an error.
            if (o.output != out.name || o.comparison.elements == 0) continue;
            const double y = bound.metric == "max_abs" ? o.comparison.max_abs : o.comparison.rel_l2;
            points.emplace_back(c.gate_case.values[bound.along].get<double>(), y);
            j.cases.push_back(i);
          }
        }
        const auto fit = fit_power_law(points);
        if (!fit) {
          j.text = fmt::format("{}: {} along {}{}: fewer than 3 points with a non-zero error, not judged", out.name, bound.metric,
                               bound.along, j.row.empty() ? "" : " (" + j.row + ")");
        } else if (fit->hi < 1.5 * fit->lo) {
          j.points = fit->points;
          j.text = fmt::format("{}: {} along {}{}: flat (every value within x{:.2f} of the smallest), not judged", out.name,
                               bound.metric, bound.along, j.row.empty() ? "" : " (" + j.row + ")", fit->hi / fit->lo);
        } else if (bound.by_default && fit->r2 < kDefaultTrendMinR2) {
          j.points = fit->points;
          j.r2 = fit->r2;
          j.text = fmt::format("{}: {} along {}{}: no power law (R^2 {:.2f} < {}), the structure's default bound is not judged",
                               out.name, bound.metric, bound.along, j.row.empty() ? "" : " (" + j.row + ")", fit->r2, kDefaultTrendMinR2);
        } else {
          j.exponent = fit->exponent;
          j.r2 = fit->r2;
          j.points = fit->points;
          j.passed = fit->exponent <= bound.max_exponent;
          j.text = fmt::format("{}: {} ~ {}^{:.2f} (R^2 {:.2f}) across {} {}..{}{}, {} the gate's max_exponent {}{}", out.name,
                               bound.metric, bound.along, fit->exponent, fit->r2, bound.along, fit->x_first, fit->x_last,
                               j.row.empty() ? "" : " (" + j.row + ")", j.passed ? "within" : "over", bound.max_exponent,
                               bound.by_default ? " (the structure's default bound along the partition key)" : "");
        }
        if (!j.passed) {
          for (const auto i : j.cases) {
            CaseResult& c = result.cases[i];
            Failure f;
            f.kind = FailureKind::trend;
            f.who = FailureWho::candidate;
            f.output = out.name;
            f.metric = bound.metric;
            f.detail = j.text;
            for (auto& o : c.outputs) {
              if (o.output != out.name) continue;
              if (o.comparison.verdict == Verdict::green) o.failure = f;
              o.comparison.verdict = worst(o.comparison.verdict, Verdict::red);
              o.comparison.reason += (o.comparison.reason.empty() ? "" : "; ") + std::string("trend: ") + j.text;
            }
            if (c.verdict == Verdict::green) c.failure = f;
            c.verdict = worst(c.verdict, Verdict::red);
            c.reason += (c.reason.empty() ? "" : "; ") + fmt::format("{}: trend: {}", out.name, j.text);
            if (!result.failure.failed()) result.failure = c.failure;
            result.verdict = worst(result.verdict, c.verdict);
          }
        }
        result.trends.push_back(std::move(j));
      }
    }
  }
}

}  // namespace densefeed
