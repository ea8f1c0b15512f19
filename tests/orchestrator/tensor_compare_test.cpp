#include <gtest/gtest.h>

#include <cmath>

#include "tensor_compare.h"

namespace densefeed {
namespace {

Tensor make(std::vector<double> data, std::vector<std::size_t> shape, std::string dtype = "float32") {
  return Tensor{std::move(dtype), std::move(shape), std::move(data)};
}

TEST(TensorCompare, ExactMetricsAndWorstIndex) {
  // ref = [3, 4, 0, 0], cand = [3, 4, 0, 0.5]: ||d|| = 0.5, ||ref|| = 5.
  const auto ref = make({3, 4, 0, 0}, {2, 2}, "float64");
  const auto cand = make({3, 4, 0, 0.5}, {2, 2});
  const auto c = compare_tensors(ref, cand, Tolerance{0.2, 1.0});
  EXPECT_DOUBLE_EQ(c.rel_l2, 0.1);
  EXPECT_DOUBLE_EQ(c.max_abs, 0.5);
  EXPECT_EQ(c.worst_index, (std::vector<std::size_t>{1, 1}));
  EXPECT_EQ(c.verdict, Verdict::green);
  ASSERT_EQ(c.checks.size(), 2u);
  EXPECT_TRUE(c.checks[0].passed);
}

TEST(TensorCompare, OverTheBoundIsRedAndSaysWhich) {
  const auto c = compare_tensors(make({3, 4}, {2}), make({3, 4.5}, {2}), Tolerance{0.05, std::nullopt});
  EXPECT_EQ(c.verdict, Verdict::red);
  EXPECT_EQ(c.reason, "rel_l2 1.000e-01 > bound 5.0e-02");
  EXPECT_EQ(c.checks.size(), 1u);
}

TEST(TensorCompare, NanInCandidateIsRedEvenWithoutBounds) {
  const auto c = compare_tensors(make({1, 2, 3}, {3}), make({1, NAN, 3}, {3}), Tolerance{1e30, 1e30});
  EXPECT_EQ(c.verdict, Verdict::red);
  EXPECT_EQ(c.candidate_nonfinite, 1u);
  EXPECT_TRUE(std::isnan(c.rel_l2));
  EXPECT_TRUE(std::isnan(c.max_abs));
  EXPECT_EQ(c.worst_index, (std::vector<std::size_t>{1}));
  EXPECT_FALSE(c.checks[0].passed);  // a NaN metric never passes
}

TEST(TensorCompare, InfInReferenceIsAnError) {
  const auto c = compare_tensors(make({1, INFINITY}, {2}), make({1, 2}, {2}), Tolerance{1e-3, std::nullopt});
  EXPECT_EQ(c.verdict, Verdict::error);
  EXPECT_EQ(c.reference_nonfinite, 1u);
}

TEST(TensorCompare, ShapeMismatchIsRed) {
  const auto c = compare_tensors(make({1, 2, 3, 4}, {2, 2}), make({1, 2, 3, 4}, {4}), Tolerance{1e-3, std::nullopt});
  EXPECT_EQ(c.verdict, Verdict::red);
  EXPECT_EQ(c.reason, "shape [4] differs from the reference's [2, 2]");
}

TEST(TensorCompare, ZeroReference) {
  EXPECT_EQ(compare_tensors(make({0, 0}, {2}), make({0, 0}, {2}), Tolerance{1e-6, std::nullopt}).verdict, Verdict::green);
  const auto c = compare_tensors(make({0, 0}, {2}), make({0, 1e-30}, {2}), Tolerance{1e-6, std::nullopt});
  EXPECT_TRUE(std::isinf(c.rel_l2));
  EXPECT_EQ(c.verdict, Verdict::red);
}

}  // namespace
}  // namespace densefeed
