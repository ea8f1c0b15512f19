// Chrome Trace Event Format files as profilers really write them: each
// robustness case is a small file that is either repaired with a counted
// warning or refused with an error naming the event and byte offset.
#include <gtest/gtest.h>
#include <zlib.h>

#include "error.h"
#include "test_support.h"
#include "trace_loader.h"

namespace densefeed {
namespace {

using densefeed::testing::TempDir;
using densefeed::testing::write_file;

class ChromeTrace : public ::testing::Test {
 protected:
  Timeline load(const std::string& text, const std::string& name = "trace.json") {
    write_file(dir_ / name, text);
    return load_trace({dir_ / name});
  }
  std::string error_of(const std::string& text) {
    write_file(dir_ / "bad.json", text);
    try {
      load_trace({dir_ / "bad.json"});
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
  // The slices of a timeline as "name start end" lines (ns), in lane order.
  static std::string slices(const Timeline& t) {
    std::string out;
    for (const auto& s : t.slices) out += t.strings[s.name] + " " + std::to_string(s.start) + " " + std::to_string(s.end) + "\n";
    return out;
  }
  static const TraceWarning* warning(const Timeline& t, const std::string& kind) {
    for (const auto& w : t.warnings) {
      if (w.kind == kind) return &w;
    }
    return nullptr;
  }
  TempDir dir_;
};

TEST_F(ChromeTrace, ArrayFormWithoutClosingBracketIsReadToTheEnd) {
  const auto t = load(R"([{"ph":"X","name":"a","ts":1,"dur":2,"pid":1,"tid":1},
{"ph":"X","name":"b","ts":4,"dur":1,"pid":1,"tid":1},
)");
  EXPECT_EQ(slices(t), "a 0 2000\nb 3000 4000\n");
  ASSERT_NE(warning(t, "missing_closing_bracket"), nullptr);
  EXPECT_EQ(warning(t, "missing_closing_bracket")->count, 1u);
  // A comma after the last event is how an unterminated array ends: not extra.
  EXPECT_EQ(warning(t, "extra_comma"), nullptr);
  EXPECT_EQ(t.files[0].format, "chrome-json");
  EXPECT_EQ(t.files[0].events, 2u);
  EXPECT_EQ(t.base_micros, 1);
}

TEST_F(ChromeTrace, ObjectFormAndDisplayTimeUnitNeverScalesTs) {
  const auto t = load(R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "H200"}],
  "displayTimeUnit": "ns",
  "traceEvents": [{"ph":"X","name":"k","ts":10,"dur":5,"pid":1,"tid":1}],
  "otherData": {"nested": [1, {"a": "]}"}]}})");
  EXPECT_EQ(slices(t), "k 0 5000\n");
  EXPECT_EQ(t.files[0].display_time_unit, "ns");
  EXPECT_TRUE(t.warnings.empty()) << t.warnings[0].message;
}

TEST_F(ChromeTrace, LeadingTrailingDoubleCommasAndEmptyEventsAreCounted) {
  const auto t = load(R"([,{"ph":"X","name":"a","ts":0,"dur":1},,{},{"ph":"X","name":"b","ts":2,"dur":1,},])");
  EXPECT_EQ(slices(t), "a 0 1000\nb 2000 3000\n");
  ASSERT_NE(warning(t, "extra_comma"), nullptr);
  // leading, doubled, trailing in the array, trailing inside the second event.
  EXPECT_EQ(warning(t, "extra_comma")->count, 4u);
  EXPECT_EQ(warning(t, "extra_comma")->first, "event 0 at byte 1");
  ASSERT_NE(warning(t, "empty_event"), nullptr);
  EXPECT_EQ(warning(t, "empty_event")->count, 1u);
  EXPECT_EQ(warning(t, "empty_event")->first, "event 1 at byte 40");
  EXPECT_EQ(warning(t, "missing_closing_bracket"), nullptr);
}

TEST_F(ChromeTrace, RawControlCharactersInStringsAreAcceptedAndCounted) {
  const auto t = load("[{\"ph\":\"X\",\"name\":\"na\tme\nx\",\"ts\":0,\"dur\":1,\"args\":{\"stack\":\"a\nb\"}}]");
  ASSERT_EQ(t.slices.size(), 1u);
  EXPECT_EQ(t.strings[t.slices[0].name], "na\tme\nx");
  ASSERT_NE(warning(t, "control_characters"), nullptr);
  EXPECT_EQ(warning(t, "control_characters")->count, 3u);
}

TEST_F(ChromeTrace, EscapesAreDecoded) {
  const auto t = load(R"([{"ph":"X","name":"a\"b\\c\u00e9\ud83d\ude00\ud83d!","ts":0,"dur":1}])");
  ASSERT_EQ(t.slices.size(), 1u);
  // A lone surrogate becomes U+FFFD, so names stay valid UTF-8.
  EXPECT_EQ(t.strings[t.slices[0].name], "a\"b\\c\xC3\xA9\xF0\x9F\x98\x80\xEF\xBF\xBD!");
}

