#include "serving_model.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "interpreter_lock.h"
#include "sim_stream.h"

#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace densefeed::kv_overlap {
namespace {

// Correlation ids pair a runtime call with the device op it started, unique
// in the process as CUPTI's are.
std::atomic<std::int64_t> next_correlation{1};

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// CPU work of a given length: the thread keeps its core, as a submission or
// a spinning dispatcher does.
void busy_until(Clock::time_point t) {
  while (Clock::now() < t) cpu_relax();
}

std::int64_t os_thread_id() {
#ifdef __linux__
  return static_cast<std::int64_t>(::syscall(SYS_gettid));
#else
  return static_cast<std::int64_t>(std::hash<std::thread::id>{}(std::this_thread::get_id()) & 0x7fffffff);
#endif
}

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

void record(TraceLane* lane, TraceEvent e) {
  if (lane != nullptr) lane->add(e);
}

TraceEvent event(const char* name, const char* cat, Clock::time_point start, Clock::time_point end) {
  TraceEvent e;
  e.name = name;
  e.cat = cat;
  e.start = start;
  e.end = end;
  return e;
}

struct Transfer {
  const ModelConfig& config;
  InterpreterLock& lock;
  SimStream& copy;
  std::span<const float> source;
  std::span<float> received;
  TraceLane* lane;
  std::exception_ptr error;

