#include "trace_timeline.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <tuple>

#include <fmt/format.h>

namespace densefeed {

std::string_view to_string(LaneKind kind) {
  switch (kind) {
    case LaneKind::gpu: return "gpu";
    case LaneKind::cpu: return "cpu";
    case LaneKind::annotation: return "annotation";
    case LaneKind::async: return "async";
  }
  return "cpu";
}

std::string_view to_string(SliceClass c) {
  switch (c) {
    case SliceClass::compute: return "compute";
    case SliceClass::communication: return "communication";
    case SliceClass::transfer: return "transfer";
    case SliceClass::other: return "other";
    case SliceClass::idle: return "idle";
  }
  return "other";
}

std::string Lane::label() const {
  std::string s = fmt::format("rank {} ", rank);
  if (kind == LaneKind::gpu) {
    s += fmt::format("GPU {} stream {}", device ? std::to_string(*device) : pid, stream ? std::to_string(*stream) : tid);
  } else {
    s += fmt::format("pid {} tid {}", pid, tid);
    if (kind == LaneKind::annotation) s += " annotations";
    if (kind == LaneKind::async) s += " async";
  }
  if (!thread_name.empty()) s += fmt::format(" ({})", thread_name);
  else if (!process_name.empty() && kind != LaneKind::gpu) s += fmt::format(" ({})", process_name);
  return s;
}

StringTable::StringTable() { intern(""); }
StringTable::StringTable(StringTable&&) noexcept = default;
StringTable& StringTable::operator=(StringTable&&) noexcept = default;

std::uint32_t StringTable::intern(std::string_view text) {
  if (const auto it = ids_.find(text); it != ids_.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(strings_.size());
  strings_.emplace_back(text);
  ids_.emplace(strings_.back(), id);
  return id;
}

std::optional<std::uint32_t> StringTable::find(std::string_view text) const {
  if (const auto it = ids_.find(text); it != ids_.end()) return it->second;
  return std::nullopt;
}

std::uint64_t Timeline::warning_count(std::string_view kind) const {
  std::uint64_t n = 0;
  for (const auto& w : warnings) {
    if (w.kind == kind) n += w.count;
  }
  return n;
}

std::optional<std::int64_t> rank_in_name(std::string_view text) {
  for (std::size_t i = 0; i + 4 <= text.size(); ++i) {
    bool match = true;
    for (std::size_t k = 0; k < 4; ++k) match = match && std::tolower(static_cast<unsigned char>(text[i + k])) == "rank"[k];
    if (!match) continue;
    if (i > 0 && std::isalpha(static_cast<unsigned char>(text[i - 1]))) continue;  // "frank"
    std::size_t j = i + 4;
    while (j < text.size() && (text[j] == ' ' || text[j] == ':' || text[j] == '=' || text[j] == '#' || text[j] == '_')) ++j;
    std::int64_t value = 0;
    std::size_t digits = 0;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j])) && digits < 9) {
      value = value * 10 + (text[j] - '0');
      ++j;
      ++digits;
    }
    if (digits > 0) return value;
  }
  return std::nullopt;
}

