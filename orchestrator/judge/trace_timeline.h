// A timeline: every lane and slice of one or more trace files (one per rank,
// as PyTorch's profiler writes them), on one clock, with the warnings that
// count what the readers repaired. Readers feed a TimelineBuilder event by
// event; finish() pairs begin/end events, clips slices that break their lane's
// rules and sorts, so that the analyses get clean, sorted lanes.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "trace_event.h"

namespace densefeed {

// Interned strings (slice names, categories): each distinct text stored once.
// Id 0 is "".
class StringTable {
 public:
  StringTable();
  StringTable(StringTable&&) noexcept;
  StringTable& operator=(StringTable&&) noexcept;
  std::uint32_t intern(std::string_view text);
  std::optional<std::uint32_t> find(std::string_view text) const;
  const std::string& operator[](std::uint32_t id) const { return strings_[id]; }
  std::size_t size() const { return strings_.size(); }

 private:
  std::deque<std::string> strings_;  // stable addresses for the map's keys
  std::unordered_map<std::string_view, std::uint32_t> ids_;
};

struct TraceFileInfo {
  std::string path;
  std::string format;              // "chrome-json" | "chrome-json-gzip" | "nsys-sqlite"
  std::int64_t rank = 0;
  std::string rank_source;         // "distributedInfo.rank" | "file order" | "default (single file)"
  std::uint64_t bytes = 0;         // bytes parsed (uncompressed JSON), or the SQLite file's size
  std::uint64_t events = 0;        // JSON array elements, or SQLite rows read
  std::string display_time_unit;   // as written (it never scales ts)
};

struct TimelineCounts {
  std::uint64_t events = 0;     // every event or row read
  std::uint64_t slices = 0;     // kept slices
  std::uint64_t instants = 0;   // i, I, R, n events and NVTX marks
  std::uint64_t counters = 0;   // C events
  std::uint64_t flows = 0;      // s, t, f events
  std::uint64_t metadata = 0;   // M events
  std::uint64_t ignored = 0;    // phases the analyses do not use (P, O, N, D, ...)
};

struct Timeline {
  std::vector<TraceFileInfo> files;
  std::vector<Lane> lanes;           // ordered by rank, kind, device, stream, pid, tid
  std::vector<Slice> slices;         // grouped by lane; within a lane by start (longer first on ties)
  std::vector<std::size_t> lane_offsets;  // lane l: slices [lane_offsets[l], lane_offsets[l + 1])
  StringTable strings;
  std::vector<TraceWarning> warnings;
  TimelineCounts counts;
  std::int64_t base_micros = 0;      // what time 0 is, in the files' own clock (whole us)
  std::int64_t begin = 0;            // first slice start, ns
  std::int64_t end = 0;              // last slice end, ns

  std::span<const Slice> lane_slices(std::uint32_t lane) const {
    return {slices.data() + lane_offsets[lane], lane_offsets[lane + 1] - lane_offsets[lane]};
  }
  std::uint64_t warning_count(std::string_view kind) const;
};

// The repairs a reader or the builder makes; each becomes one TraceWarning per
// file with its count (see warning_text in the .cpp for the messages).
enum class Repair : std::uint8_t {
  missing_closing_bracket,
  extra_comma,
  missing_comma,
  empty_event,
  control_characters,
  no_phase,
  missing_timestamp,
  missing_duration,
  negative_duration,
  end_without_begin,
  mismatched_end_name,
  begin_without_end,
  async_end_without_begin,
  async_begin_without_end,
  overlapping_on_stream,
  improper_nesting,
  zero_timestamp,
  out_of_order,
  duplicate_rank,
  unknown_display_time_unit,
  missing_column,
  count_  // number of kinds
};

class TimelineBuilder {
 public:
  TimelineBuilder();

  int add_file(TraceFileInfo info);
  TraceFileInfo& file(int index) { return files_[static_cast<std::size_t>(index)]; }
  int file_count() const { return static_cast<int>(files_.size()); }

  // The timeline's base in whole microseconds: the first caller's value
  // (a reader passes the integer part of the first time it sees).
  std::int64_t base_micros(std::int64_t first_seen_micros);

  std::uint32_t intern(std::string_view text) { return strings_.intern(text); }
  const std::string& text(std::uint32_t id) const { return strings_[id]; }

