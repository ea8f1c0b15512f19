// The modelled serving process of the KV-transfer case (DESIGN.md, second
// worked case; issue 5): a prefill loop on the main thread and a KV transfer
// on its own thread, sharing one interpreter-style lock.
//
// Main thread: holds the lock for the whole loop, as an interpreter's main
// thread does while it runs Python. Each step does `host_time` of work under
// the lock, then dispatch: launch the step's kernel on the compute stream and
// spin on the stream's completion counter until it finishes.
//   hold:    the lock stays held while dispatch spins (the bug);
//   release: dispatch releases the lock before spinning and takes it back after
//            (the fix: what a dispatcher does around a blocking wait).
// Between steps the main thread honours a waiting thread's request once it
// has held the lock through `switch_steps` whole steps, as CPython's GIL hands
// itself over after the switch interval (sys.getswitchinterval(), 5 ms): the
// waiting thread gets one turn (one chunk's submission), then the main thread;
// counting in steps instead of milliseconds keeps the hand-offs independent of
// the machine's load. A release-variant step releases the lock, so it never
// counts as held through.
//
// Transfer thread (scenario prefill_kv): the KV cache of an earlier request,
// `chunks` chunks of `chunk_elems` float32, all ready at the start (the
// prefill instance sends it to a decode instance while it prefills the next
// request). Per chunk: wait until fewer than `window` chunks are in flight on
// the copy stream, take the lock, submit (`submit_time` of CPU work, then the
// asynchronous copy), release the lock. The copy itself runs without the
// lock on the copy stream, `chunk_time` per chunk, one after another.
//
// Before the loop starts, the transfer thread is already queued on the lock,
// so the first submission is deterministic: inside the first dispatch wait
// (release), or at the first switch hand-off (hold).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "trace_recorder.h"

namespace densefeed::kv_overlap {

enum class Variant { hold, release };
enum class Scenario { prefill, prefill_kv };

std::string_view to_string(Variant v);
std::string_view to_string(Scenario s);
std::optional<Variant> parse_variant(std::string_view text);
std::optional<Scenario> parse_scenario(std::string_view text);

struct ModelConfig {
  Variant variant = Variant::hold;
  std::size_t steps = 20;                       // prefill steps (kernels)
  std::chrono::microseconds step_time{1000};    // kernel time per step on the compute stream
  std::chrono::microseconds host_time{50};      // host work per step under the lock, before dispatch
  std::size_t switch_steps = 5;                 // >= 1: whole steps held before a waiter gets the lock
  std::size_t chunks = 16;                      // KV chunks
  std::size_t chunk_elems = 4096;               // float32 elements per chunk
  std::chrono::microseconds chunk_time{400};    // copy time per chunk on the copy stream
  std::chrono::microseconds submit_time{150};   // CPU time of one submission, under the lock
  std::size_t window = 2;                       // >= 1: chunks in flight on the copy stream at most
};

// Where a run records its trace: lanes that outlive the run. All optional
// (nullptr: that lane is not recorded); `recorder` gives the transfer
// thread's lane, made per run since each run has its own thread.
struct TraceTargets {
  TraceRecorder* recorder = nullptr;
  TraceLane* main = nullptr;
  TraceLane* compute = nullptr;
  TraceLane* copy = nullptr;
  std::int64_t pid = 0;  // the process's lanes' pid
};

struct ScenarioTimes {
  double prefill_ms = 0;  // the prefill loop: first step's start to the last dispatch's end
  double total_ms = 0;    // to the later of the loop's end and the last chunk's arrival (prefill_kv)
};

// Runs one scenario. `kv_source` and `kv_received` hold chunks * chunk_elems
// float32 (row-major [chunk][elem]); prefill_kv copies every chunk of the
// source into `kv_received` through the copy stream, prefill leaves it alone.
// Wall times are std::chrono::steady_clock. Throws std::invalid_argument on
// sizes that do not match `config` or a zero switch_steps / window / steps.
ScenarioTimes run_scenario(const ModelConfig& config, Scenario scenario, std::span<const float> kv_source,
                           std::span<float> kv_received, const TraceTargets& trace);

}  // namespace densefeed::kv_overlap
