#include "trace_analysis.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "error.h"
#include "interval_set.h"

namespace densefeed {
namespace {

Interval clipped(const Slice& s, const AnalysisWindow& w) { return {std::max(s.start, w.start), std::min(s.end, w.end)}; }

bool in_window(const Slice& s, const AnalysisWindow& w) {
  if (s.start == s.end) return s.start >= w.start && s.start < w.end;
  return s.start < w.end && s.end > w.start;
}

AttributedSlice attribute(const Timeline& t, std::size_t i, const AnalysisWindow& w, std::int64_t ns) {
  const Slice& s = t.slices[i];
  const Lane& l = t.lanes[s.lane];
  const Interval c = clipped(s, w);
  return {t.strings[s.name], l.label(), l.rank, t.files[static_cast<std::size_t>(l.file)].path, s.event, c.start, c.end, ns};
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// (ns, slice index) pairs: the `limit` largest, named; ties by time.
std::vector<AttributedSlice> largest(const Timeline& t, std::vector<std::pair<std::int64_t, std::size_t>>& v,
                                    const AnalysisWindow& w, std::size_t limit) {
  const auto order = [&](const std::pair<std::int64_t, std::size_t>& x, const std::pair<std::int64_t, std::size_t>& y) {
    if (x.first != y.first) return x.first > y.first;
    if (t.slices[x.second].start != t.slices[y.second].start) return t.slices[x.second].start < t.slices[y.second].start;
    return x.second < y.second;
  };
  const std::size_t n = std::min(limit, v.size());
  std::partial_sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), v.end(), order);
  std::vector<AttributedSlice> out;
  for (std::size_t k = 0; k < n; ++k) out.push_back(attribute(t, v[k].second, w, v[k].first));
  return out;
}

}  // namespace

AnalysisWindow resolve_window(const Timeline& t, const std::optional<std::string>& name) {
  AnalysisWindow w;
  w.start = t.begin;
  w.end = t.end;
  if (!name) return w;
  w.name = *name;
  std::vector<bool> wanted(t.strings.size(), false);
  bool any = false;
  if (const auto id = t.strings.find(*name)) {
    wanted[*id] = true;
    any = true;
  }
  bool found = false;
  const auto scan = [&] {
    w.start = INT64_MAX;
    w.end = INT64_MIN;
    for (const auto& s : t.slices) {
      if (!wanted[s.name]) continue;
      w.start = std::min(w.start, s.start);
      w.end = std::max(w.end, s.end);
      ++w.slices;
      found = true;
    }
  };
  if (any) scan();
  if (!found) {
    try {
      const std::regex re(*name, std::regex::ECMAScript);
      for (std::uint32_t i = 1; i < t.strings.size(); ++i) wanted[i] = std::regex_search(t.strings[i], re);
      scan();
    } catch (const std::regex_error&) {
    }
  }
  if (!found) {
    std::vector<std::string> similar;
    const std::string needle = lower(*name);
    for (std::uint32_t i = 1; i < t.strings.size() && similar.size() < 5; ++i) {
      if (lower(t.strings[i]).find(needle.substr(0, std::min<std::size_t>(needle.size(), 6))) != std::string::npos) {
        similar.push_back("'" + t.strings[i] + "'");
      }
    }
    throw InputError("--window", {}, "",
                     fmt::format("no slice is named '{}' (exactly or as a regex){}", *name,
                                 similar.empty() ? "" : fmt::format("; names like it: {}", fmt::join(similar, ", "))));
  }
  return w;
}

