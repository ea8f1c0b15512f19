// Sets of time as sorted, disjoint half-open intervals [start, end) of int64
// nanoseconds: the algebra behind overlap, exposed time and "where the time
// went". Touching intervals merge ([0,5) + [5,9) = [0,9)), as in Holistic
// Trace Analysis's merge_kernel_intervals.
#pragma once

#include <cstdint>
#include <vector>

namespace densefeed {

struct Interval {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t length() const { return end - start; }
  bool operator==(const Interval&) const = default;
};

class IntervalSet {
 public:
  IntervalSet() = default;
  // Any intervals, in any order, overlapping or not; empty ones are dropped.
  static IntervalSet from(std::vector<Interval> intervals);

  const std::vector<Interval>& intervals() const { return v_; }
  bool empty() const { return v_.empty(); }
  // Total length in ns.
  std::int64_t measure() const;
  // Length of [start, end) covered by the set, O(log n + covered pieces).
  std::int64_t covered(Interval i) const;

  IntervalSet unite(const IntervalSet& other) const;
  IntervalSet intersect(const IntervalSet& other) const;
  IntervalSet subtract(const IntervalSet& other) const;
  IntervalSet clip(Interval window) const;
  // The holes between the set's first start and last end.
  IntervalSet gaps() const;

 private:
  std::vector<Interval> v_;
};

}  // namespace densefeed
