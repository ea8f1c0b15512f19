#include "tolerance.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace densefeed {
namespace {

// IEEE binary format with `mantissa` stored bits and `exponent` bits, as a
// monotonic integer: values in order map to consecutive integers.
std::int64_t ordered(double value, int mantissa, int exponent) {
  const int bias = (1 << (exponent - 1)) - 1;
  const double a = std::fabs(value);
  std::int64_t magnitude;
  if (a == 0) {
    magnitude = 0;
  } else {
    int e;
    const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
    int biased = e - 1 + bias;           // a = (2m) * 2^(e-1)
    if (biased >= 1) {
      // normal: (2m - 1) * 2^mantissa is the stored fraction
      const double frac = std::ldexp(2 * m - 1, mantissa);
      magnitude = (static_cast<std::int64_t>(biased) << mantissa) + static_cast<std::int64_t>(std::nearbyint(frac));
    } else {
      // subnormal: a / 2^(1 - bias - mantissa)
      magnitude = static_cast<std::int64_t>(std::nearbyint(std::ldexp(a, mantissa + bias - 1)));
    }
  }
  return std::signbit(value) ? -magnitude : magnitude;
}

double round_to(const std::string& dtype, double v) {
  if (dtype == "float32") return static_cast<double>(static_cast<float>(v));
  const int mantissa = dtype == "float16" ? 10 : 7;
  const int exponent = dtype == "float16" ? 5 : 8;
  const int bias = (1 << (exponent - 1)) - 1;
  if (v == 0 || !std::isfinite(v)) return v;
  int e;
  std::frexp(std::fabs(v), &e);
  // Quantum at this binade (subnormals share the smallest normal's quantum).
  const int exp = std::max(e - 1, 1 - bias);
  const double quantum = std::ldexp(1.0, exp - mantissa);
  const double rounded = std::nearbyint(v / quantum) * quantum;  // default rounding mode: to nearest, ties to even
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, -mantissa), bias);
  return std::fabs(rounded) > max_finite ? std::copysign(INFINITY, v) : rounded;
}

}  // namespace

Tolerance default_tolerance(const std::string& dtype) {
  Tolerance t;
  if (dtype == "float64") t.rel_l2 = 1e-12;
  else if (dtype == "float32") t.rel_l2 = 1e-5;
  else if (dtype == "float16") t.rel_l2 = 1e-3;
  else if (dtype == "bfloat16") t.rel_l2 = 1e-2;
  else if (dtype == "float8_e4m3fn") t.rel_l2 = 1.25e-1;
  else if (dtype == "float8_e5m2") t.rel_l2 = 2.5e-1;
  else if (dtype == "bool" || dtype.rfind("int", 0) == 0 || dtype.rfind("uint", 0) == 0) t.max_abs = 0;
  else throw std::invalid_argument("no default tolerance for dtype '" + dtype + "'");
  return t;
}

Tolerance tolerance_from_json(const nlohmann::ordered_json& j) {
  Tolerance t;
  auto opt = [&](const char* key, std::optional<double>& field) {
    if (j.contains(key)) field = j[key].get<double>();
  };
  opt("rel_l2", t.rel_l2);
  opt("max_abs", t.max_abs);
  opt("atol", t.atol);
  opt("rtol", t.rtol);
  opt("max_ulp", t.max_ulp);
  t.max_violation_fraction = j.value("max_violation_fraction", 0.0);
  return t;
}

nlohmann::ordered_json tolerance_to_json(const Tolerance& t) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (t.rel_l2) j["rel_l2"] = *t.rel_l2;
  if (t.max_abs) j["max_abs"] = *t.max_abs;
  if (t.atol) j["atol"] = *t.atol;
  if (t.rtol) j["rtol"] = *t.rtol;
  if (t.atol || t.rtol) j["max_violation_fraction"] = t.max_violation_fraction;
  if (t.max_ulp) j["max_ulp"] = *t.max_ulp;
  return j;
}

bool ulp_dtype(const std::string& dtype) { return dtype == "float32" || dtype == "float16" || dtype == "bfloat16"; }

double ulp_distance(const std::string& dtype, double candidate, double reference) {
  if (dtype == "float32") {
    // Fast path: fp32 bits in sign-magnitude order.
    const float c = static_cast<float>(candidate), r = static_cast<float>(reference);
    if (!std::isfinite(r) || !std::isfinite(c)) return INFINITY;
    auto ord = [](float f) {
      const auto b = std::bit_cast<std::uint32_t>(f);
      const std::int64_t m = b & 0x7FFFFFFFu;
      return (b >> 31) ? -m : m;
    };
    return static_cast<double>(std::llabs(ord(c) - ord(r)));
  }
  if (!std::isfinite(round_to(dtype, reference)) || !std::isfinite(candidate)) return INFINITY;
  const int mantissa = dtype == "float32" ? 23 : dtype == "float16" ? 10 : 7;
  const int exponent = dtype == "float16" ? 5 : 8;
  const double r = round_to(dtype, reference);
  return static_cast<double>(std::llabs(ordered(candidate, mantissa, exponent) - ordered(r, mantissa, exponent)));
}

}  // namespace densefeed
