// `densefeed trace analyze` as a process on real files: text, JSON that
// validates against schemas/trace-report.schema.json, checks and exit codes.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include "schema_validator.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;

// Kineto-style, one rank: comm kernel [50,250) us, gemms [25,125) and [200,300),
// launches with correlation ids, a ProfilerStep annotation [100,200).
const char* kTrace = R"({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
"traceEvents": [
{"ph":"M","name":"thread_name","pid":100,"tid":100,"args":{"name":"python"}},
{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1712345678000000,"dur":30,"pid":100,"tid":100},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":1712345678000010,"dur":10,"pid":100,"tid":100,"args":{"correlation":1}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":1712345678000045,"dur":5,"pid":100,"tid":100,"args":{"correlation":3}},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":1712345678000160,"dur":10,"pid":100,"tid":100,"args":{"correlation":2}},
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","ts":1712345678000100,"dur":100,"pid":100,"tid":100},
{"ph":"X","cat":"kernel","name":"gemm","ts":1712345678000025,"dur":100,"pid":0,"tid":7,"args":{"device":0,"stream":7,"correlation":1}},
{"ph":"X","cat":"kernel","name":"gemm","ts":1712345678000200,"dur":100,"pid":0,"tid":7,"args":{"device":0,"stream":7,"correlation":2}},
{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32","ts":1712345678000050,"dur":200,"pid":0,"tid":20,"args":{"device":0,"stream":20,"correlation":3}},
{"ph":"X","cat":"kernel","name":"gemm","ts":1712345678000290,"dur":5,"pid":0,"tid":7,"args":{"device":0,"stream":7}}
)";

class TraceCli : public ::testing::Test {
 protected:
  testing::CliResult densefeed(std::vector<std::string> args) { return testing::run_cli(kExe, args, dir_.path()); }
  std::string trace_file() {
    testing::write_file(dir_ / "rank0.json", kTrace);
    return (dir_ / "rank0.json").string();
  }
  testing::TempDir dir_;
  const SchemaValidator schema_{kRoot / "schemas" / "trace-report.schema.json"};
};

