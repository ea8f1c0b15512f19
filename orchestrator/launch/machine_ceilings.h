// A machine's measured ceilings (issue 16, "plausibility against the
// machine"): how fast it can move bytes and do floating-point operations,
// measured once per machine by `densefeed machine calibrate` and recorded in
// the ledger (machine_ceilings table) with the host and device. The bench
// stage compares each arm's achieved rate (a gate's bench.work over its
// median time) with them (timing_checks.h check_ceilings).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "timing_checks.h"

namespace densefeed {

struct MachineCeilings {
  std::string host;
  std::string device;       // "cpu", or the GPU's UUID (GPU-...)
  std::string device_name;  // the CPU model or GPU name
  double bytes_per_s = 0;   // copy bandwidth, read + write bytes per second
  double flops_per_s = 0;   // the fastest matrix rate measured (0 = not measured)
  nlohmann::ordered_json figures = nlohmann::ordered_json::object();  // what each figure rests on
  std::string tool;         // what measured it
  std::string measured_at;  // ISO 8601 UTC
};

// The CPU's copy bandwidth: std::memcpy of buffers from 32 KiB up to 256 MiB
// or, where the last-level caches are larger, to the first x4 step at which
// each buffer is at least 4x their sum (STREAM's rule for a memory figure);
// 2 bytes counted per byte copied (read + write, as STREAM's Copy counts
// them: McCalpin, "Memory Bandwidth and Machine Balance", 1995), best of 7
// timed copies per size after one untimed. bytes_per_s is the largest over
// sizes: caches included, so it bounds any kernel's achieved rate.
// figures.memory_copy_bytes_per_s is the rate at the largest size, the
// ceiling of a case whose working set does not fit the caches (0 when that
// size is below 4x them, i.e. the caches are unknown), and
// figures.last_level_cache_bytes their size (last_level_cache_bytes());
// figures.copy_bytes_per_s_by_size per size, bytes/s. No FLOP rate (a loop
// of ours would be below a tuned BLAS: no bound). About 1 s.
MachineCeilings measure_cpu_ceilings();

// The total size in bytes of the CPUs' last-level caches as Linux's sysfs
// reports them: per CPU the highest-level cache
// (/sys/devices/system/cpu/cpuN/cache/indexK/{level,size,shared_cpu_list},
// size as "32768K"), each distinct shared_cpu_list counted once (one per
// socket or CCX); 0 when sysfs reports none.
double last_level_cache_bytes();

// Runs `probe` (densefeed-gpu-ceilings, next to the densefeed executable) on
// the GPU CUDA_VISIBLE_DEVICES names. Returns nothing, with *why set, when the
// probe is not installed, finds no GPU or fails.
std::optional<MachineCeilings> measure_gpu_ceilings(const std::filesystem::path& probe, std::string* why);

// What the bench stage compares with.
Ceilings ceilings_of(const MachineCeilings& m);

// The ceilings of a process that can use every one of `devices` (the CPU and
// the GPUs it may see): each figure the largest of theirs, the source naming
// the measurement each comes from. `devices` must not be empty.
Ceilings fastest_ceilings(const std::vector<MachineCeilings>& devices);

}  // namespace densefeed
