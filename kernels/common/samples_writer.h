// Writes the bench output of the harness protocol: samples.json,
// {"unit": "ms", "samples": [...]} (DESIGN.md, "Harness protocol").
#pragma once

#include <filesystem>
#include <span>
#include <stdexcept>

namespace densefeed {

// Thrown when samples.json cannot be written or a sample is not a finite,
// non-negative time; the message names the file.
class SamplesWriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Writes {"unit": "ms", "samples": [...]} to `path` (replacing it), one entry per
// timed iteration in milliseconds, in the order measured (warmup already dropped).
// Throws SamplesWriteError naming `path` if a sample is negative, NaN or Inf, or
// on any I/O failure.
void write_samples_json(const std::filesystem::path& path, std::span<const double> samples_ms);

}  // namespace densefeed
