#include "statistics.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace densefeed {

double quantile(std::vector<double> samples, double q) {
  if (samples.empty()) throw std::invalid_argument("quantile of an empty sample");
  std::sort(samples.begin(), samples.end());
  const double h = (static_cast<double>(samples.size()) - 1) * q;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const auto hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (h - static_cast<double>(lo)) * (samples[hi] - samples[lo]);
}

double relative_iqr(const std::vector<double>& samples) {
  const double m = median(samples);
  return m == 0 ? 0 : (quantile(samples, 0.75) - quantile(samples, 0.25)) / m;
}

}  // namespace densefeed
