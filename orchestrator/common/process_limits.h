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

// What one untrusted command may use besides time (untrusted_launch.h); a
// gate's `limits` section overrides each (schemas/gate.schema.json), and the
// same limits hold for its trace and acceptance commands and revision builds.
// Exceeding one is a red verdict that names it.
struct CommandLimits {
  // Memory of every process of the command together: a cgroup's
  // memory.limit_in_bytes where densefeed can make one, else RLIMIT_AS per
  // process (not on GPU machines: the CUDA driver reserves far more address
  // space than it uses). Bytes.
  std::uint64_t memory_bytes = 16ull << 30;
  // Processes (and threads) at once: a cgroup's pids.max, else RLIMIT_NPROC
  // inside the sandbox's user namespace (where densefeed is not root).
  std::uint64_t processes = 1024;
  // The largest file it may write (RLIMIT_FSIZE), bytes: an output, a trace.
  std::uint64_t file_size_bytes = 4ull << 30;
  // Its private /tmp (a tmpfs of this size inside the sandbox), bytes.
  std::uint64_t tmp_bytes = 1ull << 30;
};

// Lines of a failing process's log shown in its verdict and the report.
inline constexpr std::size_t kLogTailLines = 20;

}  // namespace densefeed
