// One run of a gate's reference for one case and seed, as the bench stage
// needs it for a driver's input sets (gate_runner.h run_references,
// input_sets.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "failure.h"

namespace densefeed {

struct ReferenceRun {
  std::uint64_t seed = 0;     // its DENSEFEED_SEED
  std::filesystem::path out;  // its output folder
  double wall_s = 0;          // its process's wall time, seconds
  // Why it cannot be compared with ('' and a Failure of kind none when it
  // can): the reference failed (an error of the bench, never the
  // candidate's), densefeed could not run it, or its outputs changed after
  // it exited.
  std::string reason;
  Failure failure;
};

}  // namespace densefeed