TEST_F(ChromeTrace, EndWithoutBeginMismatchedNamesAndUnclosedBegins) {
  const auto t = load(R"([
{"ph":"B","name":"outer","ts":0,"pid":1,"tid":1},
{"ph":"B","name":"inner","ts":2,"pid":1,"tid":1},
{"ph":"E","name":"wrong","ts":4,"pid":1,"tid":1},
{"ph":"E","ts":10,"pid":1,"tid":1},
{"ph":"E","name":"stray","ts":12,"pid":1,"tid":1},
{"ph":"B","name":"never closed","ts":14,"pid":1,"tid":1}
])");
  EXPECT_EQ(slices(t), "outer 0 10000\ninner 2000 4000\n");
  EXPECT_EQ(warning(t, "mismatched_end_name")->count, 1u);
  EXPECT_EQ(warning(t, "mismatched_end_name")->first, "event 2 at byte 102");
  EXPECT_EQ(warning(t, "end_without_begin")->count, 1u);
  EXPECT_EQ(warning(t, "end_without_begin")->first, "event 4 at byte 188");
  EXPECT_EQ(warning(t, "begin_without_end")->count, 1u);
}

TEST_F(ChromeTrace, EndWithoutCategoryClosesABeginOnAnAnnotationLane) {
  const auto t = load(R"([
{"ph":"B","name":"step","cat":"user_annotation","ts":0,"pid":1,"tid":1},
{"ph":"E","ts":5,"pid":1,"tid":1}])");
  ASSERT_EQ(slices(t), "step 0 5000\n");
  EXPECT_EQ(t.lanes[t.slices[0].lane].kind, LaneKind::annotation);
  EXPECT_TRUE(t.warnings.empty());
}

TEST_F(ChromeTrace, NegativeOrMissingDurationsAndMissingTimestampsAreSkipped) {
  const auto t = load(R"([
{"ph":"X","name":"ok","ts":0,"dur":1},
{"ph":"X","name":"negative","ts":1,"dur":-1},
{"ph":"X","name":"no dur","ts":1},
{"ph":"X","name":"null dur","ts":1,"dur":null},
{"ph":"X","name":"no ts","dur":1},
{"ph":"B","name":"null ts","ts":null},
{"name":"no phase","ts":1,"dur":1}
])");
  EXPECT_EQ(slices(t), "ok 0 1000\n");
  EXPECT_EQ(warning(t, "negative_duration")->count, 1u);
  EXPECT_EQ(warning(t, "missing_duration")->count, 2u);
  EXPECT_EQ(warning(t, "missing_timestamp")->count, 2u);
  EXPECT_EQ(warning(t, "no_phase")->count, 1u);
}

TEST_F(ChromeTrace, ASliceRunningPastTheNextOnAGpuStreamIsClippedAndCounted) {
  const auto t = load(R"([
{"ph":"X","cat":"kernel","name":"k1","ts":0,"dur":10,"pid":0,"tid":7,"args":{"device":0,"stream":7}},
{"ph":"X","cat":"kernel","name":"k2","ts":5,"dur":10,"pid":0,"tid":7,"args":{"device":0,"stream":7}},
{"ph":"X","cat":"kernel","name":"k3","ts":5,"dur":2,"pid":0,"tid":8,"args":{"device":0,"stream":8}}
])");
  EXPECT_EQ(slices(t), "k1 0 5000\nk2 5000 15000\nk3 5000 7000\n");
  const auto* w = warning(t, "overlapping_on_stream");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->count, 1u);
  EXPECT_NE(w->message.find("5000 ns removed"), std::string::npos) << w->message;
  EXPECT_EQ(w->first, "event 0");
  ASSERT_EQ(t.lanes.size(), 2u);
  EXPECT_EQ(t.lanes[0].kind, LaneKind::gpu);
  EXPECT_EQ(t.lanes[0].label(), "rank 0 GPU 0 stream 7");
  EXPECT_EQ(t.lanes[1].label(), "rank 0 GPU 0 stream 8");
}

