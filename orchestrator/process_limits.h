// The defaults of process control, in one place: every command densefeed
// starts (harnesses, build commands, git) runs under these unless its gate
// says otherwise. README "Process control" lists them; change both together.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace densefeed {

// A harness process (reference, candidate, base), seconds; a gate's
// `timeout_s` overrides it (schemas/gate.schema.json).
inline constexpr double kDefaultHarnessTimeoutS = 600;

// One build command of a revision build, seconds; a gate's
// `build.timeout_s` overrides it.
inline constexpr double kDefaultBuildTimeoutS = 1800;

// Between SIGTERM to a timed-out command's process group and SIGKILL: long
// enough for a harness to flush and exit on SIGTERM, short enough that a
// harness ignoring it costs little.
inline constexpr std::chrono::milliseconds kDefaultKillGrace{2'000};

// Bytes of stdout and of stderr (each) kept in a command's log file; the rest
// is counted and dropped, never held in memory. 16 MiB holds any useful log
// and bounds the disk a flooding harness can fill per stream.
inline constexpr std::uint64_t kDefaultOutputCapBytes = 16ull << 20;

// Lines of a failing process's log shown in its verdict and the report.
inline constexpr std::size_t kLogTailLines = 20;

}  // namespace densefeed
