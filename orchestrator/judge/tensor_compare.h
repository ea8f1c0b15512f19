// The comparison engine of the gate: a candidate tensor against its
// reference, every bound of the output's tolerance, and enough detail to say
// where it failed (worst element, elements beyond each elementwise bound, the
// first failing slice along a declared partition axis). Streams blocks, so a
// tensor of any size is compared in one pass without copies.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tolerance.h"
#include "verdict.h"

namespace densefeed {

class TensorFile;

struct MetricCheck {
  std::string metric;  // rel_l2 | max_abs | elementwise | max_ulp
  double value = 0;    // NaN when undefined (never passes); elementwise: fraction of elements violating
  double bound = 0;
  bool passed = false;
  std::size_t violations = 0;  // elements beyond the bound (elementwise metrics; 0 for rel_l2)
};

// Error of one slice of the partition axis (e.g. one shard's part of the sequence).
struct SliceError {
  std::size_t index = 0;
  std::size_t begin = 0;  // first position along the axis
  std::size_t end = 0;    // one past the last
  double rel_l2 = 0;
  double max_abs = 0;
  std::size_t violations = 0;  // elements of the slice beyond an elementwise bound
  bool passed = true;
};

// Split `axis` of the output into `parts` equal slices (parts = the axis
// length when 0) and report each slice's error and the first that fails.
struct Partition {
  std::size_t axis = 0;
  std::size_t parts = 0;
};

struct CompareOptions {
  std::string candidate_dtype = "float32";  // for max_ulp and the default relative bound
  std::optional<Partition> partition;
};

struct Comparison {
  Verdict verdict = Verdict::green;
  std::string reason;  // empty when green
  std::string note;    // e.g. why absolute bounds were replaced by a relative one
  std::size_t elements = 0;
  std::size_t candidate_nonfinite = 0;
  std::size_t reference_nonfinite = 0;
  double rel_l2 = 0;             // ||c - r||_2 / ||r||_2; Inf if r = 0 and c != r
  double max_abs = 0;            // max |c - r|
  double reference_max_abs = 0;  // max |r|
  bool judged_relative = false;  // the reference was below the absolute bound
  std::vector<std::size_t> worst_index;  // multi-index (C order) of max |c - r|
  double worst_candidate = 0;
  double worst_reference = 0;
  std::vector<MetricCheck> checks;
  std::vector<SliceError> slices;               // when a partition was asked for
  std::optional<std::size_t> first_failing_slice;
};

// Accumulates blocks of elements in C order, then judges.
class Comparator {
 public:
  Comparator(std::vector<std::size_t> shape, Tolerance tolerance, CompareOptions options);
  // ref and cand hold `count` elements starting at flat index `begin`.
  void add(std::size_t begin, const double* ref, const double* cand, std::size_t count);
  Comparison finish() const;

 private:
  struct SliceAcc {
    double diff2 = 0, ref2 = 0, max_abs = 0;
    std::size_t elements = 0, elementwise_bad = 0, relative_only_bad = 0, over_ulp = 0;
  };
  std::vector<std::size_t> shape_;
  Tolerance tol_;
  CompareOptions options_;
  std::size_t elements_ = 0, cand_nonfinite_ = 0, ref_nonfinite_ = 0;
  double diff2_ = 0, ref2_ = 0, max_abs_ = 0, ref_max_abs_ = 0, max_ulp_ = 0;
  bool nan_diff_ = false, have_worst_ = false;
  std::size_t worst_ = 0;
  double worst_c_ = 0, worst_r_ = 0;
  std::size_t over_max_abs_ = 0, elementwise_bad_ = 0, relative_only_bad_ = 0, over_ulp_ = 0;
  std::size_t slice_stride_ = 1, axis_len_ = 1, parts_ = 0;
  std::vector<SliceAcc> slices_;
};

// In-memory arrays of equal length; `shape` is theirs.
Comparison compare_arrays(std::span<const double> reference, std::span<const double> candidate,
                          const std::vector<std::size_t>& shape, const Tolerance& tol, const CompareOptions& options);

// Two tensor files, block by block. Shapes must match (else red, naming both).
Comparison compare_tensor_files(const TensorFile& reference, const TensorFile& candidate, const Tolerance& tol,
                                const CompareOptions& options);

std::string shape_text(const std::vector<std::size_t>& shape);

}  // namespace densefeed