TEST_F(ChromeTrace, ASliceRunningPastItsParentOnAThreadIsClipped) {
  const auto t = load(R"([
{"ph":"X","name":"parent","ts":0,"dur":10,"pid":1,"tid":1},
{"ph":"X","name":"child","ts":5,"dur":10,"pid":1,"tid":1},
{"ph":"X","name":"next","ts":12,"dur":1,"pid":1,"tid":1}
])");
  EXPECT_EQ(slices(t), "parent 0 10000\nchild 5000 10000\nnext 12000 13000\n");
  EXPECT_EQ(warning(t, "improper_nesting")->count, 1u);
}

TEST_F(ChromeTrace, ZeroTimestampsOnAnEpochClockAreSkippedButAClockStartingAtZeroKeepsThem) {
  const auto epoch = load(R"([
{"ph":"X","name":"real","ts":1712345678901234.5,"dur":1,"pid":1,"tid":1},
{"ph":"X","name":"unknown","ts":0,"dur":1,"pid":1,"tid":1}
])");
  EXPECT_EQ(slices(epoch), "real 500 1500\n");
  EXPECT_EQ(warning(epoch, "zero_timestamp")->count, 1u);
  EXPECT_EQ(warning(epoch, "zero_timestamp")->first, "event 1");
  const auto from_zero = load(R"([{"ph":"X","name":"first","ts":0,"dur":1},{"ph":"X","name":"second","ts":5,"dur":1}])", "zero.json");
  EXPECT_EQ(slices(from_zero), "first 0 1000\nsecond 5000 6000\n");
  EXPECT_EQ(warning(from_zero, "zero_timestamp"), nullptr);
}

TEST_F(ChromeTrace, EventsOutOfOrderAreSortedAndCounted) {
  const auto t = load(R"([
{"ph":"X","name":"late","ts":20,"dur":1,"pid":1,"tid":1},
{"ph":"X","name":"early","ts":10,"dur":1,"pid":1,"tid":1},
{"ph":"E","ts":40,"pid":1,"tid":2},
{"ph":"B","name":"span","ts":30,"pid":1,"tid":2}
])");
  EXPECT_EQ(slices(t), "early 0 1000\nlate 10000 11000\nspan 20000 30000\n");
  EXPECT_EQ(warning(t, "out_of_order")->count, 1u);
  EXPECT_EQ(warning(t, "end_without_begin"), nullptr);
}

TEST_F(ChromeTrace, NumericStringsNanosecondDecimalsAndExponents) {
  const auto t = load(R"([
{"ph":"X","name":"a","ts":"1712345678901234.567","dur":"0.001","pid":1,"tid":1},
{"ph":"X","name":"b","ts":1.712345678901235e15,"dur":1e0,"pid":1,"tid":1}
])");
  EXPECT_EQ(t.base_micros, 1712345678901234);
  EXPECT_EQ(slices(t), "a 567 568\nb 1000 2000\n");
}

