// Trace timestamps from their decimal text to integers, exactly. Chrome trace
// files give `ts` and `dur` in microseconds as decimal numbers (PyTorch >= 2.3
// writes three decimals, i.e. nanoseconds, on an epoch clock of ~1.7e15 us):
// a double holds only ~16 significant digits, so converting through one would
// lose the nanoseconds. We split the text into whole microseconds and
// nanoseconds instead.
#pragma once

#include <cstdint>
#include <string_view>

namespace densefeed {

// value = micros + nanos / 1000 exactly (to the nanosecond), 0 <= nanos < 1000
// (floor split, so -1.5 is micros -2, nanos 500).
struct DecimalMicros {
  std::int64_t micros = 0;
  std::int32_t nanos = 0;
};

// Parses a JSON number ("1712345678901.234", "-3", "12", "1.5e3", "2E-3") of
// microseconds. Digits below a nanosecond are rounded half away from zero.
// Returns false for anything that is not a number (empty, "abc", "1.2.3", a
// sign alone) or whose magnitude is 1e18 us or more.
bool parse_decimal_micros(std::string_view text, DecimalMicros& out);

// (value - base_micros) in nanoseconds; false when it does not fit an int64.
bool micros_to_relative_ns(const DecimalMicros& value, std::int64_t base_micros, std::int64_t& out_ns);

// A duration ("12.5" us -> 12500 ns); false as for parse_decimal_micros or
// when the result does not fit an int64. Negative durations parse (callers
// decide what they mean).
bool parse_duration_ns(std::string_view text, std::int64_t& out_ns);

}  // namespace densefeed
