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

TEST(ErrorTrend, TableAndGrowthPerDoubling) {
  GateResult r;
  // error = 1e-4 * shards * (T / 1024)^0.5: x2 per 2x shards, x1.41 per 2x T.
  for (int T : {1024, 4096, 16384}) {
    for (int shards : {1, 2, 4, 8}) {
      const double e = shards == 1 ? 1e-6 : 1e-4 * shards * std::sqrt(T / 1024.0);
      r.cases.push_back(make_case(T, shards, e, 1e-3));
    }
  }
  const auto tables = build_trend_tables(r, "T", "shards");
  ASSERT_EQ(tables.size(), 1u);
  const auto& t = tables[0];
  EXPECT_EQ(t.rows, (std::vector<std::string>{"1024", "4096", "16384"}));
  EXPECT_EQ(t.columns, (std::vector<std::string>{"1", "2", "4", "8"}));
  EXPECT_DOUBLE_EQ(t.cells[1][2], 1e-4 * 4 * 2);
  EXPECT_TRUE(t.crossed[2][3]);   // 1e-4 * 8 * 4 = 3.2e-3 > 1e-3
  EXPECT_FALSE(t.crossed[0][1]);  // 2e-4
  ASSERT_EQ(t.trends.size(), 3u + 3u);
  EXPECT_EQ(t.trends[0], "T=1024: rel_l2 ~ shards^1.00, grows x2.00 per 2x shards (shards 2..8)");
  EXPECT_EQ(t.trends[3], "shards=2: rel_l2 ~ T^0.50, grows x1.41 per 2x T (T 1024..16384)");
  const auto text = render_trend_table(t);
  EXPECT_NE(text.find("3.20e-03*"), std::string::npos) << text;
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