TEST_F(ChromeTrace, OtherPhasesAreCountedAsyncPairsAndMetadataNamesLanes) {
  const auto t = load(R"({"traceEvents": [
{"ph":"M","name":"process_name","pid":1,"args":{"name":"trainer"}},
{"ph":"M","name":"thread_name","pid":1,"tid":2,"args":{"name":"transfer"}},
{"ph":"i","name":"mark","ts":0,"pid":1,"tid":2,"s":"t"},
{"ph":"C","name":"mem","ts":1,"pid":1,"args":{"bytes":10}},
{"ph":"s","name":"flow","id":1,"ts":1,"pid":1,"tid":2},
{"ph":"f","name":"flow","id":1,"ts":2,"pid":1,"tid":2,"bp":"e"},
{"ph":"b","name":"request","cat":"rq","id":"0x1","ts":1,"pid":1,"tid":2},
{"ph":"b","name":"request","cat":"rq","id":"0x2","ts":2,"pid":1,"tid":2},
{"ph":"n","name":"step","cat":"rq","id":"0x1","ts":2,"pid":1,"tid":2},
{"ph":"e","name":"request","cat":"rq","id":"0x1","ts":3,"pid":1,"tid":2},
{"ph":"e","name":"request","cat":"rq","id":"0x2","ts":9,"pid":1,"tid":2},
{"ph":"X","name":"submit","ts":1,"dur":1,"pid":1,"tid":2},
{"ph":"P","name":"sample","ts":1,"pid":1,"tid":2}
]})");
  EXPECT_EQ(t.counts.instants, 2u);
  EXPECT_EQ(t.counts.counters, 1u);
  EXPECT_EQ(t.counts.flows, 2u);
  EXPECT_EQ(t.counts.metadata, 2u);
  EXPECT_EQ(t.counts.ignored, 1u);
  EXPECT_EQ(t.counts.events, 13u);
  // ts 0 is the instant's; the first slice's ts (1) is the base.
  EXPECT_EQ(slices(t), "submit 0 1000\nrequest 0 2000\nrequest 1000 8000\n");
  EXPECT_EQ(t.lanes[0].label(), "rank 0 pid 1 tid 2 (transfer)");
  EXPECT_EQ(t.lanes[1].kind, LaneKind::async);
}

TEST_F(ChromeTrace, KinetoCategoriesChooseGpuCpuAndAnnotationLanes) {
  const auto t = load(R"({"traceEvents": [
{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":0,"dur":10,"pid":100,"tid":100},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":2,"dur":3,"pid":100,"tid":100,"args":{"correlation":7,"stream":7}},
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","ts":0,"dur":20,"pid":100,"tid":100},
{"ph":"X","cat":"kernel","name":"gemm","ts":6,"dur":4,"pid":0,"tid":"stream 7","args":{"device":0,"stream":7,"correlation":7}},
{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD","ts":12,"dur":1,"pid":0,"tid":"stream 7"},
{"ph":"X","cat":"kernel","name":"other","ts":12,"dur":1,"pid":1,"tid":"stream 9"}
]})");
  ASSERT_EQ(t.lanes.size(), 4u);
  EXPECT_EQ(t.lanes[0].kind, LaneKind::gpu);
  EXPECT_EQ(t.lanes[0].label(), "rank 0 GPU 0 stream 7");
  EXPECT_EQ(t.lane_slices(0).size(), 2u);
  EXPECT_EQ(t.lane_slices(0)[0].correlation, 7);
  // Without args: the device is the pid, the stream the number in tid.
  EXPECT_EQ(t.lanes[1].label(), "rank 0 GPU 1 stream 9");
  EXPECT_EQ(t.lanes[2].kind, LaneKind::cpu);
  EXPECT_EQ(t.lane_slices(2).size(), 2u);
  EXPECT_EQ(t.lane_slices(2)[1].correlation, 7);
  EXPECT_EQ(t.lanes[3].kind, LaneKind::annotation);
  EXPECT_EQ(t.lanes[3].label(), "rank 0 pid 100 tid 100 annotations");
}

TEST_F(ChromeTrace, SeveralRanksFromDistributedInfoOrProcessNames) {
  write_file(dir_ / "r1.json", R"({"distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2},
  "traceEvents": [{"ph":"X","name":"a","ts":100,"dur":1,"pid":5,"tid":5}]})");
  write_file(dir_ / "r0.json", R"({"traceEvents": [{"ph":"X","name":"b","ts":101,"dur":1,"pid":5,"tid":5}],
  "distributedInfo": {"rank": 0}})");
  const auto t = load_trace({dir_ / "r1.json", dir_ / "r0.json"});
  ASSERT_EQ(t.lanes.size(), 2u);
  EXPECT_EQ(t.lanes[0].rank, 0);
  EXPECT_EQ(t.lanes[1].rank, 1);
  EXPECT_EQ(t.files[0].rank_source, "distributedInfo.rank");
  // One clock for all files: base from the first file read.
  EXPECT_EQ(slices(t), "b 1000 2000\na 0 1000\n");

  const auto merged = load(R"([
{"ph":"M","name":"process_name","pid":10,"args":{"name":"Rank 3"}},
{"ph":"M","name":"process_labels","pid":11,"args":{"labels":"rank=5"}},
{"ph":"X","name":"x","ts":0,"dur":1,"pid":10,"tid":1},
{"ph":"X","name":"y","ts":0,"dur":1,"pid":11,"tid":1},
{"ph":"X","name":"z","ts":0,"dur":1,"pid":12,"tid":1}])", "merged.json");
  ASSERT_EQ(merged.lanes.size(), 3u);
  EXPECT_EQ(merged.lanes[0].rank, 0);
  EXPECT_EQ(merged.lanes[0].pid, "12");
  EXPECT_EQ(merged.lanes[1].rank, 3);
  EXPECT_EQ(merged.lanes[2].rank, 5);

  write_file(dir_ / "plain1.json", R"([{"ph":"X","name":"p","ts":0,"dur":1}])");
  const auto by_order = load_trace({dir_ / "plain1.json", dir_ / "r0.json"});
  EXPECT_EQ(by_order.files[0].rank, 0);
  EXPECT_EQ(by_order.files[0].rank_source, "file order");
  ASSERT_NE(warning(by_order, "duplicate_rank"), nullptr);
}

