// Trace checks as a manifest states them, on a CPU-only trace shaped like the
// KV-transfer case: a dispatch thread and a transfer thread whose chunk
// submissions should run while dispatch runs (times in us):
//   dispatch thread: dispatch [0,100), dispatch [200,300)
//   transfer thread: submit [50,120) [130,180) [250,260)
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "error.h"
#include "test_support.h"
#include "trace_checks.h"
#include "trace_loader.h"

namespace densefeed {
namespace {

using densefeed::testing::TempDir;
using densefeed::testing::write_file;

constexpr std::int64_t us = 1000;

std::string kv_trace() {
  return R"([
{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"dispatch"}},
{"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"transfer"}},
{"ph":"X","name":"dispatch","ts":1000,"dur":100,"pid":1,"tid":1},
{"ph":"X","name":"dispatch","ts":1200,"dur":100,"pid":1,"tid":1},
{"ph":"X","name":"submit_chunk","ts":1050,"dur":70,"pid":1,"tid":2},
{"ph":"X","name":"submit_chunk","ts":1130,"dur":50,"pid":1,"tid":2},
{"ph":"X","name":"submit_chunk","ts":1250,"dur":10,"pid":1,"tid":2},
{"ph":"X","name":"step","cat":"user_annotation","ts":1000,"dur":200,"pid":1,"tid":1}
])";
}