  void run() noexcept {
    try {
      if (lane != nullptr) lane->tid = os_thread_id();
      const std::size_t elems = config.chunk_elems;
      const auto bytes = static_cast<std::int64_t>(elems * sizeof(float));
      for (std::size_t chunk = 0; chunk < config.chunks; ++chunk) {
        copy.wait_in_flight_below(config.window);
        const Clock::time_point asked = Clock::now();
        lock.acquire();
        const Clock::time_point got = Clock::now();
        TraceEvent wait = event("lock_wait", "cpu_op", asked, got);
        wait.chunk = static_cast<std::int64_t>(chunk);
        record(lane, wait);
        busy_until(got + config.submit_time);  // building the transfer's descriptors
        const std::int64_t correlation = next_correlation.fetch_add(1);
        const Clock::time_point call = Clock::now();
        StreamItem item;
        item.chunk = static_cast<std::int64_t>(chunk);
        item.correlation = correlation;
        item.bytes = bytes;
        const float* from = source.data() + chunk * elems;
        float* to = received.data() + chunk * elems;
        item.work = [from, to, elems] { std::memcpy(to, from, elems * sizeof(float)); };
        copy.submit(std::move(item));
        const Clock::time_point done = Clock::now();
        TraceEvent runtime = event("cudaMemcpyAsync", "cuda_runtime", call, done);
        runtime.correlation = correlation;
        runtime.chunk = static_cast<std::int64_t>(chunk);
        record(lane, runtime);
        TraceEvent submit = event("kv_submit", "cpu_op", got, done);
        submit.chunk = static_cast<std::int64_t>(chunk);
        submit.bytes = bytes;
        record(lane, submit);
        lock.release();
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
};

}  // namespace

std::string_view to_string(Variant v) { return v == Variant::hold ? "hold" : "release"; }
std::string_view to_string(Scenario s) { return s == Scenario::prefill ? "prefill" : "prefill_kv"; }

std::optional<Variant> parse_variant(std::string_view text) {
  if (text == "hold") return Variant::hold;
  if (text == "release") return Variant::release;
  return std::nullopt;
}

std::optional<Scenario> parse_scenario(std::string_view text) {
  if (text == "prefill") return Scenario::prefill;
  if (text == "prefill_kv") return Scenario::prefill_kv;
  return std::nullopt;
}

ScenarioTimes run_scenario(const ModelConfig& config, Scenario scenario, std::span<const float> kv_source,
                           std::span<float> kv_received, const TraceTargets& trace) {
  const std::size_t elems = config.chunks * config.chunk_elems;
  if (config.steps == 0 || config.switch_steps == 0 || config.window == 0 || config.chunks == 0 ||
      config.chunk_elems == 0) {
    throw std::invalid_argument("run_scenario: steps, switch_steps, window, chunks and chunk_elems must be >= 1");
  }
  if (kv_source.size() != elems || kv_received.size() != elems) {
    throw std::invalid_argument(fmt::format("run_scenario: KV buffers of {} and {} elements, expected {}",
                                            kv_source.size(), kv_received.size(), elems));
  }
  const bool transfer_runs = scenario == Scenario::prefill_kv;
  const bool releases = config.variant == Variant::release;
  const char* scenario_name = scenario == Scenario::prefill ? "prefill" : "prefill_kv";
  const char* variant_name = releases ? "release" : "hold";

  InterpreterLock lock;
  SimStream compute(config.step_time, trace.compute, "prefill_kernel", "kernel");
  std::optional<SimStream> copy;
  if (transfer_runs) copy.emplace(config.chunk_time, trace.copy, "kv_transfer", "gpu_memcpy");

  lock.acquire();
  std::optional<Transfer> transfer;
  std::thread transfer_thread;
  if (transfer_runs) {
    TraceLane* lane = trace.recorder != nullptr
                          ? &trace.recorder->add_lane(trace.pid, 0, "kv transfer thread", 2, false)
                          : nullptr;
    transfer.emplace(Transfer{config, lock, *copy, kv_source, kv_received, lane, nullptr});
    transfer_thread = std::thread([&] { transfer->run(); });
    lock.wait_for_waiters(1);  // the transfer asks for the lock before the prefill begins
  }

  const Clock::time_point start = Clock::now();
  std::size_t held_steps = 0;
  for (std::size_t step = 0; step < config.steps; ++step) {
    const auto step_index = static_cast<std::int64_t>(step);
    const Clock::time_point step_start = Clock::now();
    busy_until(step_start + config.host_time);

    const Clock::time_point dispatch_start = Clock::now();
    const std::int64_t correlation = next_correlation.fetch_add(1);
    StreamItem kernel;
    kernel.step = step_index;
    kernel.correlation = correlation;
    compute.submit(std::move(kernel));
    const Clock::time_point launched = Clock::now();
    TraceEvent launch = event("cudaLaunchKernel", "cuda_runtime", dispatch_start, launched);
    launch.correlation = correlation;
    launch.step = step_index;
    record(trace.main, launch);

    Clock::time_point wait_start;
    if (releases) {
      wait_start = Clock::now();
      lock.release();
      while (compute.completed() <= step) cpu_relax();
      lock.acquire();
    } else {
      wait_start = launched;
      while (compute.completed() <= step) cpu_relax();
    }
    const Clock::time_point dispatch_end = Clock::now();
    TraceEvent wait = event("dispatch_wait", "cpu_op", wait_start, dispatch_end);
    wait.step = step_index;
    wait.holds_lock = releases ? 0 : 1;
    record(trace.main, wait);
    TraceEvent dispatch = event("dispatch", "cpu_op", dispatch_start, dispatch_end);
    dispatch.step = step_index;
    record(trace.main, dispatch);
    TraceEvent step_event = event("prefill_step", "user_annotation", step_start, dispatch_end);
    step_event.step = step_index;
    record(trace.main, step_event);

    held_steps = releases ? 0 : held_steps + 1;
    if (step + 1 < config.steps && held_steps >= config.switch_steps && lock.waiters() > 0) {
      const Clock::time_point handoff_start = Clock::now();
      lock.yield_turn();
      TraceEvent handoff = event("lock_handoff", "cpu_op", handoff_start, Clock::now());
      handoff.step = step_index;
      record(trace.main, handoff);
      held_steps = 0;
    }
  }
  const Clock::time_point loop_end = Clock::now();
  TraceEvent window = event("prefill", "user_annotation", start, loop_end);
  window.scenario = scenario_name;
  window.variant = variant_name;
  record(trace.main, window);
  lock.release();

  Clock::time_point end = loop_end;
  if (transfer_runs) {
    transfer_thread.join();
    if (transfer->error) std::rethrow_exception(transfer->error);
    end = std::max(loop_end, copy->drain());
  }
  return {ms_between(start, loop_end), ms_between(start, end)};
}

}  // namespace densefeed::kv_overlap
