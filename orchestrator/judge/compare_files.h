// `densefeed compare`: two tensor files on disk judged with the gate's
// engine (tensor_compare.h), the defects of each file told apart as the gate
// tells them: the candidate's are bad input, the reference's an error.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "tensor_compare.h"
#include "tolerance.h"

namespace densefeed {

struct CompareFilesRequest {
  std::string reference, candidate;            // .npy or .safetensors paths
  std::string reference_tensor, candidate_tensor;  // tensor names in a .safetensors file ('' in .npy)
  std::string candidate_dtype;                 // declared dtype ('' = the file's; needed for bfloat16/fp8 in .npy)
  Tolerance tolerance;                         // empty: default_tolerance(the candidate's dtype)
  std::optional<std::size_t> partition_axis;   // report each slice along this axis
  std::size_t partition_parts = 0;             // equal slices (0: one per position)
};

struct CompareFilesResult {
  Comparison comparison;  // verdict error (reason naming the reference) when the reference cannot be read as a tensor
  Tolerance tolerance;    // the bounds judged: as given, or the candidate dtype's defaults
};

// Opens both files and compares them block by block. Throws InputError (exit
// 2) for a bound that is not finite and >= 0, a candidate that cannot be read
// (naming it), a reference that does not exist, a partition axis at or past
// the tensors' rank, or --ulp on a candidate dtype without ULPs (ulp_dtype).
// A reference that exists but cannot be read, before or while comparing,
// gives verdict error instead (as compare_output in gate_runner.cpp does).
CompareFilesResult compare_files(const CompareFilesRequest& request);

}  // namespace densefeed
