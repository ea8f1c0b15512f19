#include "compare_files.h"

#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "error.h"
#include "tensor_file.h"

namespace densefeed {

CompareFilesResult compare_files(const CompareFilesRequest& request) {
  std::optional<std::string> declared;
  if (!request.candidate_dtype.empty()) declared = request.candidate_dtype;
  const auto open = [](const std::string& path, const std::string& tensor, std::optional<std::string> dtype) {
    try {
      return TensorFile::open(path, tensor, dtype);
    } catch (const TensorFileError& e) {
      throw InputError(path, {}, "", e.message());
    } catch (const std::runtime_error& e) {
      throw InputError(path, {}, "", e.what());
    }
  };
  const Tolerance& given = request.tolerance;
  for (const auto& [flag, bound] : {std::pair{"--rel-l2", given.rel_l2}, std::pair{"--max-abs", given.max_abs},
                                    std::pair{"--atol", given.atol}, std::pair{"--rtol", given.rtol},
                                    std::pair{"--ulp", given.max_ulp}}) {
    if (bound && !(std::isfinite(*bound) && *bound >= 0)) {
      throw InputError("command line", {}, flag, fmt::format("expected a finite bound >= 0, got {}", *bound));
    }
  }
  const auto cand = open(request.candidate, request.candidate_tensor, declared);
  // The reference's defects are errors, as in the gate (compare_output in
  // gate_runner.cpp): a reference file that is there but cannot be read as
  // a tensor is verdict error (exit 3) naming it; one that is not there at
  // all is a mistake on the command line (bad input, exit 2).
  std::optional<TensorFile> ref;
  std::string ref_problem;
  {
    std::error_code ec;
    if (!std::filesystem::exists(request.reference, ec)) {
      throw InputError(request.reference, {}, "", "no such file (the reference to compare against)");
    }
    try {
      ref = TensorFile::open(request.reference, request.reference_tensor, std::nullopt);
    } catch (const TensorFileError& e) {
      ref_problem = e.message();
    } catch (const std::runtime_error& e) {
      ref_problem = e.what();
    }
  }
  CompareOptions options;
  options.candidate_dtype = cand.dtype();
  if (request.partition_axis) {
    const std::size_t axis = *request.partition_axis;
    if (axis >= cand.shape().size()) {
      throw InputError("command line", {}, "--partition-axis",
                       fmt::format("the tensors have {} dimension(s), so the axis must be below that; got {}",
                                   cand.shape().size(), axis));
    }
    options.partition = Partition{axis, request.partition_parts};
  }
  CompareFilesResult result;
  result.tolerance = given;
  if (result.tolerance.empty()) result.tolerance = default_tolerance(cand.dtype());
  if (result.tolerance.max_ulp && !ulp_dtype(cand.dtype())) {
    throw InputError(request.candidate, {}, "", "--ulp applies to float32, float16 and bfloat16 candidates, not " + cand.dtype());
  }
  if (ref) {
    try {
      result.comparison = compare_tensor_files(*ref, cand, result.tolerance, options);
    } catch (const TensorFileError& e) {
      // Read while comparing: the reference's is an error, the candidate's bad input.
      if (e.path() != ref->path()) throw InputError(request.candidate, {}, "", e.message());
      ref_problem = e.message();
    }
  }
  if (!ref_problem.empty()) {
    result.comparison = Comparison{};
    result.comparison.verdict = Verdict::error;
    result.comparison.reason = fmt::format("the reference {} cannot be read as a tensor: {}", request.reference, ref_problem);
  }
  return result;
}

}  // namespace densefeed