TEST_F(ChromeTrace, GzipIsReadByContent) {
  const std::string text = R"({"traceEvents":[{"ph":"X","name":"z","ts":3,"dur":2}]})";
  const auto path = dir_ / "trace.json.gz";
  gzFile g = gzopen(path.c_str(), "wb");
  ASSERT_NE(g, nullptr);
  gzwrite(g, text.data(), static_cast<unsigned>(text.size()));
  gzclose(g);
  const auto t = load_trace({path});
  EXPECT_EQ(t.files[0].format, "chrome-json-gzip");
  EXPECT_EQ(t.files[0].bytes, text.size());
  EXPECT_EQ(slices(t), "z 0 2000\n");
}

TEST_F(ChromeTrace, EventsLargerThanTheReadBufferAreReadWhole) {
  std::string big(9u << 20, 'x');
  const auto t = load(R"([{"ph":"X","name":"big","ts":0,"dur":1,"args":{"blob":")" + big + R"("}},{"ph":"X","name":"after","ts":2,"dur":1}])");
  EXPECT_EQ(slices(t), "big 0 1000\nafter 2000 3000\n");
}

TEST_F(ChromeTrace, RefusesWhatItCannotRepairNamingTheEventAndByte) {
  EXPECT_NE(error_of(R"([{"ph":"X" "ts":1}])").find("field 'event 0': at byte 11: expected ',' or '}'"), std::string::npos)
      << error_of(R"([{"ph":"X" "ts":1}])");
  EXPECT_NE(error_of(R"([{"ph":"X","ts":1,"dur":1},{"ph":"X","ts":1)").find("field 'event 1': at byte 27: the file ends inside an event"),
            std::string::npos)
      << error_of(R"([{"ph":"X","ts":1,"dur":1},{"ph":"X","ts":1)");
  EXPECT_NE(error_of(R"([{"ph":"X","ts":"soon","dur":1}])").find("event 0': at byte 1: 'ts' is not a number of microseconds: 'soon'"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"ph":"X","ts":1,"dur":true}])").find("'dur' is not a number"), std::string::npos);
  EXPECT_NE(error_of("hello").find("at byte 0: expected '[' (array form) or '{' (object form), found 'h'"), std::string::npos)
      << error_of("hello");
  EXPECT_NE(error_of("").find("the file is empty"), std::string::npos);
  EXPECT_NE(error_of(R"({"otherData": {}})").find("no 'traceEvents' array"), std::string::npos);
  EXPECT_NE(error_of(R"([{"ph":"X","ts":1,"dur":1}, 42])").find("event 1': at byte 28: expected an event object"), std::string::npos)
      << error_of(R"([{"ph":"X","ts":1,"dur":1}, 42])");
  EXPECT_NE(error_of(R"([{"ph":"M","name":"process_name"}])").find("no slice to analyse: 1 event(s) read"), std::string::npos);
  EXPECT_NE(error_of(R"([{"ph":"X","ts":1,"dur":1}] trailing)").find("unexpected text after the trace"), std::string::npos);
  try {
    load_trace({dir_ / "missing.json"});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no such trace file"), std::string::npos);
  }
}

}  // namespace
}  // namespace densefeed
