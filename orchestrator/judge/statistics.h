// Order statistics of timing samples.
#pragma once

#include <vector>

namespace densefeed {

// Quantile q in [0, 1] with linear interpolation between order statistics
// (Hyndman & Fan 1996, type 7; NumPy's default "linear" method).
// Throws std::invalid_argument on an empty sample.
double quantile(std::vector<double> samples, double q);

inline double median(const std::vector<double>& samples) { return quantile(samples, 0.5); }

// Interquartile range over the median: a dimensionless spread of one arm.
double relative_iqr(const std::vector<double>& samples);

}  // namespace densefeed
