#include "wrong_candidates.h"

#include <algorithm>

#include "tensor_file.h"

namespace densefeed {

std::vector<std::string> wrong_candidates_passing(const TensorFile& reference, const Tolerance& tolerance,
                                                  const CompareOptions& options) {
  constexpr std::size_t kBlock = 1 << 16;
  const std::size_t n = reference.size();
  if (n == 0) return {};
  std::vector<double> r(kBlock), x(kBlock);
  double sum = 0;
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t count = std::min(kBlock, n - begin);
    reference.read_doubles(begin, count, r.data());
    for (std::size_t k = 0; k < count; ++k) sum += r[k];
  }
  const double mean = sum / static_cast<double>(n);

  const auto& shape = reference.shape();
  // Positions along the partition axis whose slice is the last one.
  std::size_t stride = 1, axis_len = 1, parts = 0;
  const bool partitioned = options.partition && options.partition->axis < shape.size();
  if (partitioned) {
    axis_len = shape[options.partition->axis];
    for (std::size_t d = options.partition->axis + 1; d < shape.size(); ++d) stride *= shape[d];
    parts = options.partition->parts == 0 ? axis_len : std::min(options.partition->parts, axis_len);
  }
  Comparator zeros(shape, tolerance, options), constant(shape, tolerance, options), dropped(shape, tolerance, options);
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t count = std::min(kBlock, n - begin);
    reference.read_doubles(begin, count, r.data());
    std::fill(x.begin(), x.begin() + count, 0.0);
    zeros.add(begin, r.data(), x.data(), count);
    std::fill(x.begin(), x.begin() + count, mean);
    constant.add(begin, r.data(), x.data(), count);
    if (partitioned) {
      for (std::size_t k = 0; k < count; ++k) {
        const std::size_t pos = ((begin + k) / stride) % axis_len;
        x[k] = pos * parts / axis_len == parts - 1 ? 0.0 : r[k];
      }
      dropped.add(begin, r.data(), x.data(), count);
    }
  }
  std::vector<std::string> passing;
  if (zeros.finish().verdict == Verdict::green) passing.push_back(kWrongCandidates[0]);
  if (constant.finish().verdict == Verdict::green) passing.push_back(kWrongCandidates[1]);
  if (partitioned && dropped.finish().verdict == Verdict::green) passing.push_back(kWrongCandidates[2]);
  return passing;
}

std::string wrong_candidate_sentence(const std::string& candidate) {
  if (candidate == "zeros") return "this case cannot tell a zero output from the reference";
  if (candidate == "reference_mean") return "this case cannot tell a constant output (the reference's mean) from the reference";
  if (candidate == "last_partition_zeroed") {
    return "this case cannot tell an output whose last partition slice is zeroed from the reference";
  }
  return "this case cannot tell a " + candidate + " output from the reference";
}

}  // namespace densefeed
