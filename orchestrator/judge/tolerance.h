// Error bounds of one gate output, the default bounds per dtype, and the ULP
// distance used by the max-ULP bound.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace densefeed {

// Every bound given must hold; an absent bound is not checked.
//   rel_l2   ||c - r||_2 / ||r||_2 (dimensionless, fp64 accumulation)
//   max_abs  max |c - r| (the output's units)
//   atol, rtol  elementwise |c - r| <= atol + rtol * |r|, at most
//            `max_violation_fraction` of the elements may violate it (default 0)
//   max_ulp  max distance in units in the last place of the candidate's dtype
//            (float32, float16, bfloat16), the reference rounded to that dtype
struct Tolerance {
  std::optional<double> rel_l2;
  std::optional<double> max_abs;
  std::optional<double> atol;
  std::optional<double> rtol;
  double max_violation_fraction = 0;
  std::optional<double> max_ulp;

  bool has_absolute_bound() const { return max_abs.has_value() || (atol.has_value() && *atol > 0); }
  bool empty() const { return !rel_l2 && !max_abs && !atol && !rtol && !max_ulp; }
};

// Default bound for outputs of `dtype` when a gate gives none (also used as
// the relative bound when a reference is too small for its absolute bounds).
// Sources: the unit roundoff u of each format (IEEE 754-2019 for binary64/32/16;
// bfloat16 u = 2^-8; OCP OFP8 spec for E4M3 u = 2^-4 and E5M2 u = 2^-3) times a
// margin for accumulated rounding, and the field's working figures: fp32
// arithmetic well under 1e-5 relative, TF32 near 3e-4, bf16 between 1e-3 and 1e-2.
//   float64 rel_l2 1e-12   float32 rel_l2 1e-5    float16 rel_l2 1e-3
//   bfloat16 rel_l2 1e-2   float8_e4m3fn rel_l2 1.25e-1   float8_e5m2 rel_l2 2.5e-1
//   integers and bool: max_abs 0 (exact)
// Throws std::invalid_argument for an unknown dtype.
Tolerance default_tolerance(const std::string& dtype);

// Reads {rel_l2, max_abs, atol, rtol, max_violation_fraction, max_ulp} (all
// optional) as the gate schema describes them.
Tolerance tolerance_from_json(const nlohmann::ordered_json& j);
nlohmann::ordered_json tolerance_to_json(const Tolerance& t);

// True for the dtypes max_ulp applies to.
bool ulp_dtype(const std::string& dtype);

// Distance in ULPs of `dtype` between `candidate` (a value of that dtype) and
// `reference` rounded to nearest-even in that dtype: the number of
// representable values between them (0 when equal; +0 and -0 are equal).
// Both must be finite. For float32, float16, bfloat16.
double ulp_distance(const std::string& dtype, double candidate, double reference);

}  // namespace densefeed
