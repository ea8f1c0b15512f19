#include "interval_set.h"

#include <algorithm>

namespace densefeed {

IntervalSet IntervalSet::from(std::vector<Interval> intervals) {
  std::erase_if(intervals, [](const Interval& i) { return i.end <= i.start; });
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  IntervalSet s;
  for (const auto& i : intervals) {
    if (!s.v_.empty() && i.start <= s.v_.back().end) {
      s.v_.back().end = std::max(s.v_.back().end, i.end);
    } else {
      s.v_.push_back(i);
    }
  }
  return s;
}

std::int64_t IntervalSet::measure() const {
  std::int64_t total = 0;
  for (const auto& i : v_) total += i.length();
  return total;
}

std::int64_t IntervalSet::covered(Interval q) const {
  if (q.end <= q.start) return 0;
  // First interval that ends after q.start.
  auto it = std::upper_bound(v_.begin(), v_.end(), q.start, [](std::int64_t t, const Interval& i) { return t < i.end; });
  std::int64_t total = 0;
  for (; it != v_.end() && it->start < q.end; ++it) total += std::min(it->end, q.end) - std::max(it->start, q.start);
  return total;
}

IntervalSet IntervalSet::unite(const IntervalSet& other) const {
  std::vector<Interval> all;
  all.reserve(v_.size() + other.v_.size());
  std::merge(v_.begin(), v_.end(), other.v_.begin(), other.v_.end(), std::back_inserter(all),
             [](const Interval& a, const Interval& b) { return a.start < b.start; });
  IntervalSet s;
  for (const auto& i : all) {
    if (!s.v_.empty() && i.start <= s.v_.back().end) s.v_.back().end = std::max(s.v_.back().end, i.end);
    else s.v_.push_back(i);
  }
  return s;
}

IntervalSet IntervalSet::intersect(const IntervalSet& other) const {
  IntervalSet s;
  std::size_t i = 0, j = 0;
  while (i < v_.size() && j < other.v_.size()) {
    const std::int64_t lo = std::max(v_[i].start, other.v_[j].start);
    const std::int64_t hi = std::min(v_[i].end, other.v_[j].end);
    if (lo < hi) s.v_.push_back({lo, hi});
    if (v_[i].end < other.v_[j].end) ++i;
    else ++j;
  }
  return s;
}

IntervalSet IntervalSet::subtract(const IntervalSet& other) const {
  IntervalSet s;
  std::size_t j = 0;
  for (const auto& a : v_) {
    std::int64_t cur = a.start;
    while (j < other.v_.size() && other.v_[j].end <= cur) ++j;
    std::size_t k = j;
    while (k < other.v_.size() && other.v_[k].start < a.end) {
      if (other.v_[k].start > cur) s.v_.push_back({cur, other.v_[k].start});
      cur = std::max(cur, other.v_[k].end);
      ++k;
    }
    if (cur < a.end) s.v_.push_back({cur, a.end});
  }
  return s;
}

IntervalSet IntervalSet::clip(Interval w) const {
  IntervalSet s;
  for (const auto& i : v_) {
    const std::int64_t lo = std::max(i.start, w.start), hi = std::min(i.end, w.end);
    if (lo < hi) s.v_.push_back({lo, hi});
  }
  return s;
}

IntervalSet IntervalSet::gaps() const {
  IntervalSet s;
  for (std::size_t k = 1; k < v_.size(); ++k) s.v_.push_back({v_[k - 1].end, v_[k].start});
  return s;
}

}  // namespace densefeed
