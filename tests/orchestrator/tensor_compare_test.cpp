#include <gtest/gtest.h>

#include <cmath>

#include "tensor_compare.h"

namespace densefeed {
namespace {

Comparison cmp(std::vector<double> ref, std::vector<double> cand, std::vector<std::size_t> shape, Tolerance tol,
               CompareOptions options = {}) {
  return compare_arrays(ref, cand, shape, tol, options);
}

Tolerance rel(double bound) {
  Tolerance t;
  t.rel_l2 = bound;
  return t;
}

TEST(TensorCompare, ExactMetricsAndWorstIndex) {
  // ref = [3, 4, 0, 0], cand = [3, 4, 0, 0.5]: ||d|| = 0.5, ||ref|| = 5.
  Tolerance t = rel(0.2);
  t.max_abs = 1.0;
  const auto c = cmp({3, 4, 0, 0}, {3, 4, 0, 0.5}, {2, 2}, t);
  EXPECT_DOUBLE_EQ(c.rel_l2, 0.1);
  EXPECT_DOUBLE_EQ(c.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(c.reference_max_abs, 4);
  EXPECT_EQ(c.worst_index, (std::vector<std::size_t>{1, 1}));
  EXPECT_EQ(c.verdict, Verdict::green);
  ASSERT_EQ(c.checks.size(), 2u);
  EXPECT_TRUE(c.checks[0].passed);
}

TEST(TensorCompare, OverTheBoundIsRedAndSaysWhich) {
  const auto c = cmp({3, 4}, {3, 4.5}, {2}, rel(0.05));
  EXPECT_EQ(c.verdict, Verdict::red);
  EXPECT_EQ(c.reason, "rel_l2 1.000e-01 > bound 5.0e-02");
}

TEST(TensorCompare, NanInCandidateIsRedEvenWithHugeBounds) {
  Tolerance t = rel(1e30);
  t.max_abs = 1e30;
  const auto c = cmp({1, 2, 3}, {1, NAN, 3}, {3}, t);
  EXPECT_EQ(c.verdict, Verdict::red);
  EXPECT_EQ(c.candidate_nonfinite, 1u);
  EXPECT_TRUE(std::isnan(c.rel_l2));
  EXPECT_TRUE(std::isnan(c.max_abs));
  EXPECT_EQ(c.worst_index, (std::vector<std::size_t>{1}));
  for (const auto& m : c.checks) EXPECT_FALSE(m.passed) << m.metric;  // a NaN metric never passes
}

TEST(TensorCompare, InfInReferenceIsAnError) {
  const auto c = cmp({1, INFINITY}, {1, 2}, {2}, rel(1e-3));
  EXPECT_EQ(c.verdict, Verdict::error);
  EXPECT_EQ(c.reference_nonfinite, 1u);
}

TEST(TensorCompare, ZeroReference) {
  EXPECT_EQ(cmp({0, 0}, {0, 0}, {2}, rel(1e-6)).verdict, Verdict::green);
  const auto c = cmp({0, 0}, {0, 1e-30}, {2}, rel(1e-6));
  EXPECT_TRUE(std::isinf(c.rel_l2));
  EXPECT_EQ(c.verdict, Verdict::red);
}

TEST(TensorCompare, TinyReferenceIsJudgedByRelativeError) {
  // A reference of magnitude 1e-7 under max_abs 1e-4: an all-zero candidate
  // would pass the absolute bound; it must fail the relative one instead.
  Tolerance t;
  t.max_abs = 1e-4;
  const auto zeros = cmp({1e-7, -2e-7, 3e-7}, {0, 0, 0}, {3}, t, {"float32", {}});
  EXPECT_TRUE(zeros.judged_relative);
  EXPECT_EQ(zeros.verdict, Verdict::red);
  ASSERT_EQ(zeros.checks.size(), 1u);
  EXPECT_EQ(zeros.checks[0].metric, "rel_l2");
  EXPECT_DOUBLE_EQ(zeros.checks[0].value, 1.0);
  EXPECT_DOUBLE_EQ(zeros.checks[0].bound, 1e-5);  // float32's default relative bound
  EXPECT_NE(zeros.note.find("below the absolute bound 1.0e-04: judged by relative error"), std::string::npos) << zeros.note;
  // The same candidate error on a reference of normal size is judged absolutely.
  const auto normal = cmp({1.0, -2.0, 3.0}, {1.0, -2.0, 3.00001}, {3}, t, {"float32", {}});
  EXPECT_FALSE(normal.judged_relative);
  EXPECT_EQ(normal.verdict, Verdict::green);
}

TEST(TensorCompare, AFewWrongElementsUnderAGlobalNormAreCountedAndRed) {
  // 10000 elements, 3 of them off by 1e-3 relative: rel_l2 ~ 1.7e-5 passes a
  // loose global bound, the elementwise bound counts exactly 3.
  std::vector<double> ref(10000), cand(10000);
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = cand[i] = 1.0 + static_cast<double>(i % 7);
  for (std::size_t i : {17u, 4242u, 9999u}) cand[i] = ref[i] * (1 + 1e-3);
  Tolerance t = rel(1e-3);
  t.atol = 1e-6;
  t.rtol = 1e-5;
  const auto c = cmp(ref, cand, {100, 100}, t);
  EXPECT_EQ(c.verdict, Verdict::red);
  ASSERT_EQ(c.checks.size(), 2u);
  EXPECT_TRUE(c.checks[0].passed);  // the global norm alone would pass
  EXPECT_EQ(c.checks[1].metric, "elementwise");
  EXPECT_EQ(c.checks[1].violations, 3u);
  EXPECT_DOUBLE_EQ(c.checks[1].value, 3e-4);
  EXPECT_NE(c.reason.find("violated by 3 of 10000 element(s)"), std::string::npos) << c.reason;
  // Allowing 0.05 % of the elements to violate makes it pass.
  t.max_violation_fraction = 5e-4;
  EXPECT_EQ(cmp(ref, cand, {100, 100}, t).verdict, Verdict::green);
}

TEST(TensorCompare, MaxUlpInTheCandidateDtype) {
  // 1 + 2^-23 is 1 ULP above 1 in float32; 1 + 3 * 2^-23 is 3 ULPs.
  Tolerance t;
  t.max_ulp = 2;
  const double u = std::ldexp(1.0, -23);
  const auto c = cmp({1.0, 1.0, 2.0}, {1.0 + u, 1.0 + 3 * u, 2.0}, {3}, t, {"float32", {}});
  ASSERT_EQ(c.checks.size(), 1u);
  EXPECT_DOUBLE_EQ(c.checks[0].value, 3);
  EXPECT_EQ(c.checks[0].violations, 1u);
  EXPECT_EQ(c.verdict, Verdict::red);
  // Across zero and between signs: -0 and +0 are 0 apart; the smallest
  // positive and negative denormals are 2 apart.
  EXPECT_EQ(ulp_distance("float32", -0.0, 0.0), 0);
  EXPECT_EQ(ulp_distance("float32", std::ldexp(1.0, -149), -std::ldexp(1.0, -149)), 2);
  // bfloat16: 1 + 2^-7 is the next value after 1; a float64 reference is
  // rounded to bfloat16 first (1 + 2^-9 rounds to 1).
  EXPECT_EQ(ulp_distance("bfloat16", 1.0 + std::ldexp(1.0, -7), 1.0 + std::ldexp(1.0, -9)), 1);
  EXPECT_EQ(ulp_distance("float16", 65504.0, 65504.0), 0);
  EXPECT_EQ(ulp_distance("float16", std::ldexp(1.0, -24), 0.0), 1);
}

TEST(TensorCompare, FirstFailingSliceAlongThePartitionAxis) {
  // shape [8, 2]: axis 0 in 4 parts of 2 rows; rows 5 and 6 are wrong, so
  // part 2 (rows 4..5) is the first to fail.
  std::vector<double> ref(16, 1.0), cand(16, 1.0);
  cand[5 * 2 + 1] = 1.1;
  cand[6 * 2] = 1.2;
  Tolerance t = rel(1e-3);
  const auto c = cmp(ref, cand, {8, 2}, t, {"float32", Partition{0, 4}});
  ASSERT_EQ(c.slices.size(), 4u);
  ASSERT_TRUE(c.first_failing_slice.has_value());
  EXPECT_EQ(*c.first_failing_slice, 2u);
  EXPECT_EQ(c.slices[2].begin, 4u);
  EXPECT_EQ(c.slices[2].end, 6u);
  EXPECT_TRUE(c.slices[0].passed);
  EXPECT_FALSE(c.slices[3].passed);
  EXPECT_NEAR(c.slices[2].max_abs, 0.1, 1e-12);
  EXPECT_NE(c.reason.find("first failing slice along axis 0: 2 (positions 4..5)"), std::string::npos) << c.reason;
}

TEST(TensorCompare, DefaultTolerancesPerDtype) {
  EXPECT_DOUBLE_EQ(*default_tolerance("float32").rel_l2, 1e-5);
  EXPECT_DOUBLE_EQ(*default_tolerance("bfloat16").rel_l2, 1e-2);
  EXPECT_DOUBLE_EQ(*default_tolerance("int32").max_abs, 0);
  EXPECT_THROW(default_tolerance("complex64"), std::invalid_argument);
}

}  // namespace
}  // namespace densefeed
