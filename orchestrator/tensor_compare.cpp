#include "tensor_compare.h"

#include <cmath>

#include <fmt/format.h>

namespace densefeed {
namespace {

std::vector<std::size_t> unravel(std::size_t flat, const std::vector<std::size_t>& shape) {
  std::vector<std::size_t> index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return index;
}

}  // namespace

Comparison compare_tensors(const Tensor& reference, const Tensor& candidate, const Tolerance& tol) {
  Comparison c;
  if (reference.shape != candidate.shape) {
    c.verdict = Verdict::red;
    c.reason = fmt::format("shape {} differs from the reference's {}", shape_text(candidate.shape),
                           shape_text(reference.shape));
    return c;
  }
  c.elements = reference.data.size();
  double diff2 = 0, ref2 = 0;
  std::size_t worst = 0;
  bool have_worst = false;
  bool nan_seen = false;  // a NaN difference is the worst there is
  for (std::size_t i = 0; i < c.elements; ++i) {
    const double r = reference.data[i];
    const double x = candidate.data[i];
    if (!std::isfinite(r)) ++c.reference_nonfinite;
    if (!std::isfinite(x)) ++c.candidate_nonfinite;
    const double d = x - r;
    diff2 += d * d;
    ref2 += r * r;
    const double a = std::fabs(d);
    if (std::isnan(a)) {
      if (!nan_seen) worst = i;
      nan_seen = have_worst = true;
    } else if (!nan_seen && (!have_worst || a > c.max_abs)) {
      c.max_abs = a;
      worst = i;
      have_worst = true;
    }
  }
  if (nan_seen) c.max_abs = NAN;
  if (have_worst) {
    c.worst_index = unravel(worst, reference.shape);
    c.worst_candidate = candidate.data[worst];
    c.worst_reference = reference.data[worst];
  }
  if (ref2 > 0) c.rel_l2 = std::sqrt(diff2) / std::sqrt(ref2);
  else c.rel_l2 = diff2 == 0 ? 0.0 : (std::isnan(diff2) ? NAN : INFINITY);
  if (std::isnan(diff2)) c.rel_l2 = NAN;

  auto check = [&](const char* name, std::optional<double> bound, double value) {
    if (!bound) return;
    // Written so that NaN fails: NaN <= bound is false.
    c.checks.push_back({name, value, *bound, value <= *bound});
  };
  check("rel_l2", tol.rel_l2, c.rel_l2);
  check("max_abs", tol.max_abs, c.max_abs);

  if (c.reference_nonfinite > 0) {
    c.verdict = Verdict::error;
    c.reason = fmt::format("the reference has {} NaN/Inf element(s)", c.reference_nonfinite);
  } else if (c.candidate_nonfinite > 0) {
    c.verdict = Verdict::red;
    c.reason = fmt::format("{} of {} candidate element(s) are NaN/Inf (unwritten elements stay NaN)",
                           c.candidate_nonfinite, c.elements);
  } else {
    for (const auto& m : c.checks) {
      if (!m.passed) {
        c.verdict = Verdict::red;
        c.reason += fmt::format("{}{} {:.3e} > bound {:.1e}", c.reason.empty() ? "" : "; ", m.metric, m.value,
                                m.bound);
      }
    }
  }
  return c;
}

}  // namespace densefeed
