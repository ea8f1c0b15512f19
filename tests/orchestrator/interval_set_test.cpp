#include <gtest/gtest.h>

#include "interval_set.h"

namespace densefeed {
namespace {

using V = std::vector<Interval>;

TEST(IntervalSet, MergesOverlappingAndTouchingIntervalsInAnyOrder) {
  const auto s = IntervalSet::from({{10, 20}, {0, 5}, {5, 8}, {15, 30}, {40, 40}, {50, 45}});
  EXPECT_EQ(s.intervals(), (V{{0, 8}, {10, 30}}));
  EXPECT_EQ(s.measure(), 28);
  EXPECT_EQ(s.gaps().intervals(), (V{{8, 10}}));
}

TEST(IntervalSet, IntersectSubtractUniteClip) {
  const auto a = IntervalSet::from({{0, 10}, {20, 30}, {40, 50}});
  const auto b = IntervalSet::from({{5, 25}, {45, 60}});
  EXPECT_EQ(a.intersect(b).intervals(), (V{{5, 10}, {20, 25}, {45, 50}}));
  EXPECT_EQ(a.subtract(b).intervals(), (V{{0, 5}, {25, 30}, {40, 45}}));
  EXPECT_EQ(b.subtract(a).intervals(), (V{{10, 20}, {50, 60}}));
  EXPECT_EQ(a.unite(b).intervals(), (V{{0, 30}, {40, 60}}));
  EXPECT_EQ(a.clip({8, 42}).intervals(), (V{{8, 10}, {20, 30}, {40, 42}}));
  EXPECT_EQ(a.subtract(IntervalSet()).intervals(), a.intervals());
  EXPECT_TRUE(IntervalSet().intersect(a).empty());
}

TEST(IntervalSet, CoveredLengthOfOneInterval) {
  const auto s = IntervalSet::from({{0, 10}, {20, 30}, {40, 50}});
  EXPECT_EQ(s.covered({5, 45}), 5 + 10 + 5);
  EXPECT_EQ(s.covered({10, 20}), 0);
  EXPECT_EQ(s.covered({0, 100}), 30);
  EXPECT_EQ(s.covered({25, 25}), 0);
  EXPECT_EQ(s.covered({-5, 1}), 1);
}

}  // namespace
}  // namespace densefeed
