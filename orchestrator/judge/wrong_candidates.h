// Could this gate have failed? For each case, the outputs of three simple
// wrong candidates are judged against the reference's own output under the
// output's tolerance, with the same comparator that judges real candidates;
// no harness runs (the reference's outputs are already on disk). A wrong
// candidate that passes means the case cannot tell it from the reference:
// its bounds are too loose for the reference's magnitudes (an atol above
// most of the reference, a rel_l2 of 1 or more), and the gate's owner
// should tighten them.
#pragma once

#include <string>
#include <vector>

#include "tensor_compare.h"
#include "tolerance.h"

namespace densefeed {

class TensorFile;

// The candidates, by name:
//   zeros                  every element 0
//   reference_mean         every element the reference's mean (one constant)
//   last_partition_zeroed  the reference with its last partition slice set
//                          to 0 (only when options.partition is set: a
//                          partitioned kernel that drops its last shard)
inline constexpr const char* kWrongCandidates[] = {"zeros", "reference_mean", "last_partition_zeroed"};

// The names of the wrong candidates that `tolerance` would accept against
// `reference` (a finite tensor of any shape), in kWrongCandidates order.
// Two passes over the reference (its mean, then the three comparisons).
// Throws what TensorFile::read_doubles throws.
std::vector<std::string> wrong_candidates_passing(const TensorFile& reference, const Tolerance& tolerance,
                                                  const CompareOptions& options);

// "this case cannot tell a zero output from the reference" and its analogues.
std::string wrong_candidate_sentence(const std::string& candidate);

}  // namespace densefeed