namespace {

constexpr std::size_t repair_kinds = static_cast<std::size_t>(Repair::count_);

std::string_view repair_id(Repair r) {
  switch (r) {
    case Repair::missing_closing_bracket: return "missing_closing_bracket";
    case Repair::extra_comma: return "extra_comma";
    case Repair::missing_comma: return "missing_comma";
    case Repair::empty_event: return "empty_event";
    case Repair::control_characters: return "control_characters";
    case Repair::no_phase: return "no_phase";
    case Repair::missing_timestamp: return "missing_timestamp";
    case Repair::missing_duration: return "missing_duration";
    case Repair::negative_duration: return "negative_duration";
    case Repair::end_without_begin: return "end_without_begin";
    case Repair::mismatched_end_name: return "mismatched_end_name";
    case Repair::begin_without_end: return "begin_without_end";
    case Repair::async_end_without_begin: return "async_end_without_begin";
    case Repair::async_begin_without_end: return "async_begin_without_end";
    case Repair::overlapping_on_stream: return "overlapping_on_stream";
    case Repair::improper_nesting: return "improper_nesting";
    case Repair::zero_timestamp: return "zero_timestamp";
    case Repair::out_of_order: return "out_of_order";
    case Repair::duplicate_rank: return "duplicate_rank";
    case Repair::unknown_display_time_unit: return "unknown_display_time_unit";
    case Repair::missing_column: return "missing_column";
    case Repair::count_: break;
  }
  return "unknown";
}

std::string repair_message(Repair r, std::uint64_t n, std::int64_t amount_ns) {
  switch (r) {
    case Repair::missing_closing_bracket:
      return "the event array has no closing ']' (the format allows it); read to the end of the file";
    case Repair::extra_comma: return fmt::format("{} extra comma(s) (leading, trailing or doubled) ignored", n);
    case Repair::missing_comma: return fmt::format("{} missing comma(s) between events tolerated", n);
    case Repair::empty_event: return fmt::format("{} empty event(s) {{}} skipped", n);
    case Repair::control_characters:
      return fmt::format("{} raw control character(s) inside strings accepted as they are", n);
    case Repair::no_phase: return fmt::format("{} event(s) without 'ph' skipped", n);
    case Repair::missing_timestamp: return fmt::format("{} event(s) without 'ts' skipped", n);
    case Repair::missing_duration: return fmt::format("{} complete event(s) ('X') without 'dur' skipped", n);
    case Repair::negative_duration: return fmt::format("{} event(s) with a negative duration skipped", n);
    case Repair::end_without_begin: return fmt::format("{} 'E' event(s) without an open 'B' on their thread skipped", n);
    case Repair::mismatched_end_name:
      return fmt::format("{} 'E' event(s) named differently from the 'B' they close (closed the innermost 'B' anyway)", n);
    case Repair::begin_without_end: return fmt::format("{} 'B' event(s) never closed skipped", n);
    case Repair::async_end_without_begin: return fmt::format("{} async end event(s) without a begin skipped", n);
    case Repair::async_begin_without_end: return fmt::format("{} async begin event(s) never ended skipped", n);
    case Repair::overlapping_on_stream:
      return fmt::format("{} slice(s) on a GPU stream ran past the start of the next one; clipped there ({} ns removed)", n,
                         amount_ns);
    case Repair::improper_nesting:
      return fmt::format("{} slice(s) ran past the end of the slice they start in on the same thread; clipped to it ({} ns removed)",
                         n, amount_ns);
    case Repair::zero_timestamp:
      return fmt::format("{} slice(s) with ts 0 in a file whose clock starts far from 0 (0 means 'unknown') skipped", n);
    case Repair::out_of_order:
      return fmt::format("{} event(s) earlier than the one before them on the same lane; sorted by time", n);
    case Repair::duplicate_rank: return "another file has the same rank; their lanes share the rank";
    case Repair::unknown_display_time_unit: return "displayTimeUnit is neither 'ms' nor 'ns'; ignored (it never scales ts)";
    case Repair::missing_column: return fmt::format("{} expected column(s) absent; defaults used", n);
    case Repair::count_: break;
  }
  return "";
}

// Epoch or uptime clocks (nsys and Kineto both use one) start far beyond
// this; a file whose other slices start here or later treats ts 0 as unknown.
constexpr std::int64_t far_clock_ns = 1'000'000'000'000;  // 1e9 us, ~17 minutes

}  // namespace

TimelineBuilder::TimelineBuilder() = default;

int TimelineBuilder::add_file(TraceFileInfo info) {
  files_.push_back(std::move(info));
  repairs_.emplace_back(repair_kinds);
  return static_cast<int>(files_.size()) - 1;
}

std::int64_t TimelineBuilder::base_micros(std::int64_t first_seen_micros) {
  if (!base_micros_) base_micros_ = first_seen_micros;
  return *base_micros_;
}

