// The analyses of a timeline: lanes (busy time, gaps), where the time went,
// overlap of one set of slices with another, the top names by exclusive time
// and the launch delay of GPU work. Results are plain, self-contained structs
// (names and lane labels as text) so that reports and the ledger need nothing
// else. All times are int64 ns from the timeline's base.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trace_selector.h"
#include "trace_timeline.h"

namespace densefeed {

// The span analysed: the whole trace (first slice start to last slice end),
// or the span of the slices with a given name (--window NAME).
struct AnalysisWindow {
  std::string name;         // empty: the whole trace
  std::int64_t start = 0;   // ns
  std::int64_t end = 0;     // ns
  std::size_t slices = 0;   // slices that define it (0 for the whole trace)
  std::int64_t length() const { return end - start; }
};

// One slice, named for people: which, where, when.
struct AttributedSlice {
  std::string name;
  std::string lane;          // Lane::label()
  std::int64_t rank = 0;
  std::string file;
  std::uint64_t event = 0;   // event index in the file (nsys: rowid)
  std::int64_t start = 0;    // ns, clipped to the window
  std::int64_t end = 0;
  std::int64_t ns = 0;       // the part that matters: exposed time (overlap), time in the selection (share)
};

struct LaneSummary {
  std::string label;
  LaneKind kind = LaneKind::cpu;
  std::int64_t rank = 0;
  std::string file;
  std::size_t slices = 0;       // in the window
  std::int64_t busy_ns = 0;     // union of its slices in the window
  double busy_fraction = 0;     // of the window
  std::size_t gaps = 0;         // holes between its first and last slice in the window
  std::int64_t gap_ns = 0;
  std::int64_t largest_gap_ns = 0;
  std::int64_t largest_gap_start = 0;
};

// Every instant of the window, on one rank, in exactly one class, by
// precedence compute > communication > transfer > other > idle, over the
// rank's GPU and CPU lanes (annotation and async lanes only label work).
// ns[c] for c = SliceClass; they sum to window_ns.
struct TimeBreakdown {
  std::int64_t rank = 0;
  std::int64_t window_ns = 0;
  std::array<std::int64_t, 5> ns{};
};

struct RankOverlap {
  std::int64_t rank = 0;
  std::size_t a_slices = 0;
  std::int64_t a_ns = 0;         // |U(A)| in the window
  std::int64_t b_ns = 0;         // |U(B)|
  std::int64_t overlap_ns = 0;   // |U(A) ∩ U(B)|
  std::int64_t exposed_ns = 0;   // |U(A) \ U(B)|
  std::optional<double> fraction;  // overlap_ns / a_ns; none when A is empty on this rank
};

// Overlap of A with B, per rank (A on one rank is only hidden by B on the same
// rank): |U(A) ∩ U(B)| / |U(A)|, the definition of Holistic Trace Analysis's
// get_comm_comp_overlap (hta/analyzers/communication_analysis.py) with
// A = communication kernels and B = computation kernels.
struct OverlapResult {
  SliceSelector a, b;
  std::size_t a_slices = 0, b_slices = 0;
  std::int64_t a_ns = 0, b_ns = 0, overlap_ns = 0, exposed_ns = 0;  // sums over ranks
  std::optional<double> fraction;          // overlap_ns / a_ns; none when A matched nothing
  std::vector<RankOverlap> ranks;          // ranks where A or B matched
  std::vector<AttributedSlice> exposed;    // A's slices not fully hidden, most exposed first (at most the list limit)
  std::size_t exposed_count = 0;           // all of them
  // For a picture of the check (the report's lane timeline): only when a
  // list rank is given, that rank's A and B slices clipped to the window, in
  // time order (ns: the slice's exposed time for A, 0 for B), and the
  // segments where U(A) and U(B) intersect; the first kInvolvedLimit of each.
  static constexpr std::size_t kInvolvedLimit = 256;
  std::vector<AttributedSlice> involved_a, involved_b;
  std::vector<std::pair<std::int64_t, std::int64_t>> overlaps;  // (start, end) ns
  std::size_t involved_total = 0, overlaps_total = 0;
  std::vector<std::string> notes;          // "A matched no slice in the window", ...
};

struct NameTime {
  std::string name;
  LaneKind kind = LaneKind::cpu;
  SliceClass slice_class = SliceClass::other;
  std::size_t count = 0;
  std::int64_t inclusive_ns = 0;   // sum of durations in the window
  std::int64_t exclusive_ns = 0;   // minus the time of slices nested in them on the same lane
};

struct LaunchSample {
  std::string kernel, runtime, lane;
  std::int64_t rank = 0;
  std::int64_t correlation = 0;
  std::int64_t runtime_end = 0, kernel_start = 0, delay_ns = 0;
};

// GPU slice start minus the end of the CPU call that launched it, matched by
// correlation id within a file (Kineto args.correlation, nsys correlationId).
struct LaunchDelay {
  std::size_t gpu_with_correlation = 0;  // GPU slices starting in the window that carry a correlation id
  std::size_t matched = 0;
  std::size_t negative = 0;              // GPU start before the call ended (clock skew or an async API)
  std::int64_t min_ns = 0, median_ns = 0, p90_ns = 0, max_ns = 0;
  double mean_ns = 0;
  std::vector<LaunchSample> worst;       // longest delays first
};

struct AnalysisOptions {
  std::optional<std::string> window;                            // slice name (exact, else a regex)
  std::vector<std::pair<SliceSelector, SliceSelector>> overlaps;  // (A, B) queries
  std::size_t top = 10;          // names per lane kind
  std::size_t list_limit = 10;   // exposed slices, worst launches
};

struct TraceAnalysis {
  std::vector<TraceFileInfo> files;
  std::vector<TraceWarning> warnings;
  TimelineCounts counts;
  std::int64_t base_micros = 0;
  AnalysisWindow window;
  std::vector<LaneSummary> lanes;
  std::vector<TimeBreakdown> breakdown;            // one per rank
  std::optional<OverlapResult> comm_comp;          // class=communication;lane=gpu with class=compute;lane=gpu, when any
  std::vector<OverlapResult> overlaps;             // the queries asked for
  std::vector<NameTime> top;                       // per lane kind, by exclusive time
  LaunchDelay launch_delay;
};

// The window for a slice name: the span from the first start to the last end
// of the slices named exactly `name` (else whose name matches it as a regex).
// Throws InputError("--window") naming similar names when none matches.
AnalysisWindow resolve_window(const Timeline& timeline, const std::optional<std::string>& name);

// Overlap of A with B in `window`. A matching nothing is not 0 %: fraction is
// empty and a note says so. Lists the `list_limit` most exposed slices of A
// (of rank `list_rank` only, when given; exposed_count counts the same set).
OverlapResult compute_overlap(const Timeline& timeline, const std::vector<SliceClass>& classes, const SliceSelector& a,
                              const SliceSelector& b, const AnalysisWindow& window, std::size_t list_limit,
                              std::optional<std::int64_t> list_rank = std::nullopt);

// Share of the window covered by the union of the selected slices, per rank.
struct ShareResult {
  std::vector<std::pair<std::int64_t, std::int64_t>> ranks;  // (rank, covered ns)
  std::size_t slices = 0;
  std::vector<AttributedSlice> largest;  // the selection's longest slices in the window (of list_rank, when given)
  std::size_t total = 0;                 // slices that list could hold
};
ShareResult compute_share(const Timeline& timeline, const std::vector<SliceClass>& classes, const SliceSelector& selection,
                          const AnalysisWindow& window, std::size_t list_limit, std::optional<std::int64_t> list_rank = std::nullopt);

// Every analysis above. Throws InputError for an unknown window.
TraceAnalysis analyze_trace(const Timeline& timeline, const AnalysisOptions& options);

}  // namespace densefeed