class TraceChecks : public ::testing::Test {
 protected:
  std::vector<TraceCheck> parse(const std::string& yaml) {
    write_file(dir_ / "checks.yaml", yaml);
    return parse_trace_checks(load_yaml_file(dir_ / "checks.yaml"), "/trace/checks");
  }
  std::string parse_error(const std::string& yaml) {
    try {
      parse(yaml);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
  std::vector<TraceCheckResult> run(const std::string& yaml) {
    write_file(dir_ / "trace.json", kv_trace());
    return run_trace_checks(load_trace({dir_ / "trace.json"}), parse(yaml));
  }
  TempDir dir_;
};

TEST_F(TraceChecks, OverlapCheckNamesTheSubmissionsThatWereNotHidden) {
  const auto r = run(R"(trace:
  checks:
    - overlap: {a: "name=submit_chunk", b: {name: "^dispatch$", lane: "dispatch"}, min_fraction: 0.8}
)");
  ASSERT_EQ(r.size(), 1u);
  // |U(A)| = 70 + 50 + 10 = 130; hidden: [50,100) + [250,260) = 60.
  ASSERT_TRUE(r[0].value);
  EXPECT_DOUBLE_EQ(*r[0].value, 60.0 / 130.0);
  EXPECT_FALSE(r[0].passed);
  EXPECT_EQ(r[0].unit, "fraction");
  EXPECT_EQ(r[0].rank, 0);
  EXPECT_EQ(r[0].check.field, "trace.checks[0].overlap");
  EXPECT_EQ(r[0].check.b->text, "name=^dispatch$;lane=dispatch");
  EXPECT_NE(r[0].reason.find("rank 0: 0.4615 of A overlaps B, below 0.8000"), std::string::npos) << r[0].reason;
  ASSERT_EQ(r[0].intervals.size(), 2u);
  EXPECT_EQ(r[0].intervals_total, 2u);
  EXPECT_EQ(r[0].intervals[0].name, "submit_chunk");
  EXPECT_EQ(r[0].intervals[0].lane, "rank 0 pid 1 tid 2 (transfer)");
  EXPECT_EQ(r[0].intervals[0].start, 130 * us);
  EXPECT_EQ(r[0].intervals[0].end, 180 * us);
  EXPECT_EQ(r[0].intervals[0].ns, 50 * us);
  EXPECT_EQ(r[0].intervals[1].start, 50 * us);
  EXPECT_EQ(r[0].intervals[1].ns, 20 * us);
}

TEST_F(TraceChecks, ExposedAndShareChecksWithWindows) {
  const auto r = run(R"(trace:
  checks:
    - exposed: {a: submit_chunk, b: "name=^dispatch$", max_ms: 0.1}
    - exposed: {a: submit_chunk, b: "name=^dispatch$", max_ms: 0.05}
    - share: {name: "name=^dispatch$", max_fraction: 0.6}
    - share: {name: "name=^dispatch$", max_fraction: 0.4, window: step}
    - overlap: {a: submit_chunk, b: "name=^dispatch$", min_fraction: 0.5, window: step}
)");
  ASSERT_EQ(r.size(), 5u);
  EXPECT_DOUBLE_EQ(*r[0].value, 0.07);  // 130 - 60 us exposed
  EXPECT_EQ(r[0].unit, "ms");
  EXPECT_TRUE(r[0].passed);
  EXPECT_FALSE(r[1].passed);
  EXPECT_NE(r[1].reason.find("exposed for 0.07 ms, above 0.05 ms"), std::string::npos) << r[1].reason;
  // The whole trace is [0,300): dispatch covers 200 of it.
  EXPECT_DOUBLE_EQ(*r[2].value, 200.0 / 300.0);
  EXPECT_FALSE(r[2].passed);
  EXPECT_EQ(r[2].intervals_total, 2u);
  EXPECT_EQ(r[2].intervals[0].ns, 100 * us);
  // Window 'step' = [0,200): dispatch covers 100.
  EXPECT_EQ(r[3].window.name, "step");
  EXPECT_EQ(r[3].window.start, 0);
  EXPECT_EQ(r[3].window.end, 200 * us);
  EXPECT_DOUBLE_EQ(*r[3].value, 0.5);
  EXPECT_FALSE(r[3].passed);
  // In [0,200): submissions 70 + 50 = 120, hidden 50.
  EXPECT_DOUBLE_EQ(*r[4].value, 50.0 / 120.0);
}

TEST_F(TraceChecks, ASelectionThatMatchesNothingFailsWithAReasonNeverPassesAsZero) {
  const auto r = run(R"(trace:
  checks:
    - exposed: {a: "name=no_such_slice", max_ms: 1000}
    - share: {name: "name=no_such_slice", max_fraction: 1}
    - overlap: {a: "name=no_such_slice", b: dispatch, min_fraction: 0}
    - overlap: {a: submit_chunk, b: "name=no_such_slice", min_fraction: 0}
    - share: {name: dispatch, max_fraction: 1, window: "no such step"}
)");
  ASSERT_EQ(r.size(), 5u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(r[i].passed) << i;
    EXPECT_FALSE(r[i].value) << i;
    EXPECT_NE(r[i].reason.find("matched no slice"), std::string::npos) << r[i].reason;
  }
  // B matching nothing leaves A fully exposed: a real 0, and the reason says why.
  EXPECT_TRUE(r[3].passed);
  EXPECT_DOUBLE_EQ(*r[3].value, 0.0);
  EXPECT_NE(r[3].reason.find("nothing can hide A"), std::string::npos) << r[3].reason;
  // A window the trace does not have: red, saying which.
  EXPECT_FALSE(r[4].passed);
  EXPECT_FALSE(r[4].value);
  EXPECT_EQ(r[4].window.name, "no such step");
  EXPECT_NE(r[4].reason.find("window: no slice is named 'no such step'"), std::string::npos) << r[4].reason;
}

TEST_F(TraceChecks, ManifestMistakesAreRefusedAtTheirLine) {
  EXPECT_NE(parse_error("trace:\n  checks:\n    - overlaps: {a: x, b: y, min_fraction: 1}\n").find("checks.yaml:3:7: field "
                                                                                                     "'trace.checks[0].overlaps': unknown check"),
            std::string::npos)
      << parse_error("trace:\n  checks:\n    - overlaps: {a: x, b: y, min_fraction: 1}\n");
  EXPECT_NE(parse_error("trace:\n  checks:\n    - overlap: {a: x, min_fraction: 1}\n").find("a overlap check needs 'b'"),
            std::string::npos);
  EXPECT_NE(parse_error("trace:\n  checks:\n    - share: {name: x, max_fraction: 1.5}\n").find("checks.yaml:3:38: field "
                                                                                          "'trace.checks[0].share.max_fraction': "
                                                                                          "expected a fraction from 0 to 1"),
            std::string::npos)
      << parse_error("trace:\n  checks:\n    - share: {name: x, max_fraction: 1.5}\n");
  EXPECT_NE(parse_error("trace:\n  checks:\n    - exposed: {a: \"name=(\", max_ms: 1}\n").find("not a valid regular expression"),
            std::string::npos);
  EXPECT_NE(parse_error("trace:\n  checks:\n    - exposed: {a: x, max_ms: 1, colour: red}\n").find("unknown key for a exposed check"),
            std::string::npos);
  EXPECT_NE(parse_error("trace:\n  checks: 3\n").find("expected a list of checks"), std::string::npos);
  EXPECT_NE(parse_error("trace:\n  command: [run]\n").find("field 'trace': expected a 'checks' list here"), std::string::npos)
      << parse_error("trace:\n  command: [run]\n");
}

TEST_F(TraceChecks, CheckTraceLoadsAndJudgesInOneCall) {
  write_file(dir_ / "trace.json", kv_trace());
  const auto checks = parse("trace:\n  checks:\n    - overlap: {a: submit_chunk, b: dispatch, min_fraction: 0.4}\n");
  const auto report = check_trace({dir_ / "trace.json"}, checks);
  EXPECT_TRUE(report.passed);
  ASSERT_EQ(report.files.size(), 1u);
  EXPECT_TRUE(report.warnings.empty());
}

}  // namespace
}  // namespace densefeed