std::uint32_t TimelineBuilder::lane(int file, LaneKind kind, std::string_view pid, std::string_view tid) {
  lane_key_.clear();
  lane_key_.append(reinterpret_cast<const char*>(&file), sizeof file);
  lane_key_.push_back(static_cast<char>(kind));
  lane_key_.append(pid);
  lane_key_.push_back('\0');
  lane_key_.append(tid);
  if (const auto it = lane_ids_.find(lane_key_); it != lane_ids_.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(lanes_.size());
  Lane l;
  l.kind = kind;
  l.file = file;
  l.pid = std::string(pid);
  l.tid = std::string(tid);
  lanes_.push_back(std::move(l));
  lane_last_start_.push_back(INT64_MIN);
  lane_out_of_order_.push_back(0);
  lane_first_out_of_order_event_.push_back(0);
  lane_ids_.emplace(lane_key_, id);
  return id;
}

void TimelineBuilder::add_slice(const Slice& slice, bool zero_timestamp) {
  if (slice.start < lane_last_start_[slice.lane]) {
    if (lane_out_of_order_[slice.lane]++ == 0) lane_first_out_of_order_event_[slice.lane] = slice.event;
  } else {
    lane_last_start_[slice.lane] = slice.start;
  }
  if (zero_timestamp) zero_ts_slices_.push_back(static_cast<std::uint32_t>(slices_.size()));
  slices_.push_back(slice);
}

void TimelineBuilder::add_begin(std::uint32_t lane, std::uint32_t thread, std::int64_t ts, std::uint32_t name,
                                std::uint32_t category, std::uint32_t event, std::uint64_t offset, std::int64_t correlation,
                                bool zero_timestamp) {
  begin_end_.push_back({ts, correlation, offset, lane, name, category, event, thread, true, zero_timestamp});
}

void TimelineBuilder::add_end(std::uint32_t thread, std::int64_t ts, std::uint32_t name, std::uint32_t event,
                              std::uint64_t offset) {
  begin_end_.push_back({ts, -1, offset, thread, name, 0, event, thread, false, false});
}

void TimelineBuilder::add_async(bool begin, std::uint32_t lane, std::string_view key, std::int64_t ts, std::uint32_t name,
                                std::uint32_t category, std::uint32_t event, std::uint64_t offset) {
  async_.push_back({ts, -1, offset, lane, name, category, event, async_keys_.intern(key), begin, false});
}

void TimelineBuilder::set_process_name(int file, std::string_view pid, std::string_view name) {
  processes_[{file, std::string(pid)}].name = std::string(name);
}

void TimelineBuilder::set_process_labels(int file, std::string_view pid, std::string_view labels) {
  processes_[{file, std::string(pid)}].labels = std::string(labels);
}

void TimelineBuilder::set_thread_name(int file, std::string_view pid, std::string_view tid, std::string_view name) {
  threads_[{file, std::string(pid), std::string(tid)}] = std::string(name);
}

void TimelineBuilder::repair(int file, Repair kind, std::uint64_t event, std::optional<std::uint64_t> offset,
                             std::uint64_t count, std::int64_t amount_ns) {
  auto& r = repairs_[static_cast<std::size_t>(file)][static_cast<std::size_t>(kind)];
  if (r.count == 0) {
    if (files_[static_cast<std::size_t>(file)].format == "nsys-sqlite") r.first = fmt::format("row {}", event);
    else if (offset) r.first = fmt::format("event {} at byte {}", event, *offset);
    else r.first = fmt::format("event {}", event);
  }
  r.count += count;
  r.amount_ns += amount_ns;
}

void TimelineBuilder::repair_note(int file, Repair kind, const std::string& where) {
  auto& r = repairs_[static_cast<std::size_t>(file)][static_cast<std::size_t>(kind)];
  if (r.count == 0) r.first = where;
  ++r.count;
}

// B/E: pair per lane in time order (a file may write them out of order);
// the file's order breaks ties.
void TimelineBuilder::pair_begin_end() {
  std::stable_sort(begin_end_.begin(), begin_end_.end(), [](const Pending& a, const Pending& b) {
    return std::tie(a.key, a.ts) < std::tie(b.key, b.ts);
  });
  std::vector<const Pending*> stack;
  for (std::size_t i = 0; i < begin_end_.size();) {
    const std::uint32_t thread = begin_end_[i].key;
    const int file = lanes_[thread].file;
    stack.clear();
    for (; i < begin_end_.size() && begin_end_[i].key == thread; ++i) {
      const Pending& p = begin_end_[i];
      if (p.begin) {
        stack.push_back(&p);
        continue;
      }
      if (stack.empty()) {
        repair(file, Repair::end_without_begin, p.event, p.offset);
        continue;
      }
      const Pending& b = *stack.back();
      stack.pop_back();
      if (p.name != 0 && p.name != b.name) repair(file, Repair::mismatched_end_name, p.event, p.offset);
      if (b.zero_ts) zero_ts_slices_.push_back(static_cast<std::uint32_t>(slices_.size()));
      slices_.push_back({b.ts, p.ts, b.correlation, b.name, b.category, b.lane, b.event});
    }
    for (const Pending* b : stack) repair(file, Repair::begin_without_end, b->event, b->offset);
  }
  begin_end_.clear();
  begin_end_.shrink_to_fit();
}

// Async: pair by key in time order, innermost first.
void TimelineBuilder::pair_async() {
  std::stable_sort(async_.begin(), async_.end(), [](const Pending& a, const Pending& b) { return a.ts < b.ts; });
  std::unordered_map<std::uint32_t, std::vector<const Pending*>> open;
  for (const Pending& p : async_) {
    auto& st = open[p.key];
    if (p.begin) {
      st.push_back(&p);
      continue;
    }
    if (st.empty()) {
      repair(lanes_[p.lane].file, Repair::async_end_without_begin, p.event, p.offset);
      continue;
    }
    const Pending& b = *st.back();
    st.pop_back();
    slices_.push_back({b.ts, p.ts, -1, b.name, b.category, b.lane, b.event});
  }
  for (const auto& [key, st] : open) {
    for (const Pending* b : st) repair(lanes_[b->lane].file, Repair::async_begin_without_end, b->event, b->offset);
  }
  async_.clear();
  async_.shrink_to_fit();
}

void TimelineBuilder::note_out_of_order() {
  for (std::uint32_t l = 0; l < lanes_.size(); ++l) {
    if (lane_out_of_order_[l] > 0) {
      repair(lanes_[l].file, Repair::out_of_order, lane_first_out_of_order_event_[l], std::nullopt, lane_out_of_order_[l]);
    }
  }
}

// ts 0 on a far clock means "unknown": drop those slices.
void TimelineBuilder::drop_unknown_zero_timestamps() {
  if (zero_ts_slices_.empty()) return;
  const std::int64_t base_ns = base_micros_.value_or(0) * 1000;
  std::vector<std::int64_t> file_min(files_.size(), INT64_MAX);
  std::vector<bool> is_zero(slices_.size(), false);
  for (auto i : zero_ts_slices_) is_zero[i] = true;
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    if (is_zero[i]) continue;
    auto& m = file_min[static_cast<std::size_t>(lanes_[slices_[i].lane].file)];
    m = std::min(m, slices_[i].start);
  }
  std::vector<bool> drop(slices_.size(), false);
  for (auto i : zero_ts_slices_) {
    const int file = lanes_[slices_[i].lane].file;
    const std::int64_t other = file_min[static_cast<std::size_t>(file)];
    if (other != INT64_MAX && other + base_ns >= far_clock_ns) {
      drop[i] = true;
      repair(file, Repair::zero_timestamp, slices_[i].event, std::nullopt);
    }
  }
  std::size_t w = 0;
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    if (!drop[i]) slices_[w++] = slices_[i];
  }
  slices_.resize(w);
}

