// The plain data of an execution timeline, whatever file it came from: lanes
// (where work runs), slices (a named interval of work on one lane) and the
// warnings that count what a reader repaired. Times are int64 nanoseconds from
// the timeline's base (a whole microsecond near the first event), so that
// epoch-scale clocks keep nanosecond resolution and never pass through a double.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace densefeed {

// gpu: device activity on one stream (kernels, memcpy, memset), which runs one
//      at a time: a slice that runs past the next one is clipped.
// cpu: a host thread; slices nest (an op and the ops it calls).
// annotation: named ranges that only label work (PyTorch's user_annotation and
//      gpu_user_annotation, NVTX push/pop ranges); they nest, and "where the
//      time went" ignores them so that a step annotation does not hide idle time.
// async: async slices (Chrome 'b'/'e', NVTX start/end ranges); they may overlap.
enum class LaneKind : std::uint8_t { gpu, cpu, annotation, async };

std::string_view to_string(LaneKind kind);

// What an instant of time was spent on ("where the time went"). Precedence when
// several run at once: compute > communication > transfer > other > idle.
enum class SliceClass : std::uint8_t { compute, communication, transfer, other, idle };

std::string_view to_string(SliceClass c);

// One lane of one trace file. pid/tid are the values as written in the file
// (numbers or strings); for nsys they are the process and thread ids decoded
// from globalTid, and device/stream the CUDA device and stream ids.
struct Lane {
  LaneKind kind = LaneKind::cpu;
  int file = 0;                  // index into Timeline::files
  std::int64_t rank = 0;         // distributed rank (see Timeline's rules)
  std::string pid;
  std::string tid;
  std::optional<std::int64_t> device;  // gpu lanes
  std::optional<std::int64_t> stream;  // gpu lanes
  std::string process_name;      // from metadata events, when present
  std::string thread_name;

  // "rank 0 GPU 0 stream 7", "rank 1 pid 4242 tid 4243 (transfer)".
  std::string label() const;
};

// A named interval on one lane: [start, end) in ns from the timeline's base.
// 40 bytes: a timeline keeps one per complete event, nothing more.
struct Slice {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t correlation = -1;  // CUDA correlation id (Kineto args.correlation, nsys correlationId); -1: none
  std::uint32_t name = 0;         // index into Timeline::strings
  std::uint32_t category = 0;     // index into Timeline::strings ("" when the event had none)
  std::uint32_t lane = 0;         // index into Timeline::lanes
  std::uint32_t event = 0;        // index of the (begin) event in its file, or row for nsys: for people to find it
};
static_assert(sizeof(Slice) == 40, "a timeline holds one Slice per complete event: keep it small");

// What a reader repaired, with how often and where first (e.g. "event 12 at
// byte 345"). kind is a stable identifier (for agents), message is for people.
struct TraceWarning {
  std::string kind;
  std::string file;
  std::uint64_t count = 0;
  std::string first;
  std::string message;
};

}  // namespace densefeed