OverlapResult compute_overlap(const Timeline& t, const std::vector<SliceClass>& classes, const SliceSelector& a,
                              const SliceSelector& b, const AnalysisWindow& w, std::size_t list_limit,
                              std::optional<std::int64_t> list_rank) {
  OverlapResult r;
  r.a = a;
  r.b = b;
  const SliceMatcher ma(t, classes, r.a), mb(t, classes, r.b);
  struct PerRank {
    std::vector<Interval> a, b;
    std::vector<std::size_t> a_slices;
  };
  std::map<std::int64_t, PerRank> ranks;
  for (std::uint32_t l = 0; l < t.lanes.size(); ++l) {
    const bool la = ma.lane_possible(l), lb = mb.lane_possible(l);
    if (!la && !lb) continue;
    const std::int64_t rank = t.lanes[l].rank;
    for (std::size_t i = t.lane_offsets[l]; i < t.lane_offsets[l + 1]; ++i) {
      const Interval c = clipped(t.slices[i], w);
      if (c.end <= c.start) continue;
      if (la && ma.matches(i)) {
        auto& pr = ranks[rank];
        pr.a.push_back(c);
        pr.a_slices.push_back(i);
        ++r.a_slices;
      }
      if (lb && mb.matches(i)) {
        ranks[rank].b.push_back(c);
        ++r.b_slices;
      }
    }
  }
  std::vector<std::pair<std::int64_t, std::size_t>> exposed;
  for (auto& [rank, pr] : ranks) {
    const IntervalSet ua = IntervalSet::from(std::move(pr.a)), ub = IntervalSet::from(std::move(pr.b));
    RankOverlap ro;
    ro.rank = rank;
    ro.a_slices = pr.a_slices.size();
    ro.a_ns = ua.measure();
    ro.b_ns = ub.measure();
    ro.overlap_ns = ua.intersect(ub).measure();
    ro.exposed_ns = ro.a_ns - ro.overlap_ns;
    if (ro.a_ns > 0) ro.fraction = static_cast<double>(ro.overlap_ns) / static_cast<double>(ro.a_ns);
    for (std::size_t i : pr.a_slices) {
      const Interval c = clipped(t.slices[i], w);
      const std::int64_t e = c.length() - ub.covered(c);
      if (e <= 0 || (list_rank && rank != *list_rank)) continue;
      ++r.exposed_count;
      exposed.emplace_back(e, i);
    }
    if (list_rank && rank == *list_rank) {
      // Time order, as the lanes draw them.
      std::vector<std::pair<std::int64_t, std::size_t>> b_slices;
      for (std::uint32_t l = 0; l < t.lanes.size(); ++l) {
        if (t.lanes[l].rank != rank || !mb.lane_possible(l)) continue;
        for (std::size_t i = t.lane_offsets[l]; i < t.lane_offsets[l + 1]; ++i) {
          const Interval c = clipped(t.slices[i], w);
          if (c.end > c.start && mb.matches(i)) b_slices.emplace_back(c.start, i);
        }
      }
      std::sort(b_slices.begin(), b_slices.end());
      std::vector<std::pair<std::int64_t, std::size_t>> a_sorted;
      for (std::size_t i : pr.a_slices) a_sorted.emplace_back(clipped(t.slices[i], w).start, i);
      std::sort(a_sorted.begin(), a_sorted.end());
      for (const auto& [start, i] : a_sorted) {
        if (r.involved_a.size() == OverlapResult::kInvolvedLimit) break;
        const Interval c = clipped(t.slices[i], w);
        r.involved_a.push_back(attribute(t, i, w, c.length() - ub.covered(c)));
      }
      for (const auto& [start, i] : b_slices) {
        if (r.involved_b.size() == OverlapResult::kInvolvedLimit) break;
        r.involved_b.push_back(attribute(t, i, w, 0));
      }
      r.involved_total = a_sorted.size() + b_slices.size();
      const IntervalSet meet = ua.intersect(ub);
      const auto& both = meet.intervals();
      r.overlaps_total = both.size();
      for (std::size_t k = 0; k < std::min(both.size(), OverlapResult::kInvolvedLimit); ++k) r.overlaps.emplace_back(both[k].start, both[k].end);
    }
    r.a_ns += ro.a_ns;
    r.b_ns += ro.b_ns;
    r.overlap_ns += ro.overlap_ns;
    r.exposed_ns += ro.exposed_ns;
    r.ranks.push_back(ro);
  }
  if (r.a_ns > 0) r.fraction = static_cast<double>(r.overlap_ns) / static_cast<double>(r.a_ns);
  r.exposed = largest(t, exposed, w, list_limit);
  if (r.a_slices == 0) {
    r.notes.push_back(fmt::format("A ({}) matched no slice with a duration in the window: no overlap figure", r.a.text));
  }
  if (r.b_slices == 0) r.notes.push_back(fmt::format("B ({}) matched no slice in the window: nothing can hide A", r.b.text));
  return r;
}