  // The lane of (file, kind, pid, tid), created on first use.
  std::uint32_t lane(int file, LaneKind kind, std::string_view pid, std::string_view tid);
  Lane& lane_info(std::uint32_t lane) { return lanes_[lane]; }

  // Times in ns from the base. zero_timestamp: the file wrote ts 0, which a
  // file on an epoch or uptime clock uses for "unknown" (dropped at finish).
  void add_slice(const Slice& slice, bool zero_timestamp = false);
  // B/E pair per thread: `thread` is the thread's cpu lane, `lane` where the
  // slice goes (an annotation lane of that thread, say).
  void add_begin(std::uint32_t lane, std::uint32_t thread, std::int64_t ts, std::uint32_t name, std::uint32_t category, std::uint32_t event,
                 std::uint64_t offset, std::int64_t correlation, bool zero_timestamp);
  void add_end(std::uint32_t thread, std::int64_t ts, std::uint32_t name, std::uint32_t event, std::uint64_t offset);
  // Async slices pair by `key` (file, category and id as the reader builds it).
  void add_async(bool begin, std::uint32_t lane, std::string_view key, std::int64_t ts, std::uint32_t name,
                 std::uint32_t category, std::uint32_t event, std::uint64_t offset);

  void set_process_name(int file, std::string_view pid, std::string_view name);
  void set_process_labels(int file, std::string_view pid, std::string_view labels);
  void set_thread_name(int file, std::string_view pid, std::string_view tid, std::string_view name);

  // Counts one repair; `where` ("event 12 at byte 345") is kept for the first.
  // amount_ns adds to the repair's total (e.g. time clipped).
  // offset: byte offset of the event (none for repairs found after reading).
  void repair(int file, Repair kind, std::uint64_t event, std::optional<std::uint64_t> offset, std::uint64_t count = 1,
              std::int64_t amount_ns = 0);
  // A repair whose location is not an event (a missing column, a duplicate rank).
  void repair_note(int file, Repair kind, const std::string& where);

  TimelineCounts& counts() { return counts_; }

  // Pairs B/E and async events, drops zero timestamps on epoch clocks, sorts,
  // clips, resolves ranks and lane names, and re-bases times on the first
  // slice's whole microsecond. The builder is empty afterwards.
  Timeline finish();

 private:
  // finish()'s steps, in order.
  void pair_begin_end();
  void pair_async();
  void note_out_of_order();
  void drop_unknown_zero_timestamps();
  void name_lanes();
  void order_lanes(Timeline& t);
  void clip_overlaps(Timeline& t);
  void rebase(Timeline& t);
  void collect_warnings(Timeline& t);

  struct Pending {
    std::int64_t ts;
    std::int64_t correlation;
    std::uint64_t offset;
    std::uint32_t lane, name, category, event;
    std::uint32_t key;  // async: interned key; B/E: the thread's cpu lane
    bool begin;
    bool zero_ts;
  };
  struct RepairCount {
    std::uint64_t count = 0;
    std::int64_t amount_ns = 0;
    std::string first;
  };
  struct ProcessInfo {
    std::string name, labels;
  };

  std::vector<TraceFileInfo> files_;
  std::vector<Lane> lanes_;
  std::vector<std::int64_t> lane_last_start_;
  std::vector<std::uint64_t> lane_out_of_order_;
  std::vector<std::uint64_t> lane_first_out_of_order_event_;
  std::unordered_map<std::string, std::uint32_t> lane_ids_;
  std::string lane_key_;
  std::vector<Slice> slices_;
  std::vector<std::uint32_t> zero_ts_slices_;
  std::vector<Pending> begin_end_;
  std::vector<Pending> async_;
  StringTable strings_;
  StringTable async_keys_;
  std::map<std::pair<int, std::string>, ProcessInfo> processes_;
  std::map<std::tuple<int, std::string, std::string>, std::string> threads_;
  std::vector<std::vector<RepairCount>> repairs_;  // [file][kind]
  TimelineCounts counts_;
  std::optional<std::int64_t> base_micros_;
};

// The distributed rank a process name or label states ("rank 3", "Rank: 3",
// "rank=3", "[rank3]"), if any.
std::optional<std::int64_t> rank_in_name(std::string_view text);

}  // namespace densefeed
