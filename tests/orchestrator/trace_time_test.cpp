#include <gtest/gtest.h>

#include "trace_time.h"

namespace densefeed {
namespace {

DecimalMicros parse(const char* text) {
  DecimalMicros d;
  EXPECT_TRUE(parse_decimal_micros(text, d)) << text;
  return d;
}

TEST(TraceTime, SplitsDecimalMicrosecondsIntoWholeMicrosAndNanos) {
  EXPECT_EQ(parse("1712345678901.234").micros, 1712345678901);
  EXPECT_EQ(parse("1712345678901.234").nanos, 234);
  EXPECT_EQ(parse("12").micros, 12);
  EXPECT_EQ(parse("12").nanos, 0);
  EXPECT_EQ(parse("0.5").nanos, 500);
  EXPECT_EQ(parse("1.5e3").micros, 1500);
  EXPECT_EQ(parse("1.5e3").nanos, 0);
  EXPECT_EQ(parse("2E-3").micros, 0);
  EXPECT_EQ(parse("2E-3").nanos, 2);
  EXPECT_EQ(parse("17e-1").micros, 1);
  EXPECT_EQ(parse("17e-1").nanos, 700);
}

TEST(TraceTime, NegativeValuesSplitByFloor) {
  EXPECT_EQ(parse("-1.5").micros, -2);
  EXPECT_EQ(parse("-1.5").nanos, 500);
  EXPECT_EQ(parse("-3").micros, -3);
  EXPECT_EQ(parse("-3").nanos, 0);
  EXPECT_EQ(parse("-0").micros, 0);
}

TEST(TraceTime, RoundsBelowANanosecondHalfAwayFromZero) {
  EXPECT_EQ(parse("1.2345").nanos, 235);
  EXPECT_EQ(parse("1.2344999").nanos, 234);
  EXPECT_EQ(parse("0.0009999").nanos, 1);
  EXPECT_EQ(parse("999.9995").micros, 1000);
  EXPECT_EQ(parse("999.9995").nanos, 0);
  EXPECT_EQ(parse("-0.0015").micros, -1);
  EXPECT_EQ(parse("-0.0015").nanos, 998);
}

TEST(TraceTime, RefusesWhatIsNotANumber) {
  DecimalMicros d;
  for (const char* bad : {"", "-", "abc", "1.2.3", "1e", "1e+", ".", "1 ", " 1", "0x10", "1e100001", "1e30", "1234567890123456789"}) {
    EXPECT_FALSE(parse_decimal_micros(bad, d)) << bad;
  }
}

TEST(TraceTime, EpochTimesKeepTheirNanosecondsAgainstABase) {
  // Kineto's epoch microseconds (~1.7e15): a double steps by 0.25 us there,
  // so 1712345678901234.567 would become ...234.5 (500 ns); the text gives 567.
  std::int64_t ns = 0;
  ASSERT_TRUE(micros_to_relative_ns(parse("1712345678901234.567"), 1712345678901234, ns));
  EXPECT_EQ(ns, 567);
  ASSERT_TRUE(micros_to_relative_ns(parse("1712345678901.237"), 1712345678900, ns));
  EXPECT_EQ(ns, 1237);
  ASSERT_TRUE(micros_to_relative_ns(parse("1712345678899.999"), 1712345678900, ns));
  EXPECT_EQ(ns, -1);
  // A timestamp 0 against an epoch base still fits int64 ns.
  ASSERT_TRUE(micros_to_relative_ns(parse("0"), 1712345678900, ns));
  EXPECT_EQ(ns, -1712345678900000);
  EXPECT_FALSE(micros_to_relative_ns(parse("999999999999999999"), -999999999999999999, ns));
}

TEST(TraceTime, Durations) {
  std::int64_t ns = 0;
  ASSERT_TRUE(parse_duration_ns("12.5", ns));
  EXPECT_EQ(ns, 12500);
  ASSERT_TRUE(parse_duration_ns("-1", ns));
  EXPECT_EQ(ns, -1000);
  EXPECT_FALSE(parse_duration_ns("x", ns));
}

}  // namespace
}  // namespace densefeed
