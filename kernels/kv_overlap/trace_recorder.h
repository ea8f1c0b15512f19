// Records what the modelled serving process does, lane by lane, and writes it
// as a Chrome Trace Event Format file the way PyTorch's profiler (Kineto,
// libkineto/src/output_json.cpp) does: the object form with "traceEvents",
// "displayTimeUnit" and "baseTimeNanoseconds"; complete ("X") events whose
// "ts" and "dur" are microseconds with three decimals (nanoseconds), "ts"
// relative to baseTimeNanoseconds (the recorder's start, as a Unix time in
// ns); "M" process_name / thread_name / thread_sort_index metadata; CPU lanes
// on (OS pid, OS tid), device lanes on (pid = device 0, tid = stream id); an
// "ac2g" flow ("s" on the runtime call, "f" on the device op) per correlation id.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace densefeed::kv_overlap {

using Clock = std::chrono::steady_clock;

// Thrown when the trace cannot be written; the message names the file.
class TraceWriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One complete ("X") event. Names and categories are string literals.
// Optional args are written only when set (>= 0).
struct TraceEvent {
  const char* name = "";
  const char* cat = "";
  Clock::time_point start;
  Clock::time_point end;
  std::int64_t step = -1;         // args.step: prefill step
  std::int64_t chunk = -1;        // args.chunk: KV chunk
  std::int64_t correlation = -1;  // args.correlation: runtime call <-> device op, as CUPTI's ids
  std::int64_t bytes = -1;        // args.bytes
  int holds_lock = -1;            // args.holds_lock: 0 or 1
  const char* scenario = nullptr; // args.scenario
  const char* variant = nullptr;  // args.variant
};

// A lane: one CPU thread or one device stream. Only one thread appends to a
// lane at a time (its own thread, or the stream's), so appending takes no lock.
struct TraceLane {
  std::int64_t pid = 0;
  std::int64_t tid = 0;
  std::string name;
  int sort_index = 0;
  bool device = false;  // device events carry args.device and args.stream
  std::vector<TraceEvent> events;

  void add(const TraceEvent& event) { events.push_back(event); }
};

class TraceRecorder {
 public:
  // The base time (ts 0) is now.
  TraceRecorder();
  // The base time is `base`, which was `base_unix_ns` ns after the Unix epoch
  // (baseTimeNanoseconds).
  TraceRecorder(Clock::time_point base, std::int64_t base_unix_ns);

  // A new lane; the reference stays valid for the recorder's life.
  TraceLane& add_lane(std::int64_t pid, std::int64_t tid, std::string name, int sort_index, bool device);

  // Names a process (an "M" process_name event).
  void name_process(std::int64_t pid, std::string name);

  // Writes the trace to `path` (replacing it): metadata events, then each
  // lane's events ordered by start (an enclosing event before the ones it
  // encloses). `metadata` is written as top-level keys before traceEvents.
  // Throws TraceWriteError naming `path` on any I/O failure.
  void write(const std::filesystem::path& path, const nlohmann::ordered_json& metadata) const;

 private:
  Clock::time_point base_;
  std::int64_t base_unix_ns_ = 0;
  std::deque<TraceLane> lanes_;
  std::vector<std::pair<std::int64_t, std::string>> processes_;
};

}  // namespace densefeed::kv_overlap
