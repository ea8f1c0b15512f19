#include "trace_time.h"

#include <limits>

namespace densefeed {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Magnitude split: |value| = micros + nanos / 1000 (rounded to the nanosecond).
bool parse_magnitude(std::string_view text, bool& negative, std::int64_t& micros, std::int32_t& nanos) {
  std::size_t i = 0;
  const std::size_t n = text.size();
  negative = false;
  if (i < n && (text[i] == '-' || text[i] == '+')) {
    negative = text[i] == '-';
    ++i;
  }
  const std::size_t int_begin = i;
  while (i < n && is_digit(text[i])) ++i;
  const std::string_view int_digits = text.substr(int_begin, i - int_begin);
  std::string_view frac_digits;
  if (i < n && text[i] == '.') {
    const std::size_t frac_begin = ++i;
    while (i < n && is_digit(text[i])) ++i;
    frac_digits = text.substr(frac_begin, i - frac_begin);
  }
  if (int_digits.empty() && frac_digits.empty()) return false;
  long exponent = 0;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < n && (text[i] == '-' || text[i] == '+')) exp_negative = text[i++] == '-';
    if (i >= n || !is_digit(text[i])) return false;
    while (i < n && is_digit(text[i])) {
      exponent = exponent * 10 + (text[i] - '0');
      if (exponent > 100000) return false;
      ++i;
    }
    if (exp_negative) exponent = -exponent;
  }
  if (i != n) return false;

  const long total = static_cast<long>(int_digits.size() + frac_digits.size());
  const auto digit = [&](long k) -> int {
    if (k < 0 || k >= total) return 0;
    const auto uk = static_cast<std::size_t>(k);
    return uk < int_digits.size() ? int_digits[uk] - '0' : frac_digits[uk - int_digits.size()] - '0';
  };
  // The decimal point sits before digit `point`.
  const long point = static_cast<long>(int_digits.size()) + exponent;
  std::uint64_t whole = 0;
  int significant = 0;
  for (long k = 0; k < point; ++k) {
    const int d = digit(k);
    if (significant == 0 && d == 0) continue;
    if (++significant > 18) return false;  // |value| >= 1e18 us
    whole = whole * 10 + static_cast<std::uint64_t>(d);
  }
  std::int32_t ns = 0;
  for (long k = point; k < point + 3; ++k) ns = ns * 10 + digit(k);
  // Half away from zero on the first digit below a nanosecond.
  if (digit(point + 3) >= 5) {
    if (++ns == 1000) {
      ns = 0;
      ++whole;
    }
  }
  micros = static_cast<std::int64_t>(whole);
  nanos = ns;
  return true;
}

}  // namespace

bool parse_decimal_micros(std::string_view text, DecimalMicros& out) {
  bool negative = false;
  std::int64_t micros = 0;
  std::int32_t nanos = 0;
  if (!parse_magnitude(text, negative, micros, nanos)) return false;
  if (negative && (micros != 0 || nanos != 0)) {
    if (nanos == 0) {
      out.micros = -micros;
      out.nanos = 0;
    } else {
      out.micros = -micros - 1;
      out.nanos = 1000 - nanos;
    }
  } else {
    out.micros = micros;
    out.nanos = nanos;
  }
  return true;
}

bool micros_to_relative_ns(const DecimalMicros& value, std::int64_t base_micros, std::int64_t& out_ns) {
  std::int64_t diff = 0, scaled = 0;
  if (__builtin_sub_overflow(value.micros, base_micros, &diff)) return false;
  if (__builtin_mul_overflow(diff, std::int64_t{1000}, &scaled)) return false;
  return !__builtin_add_overflow(scaled, std::int64_t{value.nanos}, &out_ns);
}

bool parse_duration_ns(std::string_view text, std::int64_t& out_ns) {
  DecimalMicros d;
  if (!parse_decimal_micros(text, d)) return false;
  return micros_to_relative_ns(d, 0, out_ns);
}

}  // namespace densefeed
