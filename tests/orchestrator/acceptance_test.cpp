// Pre-registered acceptance criteria: the grammar, and their values on
// hand-computed metrics.
#include <gtest/gtest.h>

#include <stdexcept>

#include "acceptance.h"

namespace densefeed {
namespace {

TEST(AcceptanceCriteria, ParsesBoundsRatiosAndStatistics) {
  auto c = parse_criterion("ttft_p50_ms <= 200");
  EXPECT_EQ(c.lhs.metric, "ttft_p50_ms");
  EXPECT_EQ(c.op, "<=");
  EXPECT_DOUBLE_EQ(c.factor, 200);
  EXPECT_FALSE(c.rhs_term);
  c = parse_criterion("  prefill_kv<=1.05*prefill ");
  EXPECT_EQ(c.rhs_term->metric, "prefill");
  EXPECT_DOUBLE_EQ(c.factor, 1.05);
  c = parse_criterion("p90(latency.ms) > mean(base-latency)");
  EXPECT_EQ(c.lhs.statistic, "p90");
  EXPECT_EQ(c.lhs.metric, "latency.ms");
  EXPECT_EQ(c.rhs_term->statistic, "mean");
  EXPECT_DOUBLE_EQ(c.factor, 1);
}

TEST(AcceptanceCriteria, RefusesWhatItCannotReadNamingWhere) {
  const auto message = [](const std::string& text) {
    try {
      parse_criterion(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("x = 3"), "'x = 3': at character 3: expected a comparison (<=, <, >=, >)");
  EXPECT_EQ(message("x <= "), "'x <= ': at character 6: expected a metric name");
  EXPECT_EQ(message("x <= 2 *"), "'x <= 2 *': at character 9: expected a metric name");
  EXPECT_EQ(message("p42(x) <= 1"), "'p42(x) <= 1': at character 4: expected a statistic (median, mean, min, max, p10, p50, p90, p95, p99) before '('");
  EXPECT_EQ(message("median(x <= 1"), "'median(x <= 1': at character 10: expected ')'");
  EXPECT_EQ(message("x <= 1 y"), "'x <= 1 y': at character 8: expected the end of the criterion");
  EXPECT_EQ(message("x <= 1e999"), "'x <= 1e999': at character 6: expected a finite number");
}

TEST(AcceptanceCriteria, EvaluatesWithTheNamedOrDefaultStatistic) {
  const nlohmann::json metrics = {{"a", {1.0, 2.0, 3.0, 10.0}}, {"b", 2.5}, {"bad", {1, "x"}}, {"empty", nlohmann::json::array()}};
  const auto r = evaluate_criteria({parse_criterion("a <= b"), parse_criterion("mean(a) > 4"), parse_criterion("p90(a) < 8"),
                                    parse_criterion("max(a) >= 4 * b"), parse_criterion("missing < 1"), parse_criterion("bad < 1"),
                                    parse_criterion("empty < 1")},
                                   metrics, "median");
  EXPECT_DOUBLE_EQ(*r[0].lhs, 2.5);  // median of 1, 2, 3, 10
  EXPECT_EQ(r[0].statistic, "median");
  EXPECT_TRUE(r[0].passed);
  EXPECT_DOUBLE_EQ(*r[1].lhs, 4.0);
  EXPECT_FALSE(r[1].passed);
  EXPECT_DOUBLE_EQ(*r[2].lhs, 7.9);  // 3 + 0.7 * (10 - 3)
  EXPECT_TRUE(r[2].passed);
  EXPECT_DOUBLE_EQ(*r[3].rhs, 10.0);
  EXPECT_TRUE(r[3].passed);
  EXPECT_FALSE(r[4].passed);
  EXPECT_EQ(r[4].problem, "metrics.json has no metric 'missing'");
  EXPECT_EQ(r[5].problem, "metric 'bad' holds a non-number sample");
  EXPECT_EQ(r[6].problem, "metric 'empty' is neither a number nor a non-empty list of numbers");
}

}  // namespace
}  // namespace densefeed