ShareResult compute_share(const Timeline& t, const std::vector<SliceClass>& classes, const SliceSelector& selection,
                          const AnalysisWindow& w, std::size_t list_limit, std::optional<std::int64_t> list_rank) {
  ShareResult r;
  const SliceMatcher m(t, classes, selection);
  std::map<std::int64_t, std::vector<Interval>> per_rank;
  std::vector<std::pair<std::int64_t, std::size_t>> all;
  for (std::uint32_t l = 0; l < t.lanes.size(); ++l) {
    if (!m.lane_possible(l)) continue;
    for (std::size_t i = t.lane_offsets[l]; i < t.lane_offsets[l + 1]; ++i) {
      const Interval c = clipped(t.slices[i], w);
      if (c.end <= c.start || !m.matches(i)) continue;
      per_rank[t.lanes[l].rank].push_back(c);
      ++r.slices;
      if (!list_rank || t.lanes[l].rank == *list_rank) all.emplace_back(c.length(), i);
    }
  }
  for (auto& [rank, v] : per_rank) r.ranks.emplace_back(rank, IntervalSet::from(std::move(v)).measure());
  r.total = all.size();
  r.largest = largest(t, all, w, list_limit);
  return r;
}

namespace {

// Lane summaries, and per rank the union of each class over its GPU and CPU
// lanes, merged lane by lane so that nested slices cost nothing.
void lanes_and_breakdown(const Timeline& t, const std::vector<SliceClass>& classes, const AnalysisWindow& w, TraceAnalysis& a) {
  std::map<std::int64_t, std::array<std::vector<Interval>, 4>> by_rank;
  std::vector<Interval> lane_intervals;
  std::array<std::vector<Interval>, 4> lane_classes;
  for (std::uint32_t l = 0; l < t.lanes.size(); ++l) {
    const Lane& lane = t.lanes[l];
    LaneSummary ls;
    ls.label = lane.label();
    ls.kind = lane.kind;
    ls.rank = lane.rank;
    ls.file = t.files[static_cast<std::size_t>(lane.file)].path;
    lane_intervals.clear();
    for (auto& v : lane_classes) v.clear();
    const bool counts_for_breakdown = lane.kind == LaneKind::gpu || lane.kind == LaneKind::cpu;
    for (std::size_t i = t.lane_offsets[l]; i < t.lane_offsets[l + 1]; ++i) {
      const Slice& s = t.slices[i];
      if (!in_window(s, w)) continue;
      ++ls.slices;
      const Interval c = clipped(s, w);
      if (c.end <= c.start) continue;
      lane_intervals.push_back(c);
      if (counts_for_breakdown) lane_classes[static_cast<std::size_t>(classes[i])].push_back(c);
    }
    if (ls.slices == 0) continue;
    if (counts_for_breakdown) {
      auto& sets = by_rank[lane.rank];
      for (std::size_t c = 0; c < 4; ++c) {
        const auto merged = IntervalSet::from(std::move(lane_classes[c]));
        sets[c].insert(sets[c].end(), merged.intervals().begin(), merged.intervals().end());
        lane_classes[c] = {};
      }
    }
    const IntervalSet busy = IntervalSet::from(lane_intervals);
    ls.busy_ns = busy.measure();
    ls.busy_fraction = w.length() > 0 ? static_cast<double>(ls.busy_ns) / static_cast<double>(w.length()) : 0.0;
    const IntervalSet gaps = busy.gaps();
    for (const auto& g : gaps.intervals()) {
      ++ls.gaps;
      ls.gap_ns += g.length();
      if (g.length() > ls.largest_gap_ns) {
        ls.largest_gap_ns = g.length();
        ls.largest_gap_start = g.start;
      }
    }
    a.lanes.push_back(std::move(ls));
  }
  for (auto& [rank, sets] : by_rank) {
    TimeBreakdown b;
    b.rank = rank;
    b.window_ns = w.length();
    IntervalSet covered;
    for (std::size_t c = 0; c < 4; ++c) {
      const IntervalSet s = IntervalSet::from(std::move(sets[c]));
      b.ns[c] = s.subtract(covered).measure();
      covered = covered.unite(s);
    }
    b.ns[static_cast<std::size_t>(SliceClass::idle)] = w.length() - covered.measure();
    a.breakdown.push_back(b);
  }
}

// Exclusive time: a slice's time minus that of the slices directly nested in
// it on the same lane (CPU and annotation lanes; GPU streams do not nest).
std::vector<NameTime> top_names(const Timeline& t, const std::vector<SliceClass>& classes, const AnalysisWindow& w,
                                std::size_t top) {
  struct Acc {
    std::size_t count = 0;
    std::int64_t inclusive = 0, exclusive = 0;
    SliceClass cls = SliceClass::other;
  };
  std::unordered_map<std::uint64_t, Acc> acc;
  std::vector<std::int64_t> excl;
  std::vector<std::size_t> stack;
  for (std::uint32_t l = 0; l < t.lanes.size(); ++l) {
    const std::size_t b = t.lane_offsets[l], e = t.lane_offsets[l + 1];
    const bool nests = t.lanes[l].kind == LaneKind::cpu || t.lanes[l].kind == LaneKind::annotation;
    excl.assign(e - b, 0);
    stack.clear();
    for (std::size_t i = b; i < e; ++i) {
      const Slice& s = t.slices[i];
      if (!in_window(s, w)) continue;
      const std::int64_t len = std::max<std::int64_t>(0, clipped(s, w).length());
      excl[i - b] = len;
      if (nests) {
        while (!stack.empty() && t.slices[stack.back()].end <= s.start) stack.pop_back();
        if (!stack.empty() && s.end <= t.slices[stack.back()].end) excl[stack.back() - b] -= len;
        stack.push_back(i);
      }
    }
    for (std::size_t i = b; i < e; ++i) {
      const Slice& s = t.slices[i];
      if (!in_window(s, w)) continue;
      auto& x = acc[(static_cast<std::uint64_t>(t.lanes[l].kind) << 32) | s.name];
      ++x.count;
      x.inclusive += std::max<std::int64_t>(0, clipped(s, w).length());
      x.exclusive += excl[i - b];
      x.cls = classes[i];
    }
  }
  std::array<std::vector<NameTime>, 4> per_kind;
  for (const auto& [key, x] : acc) {
    const auto kind = static_cast<LaneKind>(key >> 32);
    per_kind[static_cast<std::size_t>(kind)].push_back(
        {t.strings[static_cast<std::uint32_t>(key & 0xFFFFFFFF)], kind, x.cls, x.count, x.inclusive, x.exclusive});
  }
  std::vector<NameTime> out;
  for (auto& v : per_kind) {
    std::sort(v.begin(), v.end(), [](const NameTime& x, const NameTime& y) {
      if (x.exclusive_ns != y.exclusive_ns) return x.exclusive_ns > y.exclusive_ns;
      return x.name < y.name;
    });
    if (v.size() > top) v.resize(top);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// GPU slice start - end of the CPU call with its correlation id (same file).
LaunchDelay launch_delay(const Timeline& t, const AnalysisWindow& w, std::size_t list_limit) {
  // (file, correlation id) -> the call; sorted for lookups, 16 bytes a call.
  struct Call {
    std::uint64_t key;
    std::uint32_t slice;
  };
  const auto key_of = [&](const Slice& s) {
    return (static_cast<std::uint64_t>(t.lanes[s.lane].file) << 48) ^ static_cast<std::uint64_t>(s.correlation);
  };
  std::vector<Call> calls;
  for (std::size_t i = 0; i < t.slices.size(); ++i) {
    const Slice& s = t.slices[i];
    if (s.correlation >= 0 && t.lanes[s.lane].kind == LaneKind::cpu) calls.push_back({key_of(s), static_cast<std::uint32_t>(i)});
  }
  // A runtime call encloses the driver call with the same id: the outer one
  // (ending last) launched; it sorts first among its key.
  std::sort(calls.begin(), calls.end(), [&](const Call& x, const Call& y) {
    if (x.key != y.key) return x.key < y.key;
    return t.slices[x.slice].end > t.slices[y.slice].end;
  });
  struct Launch {
    std::int64_t delay;
    std::uint32_t gpu, call;
  };
  std::vector<Launch> launches;
  LaunchDelay ld;
  for (std::size_t i = 0; i < t.slices.size(); ++i) {
    const Slice& s = t.slices[i];
    if (s.correlation < 0 || t.lanes[s.lane].kind != LaneKind::gpu || s.start < w.start || s.start >= w.end) continue;
    ++ld.gpu_with_correlation;
    const std::uint64_t key = key_of(s);
    const auto it = std::lower_bound(calls.begin(), calls.end(), key, [](const Call& c, std::uint64_t k) { return c.key < k; });
    if (it == calls.end() || it->key != key) continue;
    launches.push_back({s.start - t.slices[it->slice].end, static_cast<std::uint32_t>(i), it->slice});
  }
  calls = {};
  ld.matched = launches.size();
  if (launches.empty()) return ld;
  std::sort(launches.begin(), launches.end(), [&](const Launch& x, const Launch& y) {
    if (x.delay != y.delay) return x.delay > y.delay;
    return t.slices[x.gpu].start < t.slices[y.gpu].start;
  });
  const std::size_t n = launches.size();
  double sum = 0;
  for (const auto& l : launches) {
    sum += static_cast<double>(l.delay);
    if (l.delay < 0) ++ld.negative;
  }
  // Sorted longest first: the k-th smallest is at n - 1 - k.
  ld.max_ns = launches.front().delay;
  ld.min_ns = launches.back().delay;
  ld.median_ns = launches[n - 1 - (n - 1) / 2].delay;
  ld.p90_ns = launches[n - ((9 * n + 9) / 10)].delay;  // nearest rank: ceil(0.9 n)
  ld.mean_ns = sum / static_cast<double>(n);
  for (std::size_t k = 0; k < std::min(n, list_limit); ++k) {
    const Slice& g = t.slices[launches[k].gpu];
    const Slice& c = t.slices[launches[k].call];
    ld.worst.push_back({t.strings[g.name], t.strings[c.name], t.lanes[g.lane].label(), t.lanes[g.lane].rank, g.correlation, c.end,
                        g.start, launches[k].delay});
  }
  return ld;
}

}  // namespace

TraceAnalysis analyze_trace(const Timeline& t, const AnalysisOptions& options) {
  TraceAnalysis a;
  a.files = t.files;
  a.warnings = t.warnings;
  a.counts = t.counts;
  a.base_micros = t.base_micros;
  a.window = resolve_window(t, options.window);
  const AnalysisWindow& w = a.window;
  const std::vector<SliceClass> classes = classify_slices(t);
  lanes_and_breakdown(t, classes, w, a);

  // HTA's communication/computation overlap, when there is communication on a GPU.
  bool gpu_comm = false;
  for (std::size_t i = 0; i < t.slices.size() && !gpu_comm; ++i) {
    gpu_comm = classes[i] == SliceClass::communication && t.lanes[t.slices[i].lane].kind == LaneKind::gpu;
  }
  if (gpu_comm) {
    a.comm_comp = compute_overlap(t, classes, SliceSelector::parse("class=communication;lane=gpu", "comm_comp"),
                                  SliceSelector::parse("class=compute;lane=gpu", "comm_comp"), w, options.list_limit);
  }
  for (const auto& [qa, qb] : options.overlaps) a.overlaps.push_back(compute_overlap(t, classes, qa, qb, w, options.list_limit));
  a.top = top_names(t, classes, w, options.top);
  a.launch_delay = launch_delay(t, w, options.list_limit);
  return a;
}

}  // namespace densefeed