// Ranks: distributedInfo (or the file's position), unless a process says
// which rank it is ("rank 3" in its name or labels).
void TimelineBuilder::name_lanes() {
  for (auto& l : lanes_) {
    l.rank = files_[static_cast<std::size_t>(l.file)].rank;
    if (const auto p = processes_.find({l.file, l.pid}); p != processes_.end()) {
      l.process_name = p->second.name;
      if (auto r = rank_in_name(p->second.labels)) l.rank = *r;
      else if (auto r2 = rank_in_name(p->second.name)) l.rank = *r2;
    }
    if (const auto t = threads_.find({l.file, l.pid, l.tid}); t != threads_.end()) l.thread_name = t->second;
  }
}

// Lanes in a stable, readable order, those without slices left out;
// slices follow their lanes.
void TimelineBuilder::order_lanes(Timeline& t) {
  // Lanes in a stable, readable order, those without slices left out;
  // slices follow their lanes.
  std::vector<std::size_t> lane_size(lanes_.size(), 0);
  for (const auto& s : slices_) ++lane_size[s.lane];
  std::vector<std::uint32_t> order;
  for (std::uint32_t l = 0; l < lanes_.size(); ++l) {
    if (lane_size[l] > 0) order.push_back(l);
  }
  const auto key = [&](std::uint32_t i) {
    const Lane& l = lanes_[i];
    return std::make_tuple(l.rank, static_cast<int>(l.kind), l.file, l.device.value_or(INT64_MAX), l.stream.value_or(INT64_MAX),
                           l.pid, l.tid);
  };
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return key(a) < key(b); });
  std::vector<std::uint32_t> new_id(lanes_.size(), UINT32_MAX);
  t.lanes.reserve(lanes_.size());
  for (std::uint32_t k = 0; k < order.size(); ++k) {
    new_id[order[k]] = k;
    t.lanes.push_back(std::move(lanes_[order[k]]));
  }
  for (auto& s : slices_) s.lane = new_id[s.lane];
  std::sort(slices_.begin(), slices_.end(), [](const Slice& a, const Slice& b) {
    if (a.lane != b.lane) return a.lane < b.lane;
    if (a.start != b.start) return a.start < b.start;
    return a.end > b.end;
  });

  t.lane_offsets.assign(t.lanes.size() + 1, 0);
  for (const auto& s : slices_) ++t.lane_offsets[s.lane + 1];
  for (std::size_t l = 0; l < t.lanes.size(); ++l) t.lane_offsets[l + 1] += t.lane_offsets[l];
}

