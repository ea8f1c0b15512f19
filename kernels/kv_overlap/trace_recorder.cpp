#include "trace_recorder.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

namespace densefeed::kv_overlap {
namespace {

std::int64_t ns_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count();
}

// Microseconds with three decimals from integer nanoseconds, as Kineto writes
// them: exact, and never through a double.
void append_us(std::string& out, std::int64_t ns) {
  if (ns < 0) ns = 0;  // Kineto clamps too: a negative ts breaks viewers
  fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}

}  // namespace

TraceRecorder::TraceRecorder()
    : base_(Clock::now()),
      base_unix_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count()) {}

TraceRecorder::TraceRecorder(Clock::time_point base, std::int64_t base_unix_ns)
    : base_(base), base_unix_ns_(base_unix_ns) {}

TraceLane& TraceRecorder::add_lane(std::int64_t pid, std::int64_t tid, std::string name, int sort_index,
                                   bool device) {
  TraceLane& lane = lanes_.emplace_back();
  lane.pid = pid;
  lane.tid = tid;
  lane.name = std::move(name);
  lane.sort_index = sort_index;
  lane.device = device;
  return lane;
}

void TraceRecorder::name_process(std::int64_t pid, std::string name) {
  processes_.emplace_back(pid, std::move(name));
}

void TraceRecorder::write(const std::filesystem::path& path, const nlohmann::ordered_json& metadata) const {
  std::string out = "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n";
  for (const auto& [key, value] : metadata.items()) {
    fmt::format_to(std::back_inserter(out), "  {}: {},\n", nlohmann::json(key).dump(), value.dump());
  }
  fmt::format_to(std::back_inserter(out),
                 "  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": {},\n  \"traceEvents\": [",
                 base_unix_ns_);
  bool first = true;
  auto begin_event = [&] {
    out += first ? "\n  " : ",\n  ";
    first = false;
  };
  for (const auto& [pid, name] : processes_) {
    begin_event();
    fmt::format_to(std::back_inserter(out),
                   R"({{"name": "process_name", "ph": "M", "ts": 0.000, "pid": {}, "tid": 0, "args": {{"name": {}}}}})",
                   pid, nlohmann::json(name).dump());
  }
  for (const TraceLane& lane : lanes_) {
    begin_event();
    fmt::format_to(std::back_inserter(out),
                   R"({{"name": "thread_name", "ph": "M", "ts": 0.000, "pid": {}, "tid": {}, "args": {{"name": {}}}}})",
                   lane.pid, lane.tid, nlohmann::json(lane.name).dump());
    begin_event();
    fmt::format_to(std::back_inserter(out),
                   R"({{"name": "thread_sort_index", "ph": "M", "ts": 0.000, "pid": {}, "tid": {}, "args": {{"sort_index": {}}}}})",
                   lane.pid, lane.tid, lane.sort_index);
  }
  for (const TraceLane& lane : lanes_) {
    std::vector<const TraceEvent*> events;
    events.reserve(lane.events.size());
    for (const TraceEvent& e : lane.events) events.push_back(&e);
    std::stable_sort(events.begin(), events.end(), [](const TraceEvent* a, const TraceEvent* b) {
      if (a->start != b->start) return a->start < b->start;
      return a->end > b->end;
    });
    for (const TraceEvent* e : events) {
      begin_event();
      fmt::format_to(std::back_inserter(out), R"({{"ph": "X", "cat": "{}", "name": "{}", "pid": {}, "tid": {}, "ts": )",
                     e->cat, e->name, lane.pid, lane.tid);
      append_us(out, ns_between(base_, e->start));
      out += ", \"dur\": ";
      append_us(out, ns_between(e->start, e->end));
      std::string args;
      auto arg = [&](const char* key, const std::string& value) {
        fmt::format_to(std::back_inserter(args), "{}\"{}\": {}", args.empty() ? "" : ", ", key, value);
      };
      if (lane.device) {
        arg("device", "0");
        arg("stream", std::to_string(lane.tid));
      }
      if (e->correlation >= 0) arg("correlation", std::to_string(e->correlation));
      if (e->step >= 0) arg("step", std::to_string(e->step));
      if (e->chunk >= 0) arg("chunk", std::to_string(e->chunk));
      if (e->bytes >= 0) arg("bytes", std::to_string(e->bytes));
      if (e->holds_lock >= 0) arg("holds_lock", e->holds_lock ? "true" : "false");
      if (e->scenario) arg("scenario", nlohmann::json(e->scenario).dump());
      if (e->variant) arg("variant", nlohmann::json(e->variant).dump());
      if (!args.empty()) fmt::format_to(std::back_inserter(out), ", \"args\": {{{}}}", args);
      out += "}";
      if (e->correlation >= 0) {
        // Kineto's "ac2g" flow from a runtime call to the device op it started:
        // start ("s") on the call, finish ("f", bound to the enclosing slice) on the op.
        begin_event();
        fmt::format_to(std::back_inserter(out), R"({{"ph": "{}", "id": {}, "pid": {}, "tid": {}, "ts": )",
                       lane.device ? 'f' : 's', e->correlation, lane.pid, lane.tid);
        append_us(out, ns_between(base_, e->start));
        out += lane.device ? R"(, "cat": "ac2g", "name": "ac2g", "bp": "e"})" : R"(, "cat": "ac2g", "name": "ac2g"})";
      }
    }
  }
  out += "\n  ],\n  \"traceName\": \"trace.json\"\n}\n";

  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) throw TraceWriteError(fmt::format("{}: cannot open for writing", path.string()));
  file.write(out.data(), static_cast<std::streamsize>(out.size()));
  file.close();
  if (!file) throw TraceWriteError(fmt::format("{}: write failed", path.string()));
}

}  // namespace densefeed::kv_overlap