TEST_F(TraceCli, TextReportShowsOverlapExposedSlicesAndRepairs) {
  const auto r = densefeed({"trace", "analyze", trace_file()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // The last gemm ran into the one before it on stream 7: clipped and counted.
  EXPECT_NE(r.out.find("overlapping_on_stream"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("overlap 62.50 % of A (0.125 ms of 0.200 ms), exposed 0.075 ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("75.000 us exposed — ncclDevKernel_AllReduce_Sum_f32 [0.050 ms .. 0.250 ms] on rank 0 GPU 0 stream 20, event 8"),
            std::string::npos)
      << r.out;
  // The missing closing bracket of the array and object is repaired, not refused.
  EXPECT_NE(r.out.find("missing_closing_bracket"), std::string::npos) << r.out;
}

TEST_F(TraceCli, JsonValidatesAgainstTheSchemaWithExactFigures) {
  const auto r = densefeed({"trace", "analyze", trace_file(), "--json", "--overlap", "name=^gemm$", "nccl", "--top", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(schema_.errors(doc), std::vector<std::string>{});
  EXPECT_EQ(doc["base_us"], 1712345678000000);
  // The last gemm ends at 295 us; the one before it was clipped to 290.
  EXPECT_EQ(doc["window"]["duration_ns"], 295000);
  EXPECT_EQ(doc["comm_comp_overlap"]["overlap_ns"], 125000);
  EXPECT_EQ(doc["comm_comp_overlap"]["fraction"], 0.625);
  // gemm [25,125) + [200,295) = 195 us; nccl covers [50,125) + [200,250).
  EXPECT_EQ(doc["overlaps"][0]["a_ns"], 195000);
  EXPECT_EQ(doc["overlaps"][0]["overlap_ns"], 125000);
  EXPECT_EQ(doc["launch_delay"]["matched"], 3);
  EXPECT_EQ(doc["launch_delay"]["max_ns"], 30000);
  const auto& b = doc["breakdown"]["ranks"][0];
  EXPECT_EQ(b["compute_ns"].get<std::int64_t>() + b["communication_ns"].get<std::int64_t>() + b["transfer_ns"].get<std::int64_t>() +
                b["other_ns"].get<std::int64_t>() + b["idle_ns"].get<std::int64_t>(),
            295000);
  EXPECT_EQ(doc["warnings"][0]["kind"], "missing_closing_bracket");
  bool clipped = false;
  for (const auto& w : doc["warnings"]) clipped = clipped || (w["kind"] == "overlapping_on_stream" && w["count"] == 1);
  EXPECT_TRUE(clipped) << doc["warnings"].dump();
}

TEST_F(TraceCli, WindowAndGzipAndNsys) {
  const std::string text = kTrace;
  gzFile g = gzopen((dir_ / "rank0.json.gz").c_str(), "wb");
  gzwrite(g, text.data(), static_cast<unsigned>(text.size()));
  gzclose(g);
  const auto r = densefeed({"trace", "analyze", (dir_ / "rank0.json.gz").string(), "--window", "ProfilerStep#1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(schema_.errors(doc), std::vector<std::string>{});
  EXPECT_EQ(doc["files"][0]["format"], "chrome-json-gzip");
  EXPECT_EQ(doc["window"]["name"], "ProfilerStep#1");
  EXPECT_EQ(doc["window"]["start_ns"], 100000);
  EXPECT_EQ(doc["comm_comp_overlap"]["a_ns"], 100000);
  EXPECT_EQ(doc["comm_comp_overlap"]["overlap_ns"], 25000);

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "report.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
                         "INSERT INTO StringIds VALUES (1, 'gemm'), (2, 'ncclKernel_AllReduce_RING_LL_Sum_float');"
                         "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, streamId INT, correlationId INT,"
                         "  globalPid INT, demangledName INT);"
                         "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1000, 2000, 0, 7, 1, 0, 1), (1500, 3000, 0, 8, 2, 0, 2);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  const auto n = densefeed({"trace", "analyze", (dir_ / "report.sqlite").string(), "--json"});
  ASSERT_EQ(n.exit_code, 0) << n.out << n.err;
  const auto ndoc = nlohmann::json::parse(n.out);
  EXPECT_EQ(schema_.errors(ndoc), std::vector<std::string>{});
  EXPECT_EQ(ndoc["files"][0]["format"], "nsys-sqlite");
  EXPECT_EQ(ndoc["comm_comp_overlap"]["a_ns"], 1500);
  EXPECT_EQ(ndoc["comm_comp_overlap"]["overlap_ns"], 500);
}

TEST_F(TraceCli, ChecksAreRedWithTheSlicesThatFailedThem) {
  const auto trace = trace_file();
  testing::write_file(dir_ / "red.yaml", "checks:\n  - overlap: {a: \"nccl;lane=gpu\", b: \"class=compute\", min_fraction: 0.9}\n"
                                         "  - share: {name: gemm, max_fraction: 0.9}\n");
  const auto red = densefeed({"trace", "analyze", trace, "--checks", (dir_ / "red.yaml").string(), "--json"});
  ASSERT_EQ(red.exit_code, 1) << red.out << red.err;
  const auto doc = nlohmann::json::parse(red.out);
  EXPECT_EQ(schema_.errors(doc), std::vector<std::string>{});
  EXPECT_EQ(doc["verdict"], "red");
  EXPECT_EQ(doc["checks"][0]["verdict"], "red");
  EXPECT_EQ(doc["checks"][0]["value"], 0.625);
  EXPECT_EQ(doc["checks"][0]["intervals"][0]["name"], "ncclDevKernel_AllReduce_Sum_f32");
  EXPECT_EQ(doc["checks"][0]["intervals"][0]["ns"], 75000);
  EXPECT_EQ(doc["checks"][1]["verdict"], "green");

  testing::write_file(dir_ / "green.yaml", "- overlap: {a: \"nccl;lane=gpu\", b: \"class=compute\", min_fraction: 0.6}\n");
  const auto green = densefeed({"trace", "analyze", trace, "--checks", (dir_ / "green.yaml").string()});
  EXPECT_EQ(green.exit_code, 0) << green.out << green.err;
  EXPECT_NE(green.out.find("green overlap name=nccl;lane=gpu with class=compute: 0.6250 (bound >= 0.6000)"), std::string::npos)
      << green.out;
}

TEST_F(TraceCli, BadInputIsExitTwoNamingFileAndPlace) {
  testing::write_file(dir_ / "bad.json", R"([{"ph":"X","ts":1,"dur":1},{"ph":"X" "ts":2}])");
  const auto bad = densefeed({"trace", "analyze", (dir_ / "bad.json").string(), "--json"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  const auto doc = nlohmann::json::parse(bad.out);
  EXPECT_EQ(doc["verdict"], "bad-input");
  EXPECT_EQ(doc["details"]["field"], "event 1");
  EXPECT_EQ(doc["details"]["message"], "at byte 37: expected ',' or '}' between the fields of an event");
  EXPECT_NE(bad.err.find("bad.json"), std::string::npos) << bad.err;

  const auto trace = trace_file();
  const auto none = densefeed({"trace", "analyze", trace, "--overlap", "name=nothing_like_this", "gemm"});
  EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
  EXPECT_NE(none.err.find("matched no slice"), std::string::npos) << none.err;

  const auto window = densefeed({"trace", "analyze", trace, "--window", "ProfilerStep#7"});
  EXPECT_EQ(window.exit_code, 2);
  EXPECT_NE(window.err.find("no slice is named 'ProfilerStep#7'"), std::string::npos) << window.err;

  const auto selector = densefeed({"trace", "analyze", trace, "--overlap", "class=fast", "gemm"});
  EXPECT_EQ(selector.exit_code, 2);
  EXPECT_NE(selector.err.find("expected compute, communication, transfer or other"), std::string::npos) << selector.err;

  const auto odd = densefeed({"trace", "analyze", trace, "--overlap", "gemm"});
  EXPECT_EQ(odd.exit_code, 2) << odd.err;

  const auto missing = densefeed({"trace", "analyze", (dir_ / "nope.json").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.json: no such trace file"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace densefeed