// A GPU stream runs one thing at a time; a host thread's slices nest.
void TimelineBuilder::clip_overlaps(Timeline& t) {
  std::vector<std::size_t> open_slices;
  for (std::uint32_t l = 0; l < t.lanes.size(); ++l) {
    const int file = t.lanes[l].file;
    const std::size_t b = t.lane_offsets[l], e = t.lane_offsets[l + 1];
    if (t.lanes[l].kind == LaneKind::gpu) {
      for (std::size_t i = b; i + 1 < e; ++i) {
        if (slices_[i].end > slices_[i + 1].start) {
          repair(file, Repair::overlapping_on_stream, slices_[i].event, std::nullopt, 1, slices_[i].end - slices_[i + 1].start);
          slices_[i].end = slices_[i + 1].start;
        }
      }
    } else if (t.lanes[l].kind != LaneKind::async) {
      open_slices.clear();
      for (std::size_t i = b; i < e; ++i) {
        while (!open_slices.empty() && slices_[open_slices.back()].end <= slices_[i].start) open_slices.pop_back();
        if (!open_slices.empty() && slices_[i].end > slices_[open_slices.back()].end) {
          const std::int64_t parent_end = slices_[open_slices.back()].end;
          repair(file, Repair::improper_nesting, slices_[i].event, std::nullopt, 1, slices_[i].end - parent_end);
          slices_[i].end = parent_end;
        }
        open_slices.push_back(i);
      }
    }
  }
}

void TimelineBuilder::rebase(Timeline& t) {
  t.begin = INT64_MAX;
  t.end = INT64_MIN;
  for (const auto& s : slices_) {
    t.begin = std::min(t.begin, s.start);
    t.end = std::max(t.end, s.end);
  }
  if (slices_.empty()) t.begin = t.end = 0;
  // Re-base on the first slice's whole microsecond, so that reported times
  // start near 0 whatever event a reader saw first.
  const std::int64_t shift_us = t.begin >= 0 ? t.begin / 1000 : -((-t.begin + 999) / 1000);
  if (shift_us != 0) {
    for (auto& s : slices_) {
      s.start -= shift_us * 1000;
      s.end -= shift_us * 1000;
    }
    t.begin -= shift_us * 1000;
    t.end -= shift_us * 1000;
    base_micros_ = base_micros_.value_or(0) + shift_us;
  }
}

void TimelineBuilder::collect_warnings(Timeline& t) {
  for (std::size_t f = 0; f < files_.size(); ++f) {
    for (std::size_t k = 0; k < repair_kinds; ++k) {
      const auto& r = repairs_[f][k];
      if (r.count == 0) continue;
      const auto kind = static_cast<Repair>(k);
      t.warnings.push_back(
          {std::string(repair_id(kind)), files_[f].path, r.count, r.first, repair_message(kind, r.count, r.amount_ns)});
    }
  }
}

Timeline TimelineBuilder::finish() {
  pair_begin_end();
  pair_async();
  note_out_of_order();
  drop_unknown_zero_timestamps();
  name_lanes();
  Timeline t;
  order_lanes(t);
  clip_overlaps(t);
  rebase(t);
  counts_.slices = slices_.size();
  t.slices = std::move(slices_);
  t.strings = std::move(strings_);
  t.counts = counts_;
  t.base_micros = base_micros_.value_or(0);
  collect_warnings(t);
  t.files = std::move(files_);
  return t;
}

}  // namespace densefeed
