#include "samples_writer.h"

#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace densefeed {

void write_samples_json(const std::filesystem::path& path, std::span<const double> samples_ms) {
  nlohmann::json samples = nlohmann::json::array();
  for (std::size_t i = 0; i < samples_ms.size(); ++i) {
    const double ms = samples_ms[i];
    // JSON has no NaN/Inf; a negative time means a broken clock. Either would
    // reach the statistics as a silent lie, so refuse it here.
    if (!std::isfinite(ms) || ms < 0.0) {
      throw SamplesWriteError(
          fmt::format("{}: sample {} is {} ms, expected a finite time >= 0", path.string(), i, ms));
    }
    samples.push_back(ms);
  }
  const nlohmann::json doc = {{"unit", "ms"}, {"samples", std::move(samples)}};
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw SamplesWriteError(fmt::format("{}: cannot open for writing", path.string()));
  out << doc.dump() << '\n';
  out.close();
  if (!out) throw SamplesWriteError(fmt::format("{}: write failed", path.string()));
}

}  // namespace densefeed
