#include <gtest/gtest.h>

#include "error_trend.h"

namespace densefeed {
namespace {

CaseResult make_case(int T, int shards, double rel, double bound) {
  CaseResult c;
  c.gate_case.values = {{"regime", "long-memory"}, {"T", T}, {"shards", shards}};
  c.gate_case.label = "T=" + std::to_string(T) + " shards=" + std::to_string(shards);
  Comparison cmp;
  cmp.checks.push_back({"rel_l2", rel, bound, rel <= bound});
  c.outputs.push_back({"final_state", cmp});
  return c;
}

TEST(ErrorTrend, TableAndFittedExponents) {
  GateResult r;
  // error = 1e-4 * shards * (T / 1024)^0.5: exponent 1 in shards, 0.5 in T.
  for (int T : {1024, 4096, 16384}) {
    for (int shards : {2, 4, 8}) r.cases.push_back(make_case(T, shards, 1e-4 * shards * std::sqrt(T / 1024.0), 1e-3));
  }
  const auto tables = build_trend_tables(r, "T", "shards");
  ASSERT_EQ(tables.size(), 1u);
  const auto& t = tables[0];
  EXPECT_EQ(t.rows, (std::vector<std::string>{"1024", "4096", "16384"}));
  EXPECT_EQ(t.columns, (std::vector<std::string>{"2", "4", "8"}));
  EXPECT_DOUBLE_EQ(t.cells[1][1], 1e-4 * 4 * 2);
  EXPECT_TRUE(t.crossed[2][2]);   // 1e-4 * 8 * 4 = 3.2e-3 > 1e-3
  EXPECT_FALSE(t.crossed[0][0]);  // 2e-4
  ASSERT_EQ(t.trends.size(), 3u + 3u);
  EXPECT_EQ(t.trends[0], "T=1024: rel_l2 ~ shards^1.00 (R^2 1.00), grows x2.00 per 2x shards (shards 2..8)");
  EXPECT_EQ(t.trends[3], "shards=2: rel_l2 ~ T^0.50 (R^2 1.00), grows x1.41 per 2x T (T 1024..16384)");
  const auto text = render_trend_table(t);
  EXPECT_NE(text.find("3.20e-03*"), std::string::npos) << text;
}

TEST(ErrorTrend, AStepIsReportedAsAStepNotAsAPowerLaw) {
  // One shard is exact; from two shards on the error sits near 4e-2: the
  // finding is the jump, which a straight log-log line would hide.
  GateResult r;
  const std::vector<std::pair<int, double>> errors = {{1, 1.8e-6}, {2, 3.6e-2}, {4, 5.3e-2}, {8, 6.1e-2}, {16, 6.4e-2}};
  for (auto [shards, e] : errors) r.cases.push_back(make_case(8192, shards, e, 1e-5));
  const auto tables = build_trend_tables(r, "T", "shards");
  ASSERT_EQ(tables[0].trends.size(), 1u);
  EXPECT_EQ(tables[0].trends[0].rfind("T=8192: no power law in shards (R^2 ", 0), 0u) << tables[0].trends[0];
  EXPECT_NE(tables[0].trends[0].find("largest step x2e+04 (up) from shards=1 to 2"), std::string::npos) << tables[0].trends[0];
}

TEST(ErrorTrend, NoiseAroundALevelIsFlatNotAStep) {
  // tf32x3 at the fp32 floor: values within a few percent of each other.
  GateResult r;
  const std::vector<std::pair<int, double>> errors = {{1, 1.78e-6}, {2, 1.75e-6}, {4, 1.67e-6}, {8, 1.71e-6}};
  for (auto [shards, e] : errors) r.cases.push_back(make_case(8000, shards, e, 1e-5));
  const auto tables = build_trend_tables(r, "T", "shards");
  ASSERT_EQ(tables[0].trends.size(), 1u);
  EXPECT_EQ(tables[0].trends[0], "T=8000: flat: every value within x1.07 of the smallest (shards 1..8)");
}

TEST(ErrorTrend, GroupsByOtherVaryingKeys) {
  GateResult r;
  for (const char* regime : {"long-memory", "fast-decay"}) {
    for (int shards : {1, 2}) {
      auto c = make_case(8192, shards, 1e-6, 1e-5);
      c.gate_case.values["regime"] = regime;
      r.cases.push_back(c);
    }
  }
  const auto tables = build_trend_tables(r, "T", "shards");
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[0].group, "regime=long-memory");
  EXPECT_EQ(tables[1].group, "regime=fast-decay");
}

}  // namespace
}  // namespace densefeed
