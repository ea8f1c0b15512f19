// Comparison of a candidate tensor against its reference: the metrics of a
// gate's tolerance and where the worst element is.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gate_spec.h"
#include "npy_reader.h"
#include "verdict.h"

namespace densefeed {

struct MetricCheck {
  std::string metric;  // "rel_l2" | "max_abs"
  double value = 0;    // NaN when undefined (never passes)
  double bound = 0;
  bool passed = false;
};

struct Comparison {
  Verdict verdict = Verdict::green;
  std::string reason;  // empty when green
  std::size_t elements = 0;
  std::size_t candidate_nonfinite = 0;  // NaN or Inf elements
  std::size_t reference_nonfinite = 0;
  double rel_l2 = 0;   // ||c - r||_2 / ||r||_2, fp64 accumulation; Inf if r = 0 and c != r
  double max_abs = 0;  // max |c - r|
  std::vector<std::size_t> worst_index;  // multi-index of max |c - r|
  double worst_candidate = 0;
  double worst_reference = 0;
  std::vector<MetricCheck> checks;
};

// Shapes must match exactly. A non-finite reference element is an `error`
// verdict; a non-finite candidate element is `red` (NaN is never equal to
// NaN, and a NaN metric never passes). Every bound of `tol` must hold for green.
Comparison compare_tensors(const Tensor& reference, const Tensor& candidate, const Tolerance& tol);

}  // namespace densefeed
