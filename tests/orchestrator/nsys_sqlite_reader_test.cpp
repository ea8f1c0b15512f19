// nsys SQLite exports, built here with the tables and columns nsys writes
// (and the older or thinner variants a reader meets).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "error.h"
#include "test_support.h"
#include "trace_analysis.h"
#include "trace_loader.h"

namespace densefeed {
namespace {

using densefeed::testing::TempDir;

void exec(const std::filesystem::path& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string message = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
}

// globalTid / globalPid as nsys serialises them: pid in bits 24..47, tid in 0..23.
std::int64_t gtid(std::int64_t pid, std::int64_t tid) { return (pid << 24) | tid; }

std::string slices(const Timeline& t) {
  std::string out;
  for (const auto& s : t.slices) {
    out += t.lanes[s.lane].label() + " | " + t.strings[s.name] + " " + std::to_string(s.start) + " " + std::to_string(s.end) + "\n";
  }
  return out;
}

std::uint64_t warnings_of(const Timeline& t, const std::string& kind) { return t.warning_count(kind); }

TEST(NsysSqlite, KernelsMemcpyMemsetRuntimeAndNvtxThroughStringIds) {
  TempDir dir;
  const auto db = dir / "report.sqlite";
  const std::int64_t t0 = 1'000'000'000;  // nsys times are ns from the session start
  const auto p = gtid(4242, 4242), q = gtid(4242, 4243);
  exec(db, "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
           "INSERT INTO StringIds VALUES (1, 'gemm_kernel'), (2, 'gemm'), (3, 'cudaLaunchKernel_v7000'),"
           "  (4, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)'), (5, 'ncclDevKernel_AllReduce'),"
           "  (6, 'cudaMemcpyAsync_v3020'), (7, 'step 1');"
           "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL,"
           "  contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT, globalPid INT, demangledName INT NOT NULL,"
           "  shortName INT NOT NULL, mangledName INT);"
           "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT NOT NULL, end INT NOT NULL, eventClass INT NOT NULL,"
           "  globalTid INT, correlationId INT, nameId INT NOT NULL, returnValue INT NOT NULL);"
           "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL,"
           "  contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT, globalPid INT, bytes INT NOT NULL,"
           "  copyKind INT NOT NULL);"
           "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL,"
           "  streamId INT NOT NULL, correlationId INT, value INT NOT NULL, bytes INT NOT NULL);"
           "CREATE TABLE NVTX_EVENTS (start INT NOT NULL, end INT, eventType INT NOT NULL, rangeId INT, category INT,"
           "  color INT, text TEXT, globalTid INT, endGlobalTid INT, textId INT, domainId INT);");
  const std::string t = std::to_string(t0);
  exec(db, "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES"
           "  (" + t + " + 1000, " + t + " + 1500, 1, " + std::to_string(p) + ", 11, 3, 0),"
           "  (" + t + " + 2000, " + t + " + 2300, 1, " + std::to_string(p) + ", 12, 3, 0),"
           "  (" + t + " + 3000, " + t + " + 3100, 1, " + std::to_string(q) + ", 13, 6, 0);"
           "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES"
           "  (" + t + " + 2000, " + t + " + 6000, 0, 1, 7, 11, " + std::to_string(p) + ", 1, 2, NULL),"
           "  (" + t + " + 4000, " + t + " + 9000, 0, 1, 20, 12, " + std::to_string(p) + ", 4, 5, NULL),"
           "  (0, 0, 0, 1, 7, 99, " + std::to_string(p) + ", 1, 2, NULL),"
           "  (" + t + " + 9500, " + t + " + 9400, 0, 1, 7, 98, " + std::to_string(p) + ", 1, 2, NULL);"
           "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (" + t + " + 6500, " + t + " + 6900, 0, 1, 7, 13, " + std::to_string(p) +
           ", 4096, 1);"
           "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (" + t + " + 9000, " + t + " + 9100, 0, 7, NULL, 0, 64);"
           "INSERT INTO NVTX_EVENTS VALUES"
           "  (" + t + " + 500, " + t + " + 9900, 59, NULL, NULL, NULL, NULL, " + std::to_string(p) + ", NULL, 7, 0),"
           "  (" + t + " + 600, NULL, 34, NULL, NULL, NULL, 'a mark', " + std::to_string(p) + ", NULL, NULL, 0),"
           "  (" + t + " + 700, " + t + " + 800, 60, NULL, NULL, NULL, 'async range', " + std::to_string(p) + ", NULL, NULL, 0),"
           "  (" + t + " + 0, NULL, 75, NULL, NULL, NULL, 'domain', " + std::to_string(p) + ", NULL, NULL, 0);");

  const Timeline tl = load_trace({db});
  EXPECT_EQ(tl.files[0].format, "nsys-sqlite");
  EXPECT_EQ(tl.base_micros, 1'000'000);  // the first slice's whole microsecond
  // MEMSET has no globalPid, so its lane is process 0's stream 7.
  EXPECT_EQ(slices(tl),
            "rank 0 GPU 0 stream 7 | Memset 9000 9100\n"
            "rank 0 GPU 0 stream 7 | gemm_kernel 2000 6000\n"
            "rank 0 GPU 0 stream 7 | Memcpy HtoD 6500 6900\n"
            "rank 0 GPU 0 stream 20 | ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>) 4000 9000\n"
            "rank 0 pid 4242 tid 4242 | cudaLaunchKernel_v7000 1000 1500\n"
            "rank 0 pid 4242 tid 4242 | cudaLaunchKernel_v7000 2000 2300\n"
            "rank 0 pid 4242 tid 4243 | cudaMemcpyAsync_v3020 3000 3100\n"
            "rank 0 pid 4242 tid 4242 annotations | step 1 500 9900\n"
            "rank 0 pid 4242 tid async nvtx async | async range 700 800\n");
  EXPECT_EQ(tl.counts.instants, 1u);
  EXPECT_EQ(tl.counts.ignored, 1u);
  EXPECT_EQ(warnings_of(tl, "zero_timestamp"), 1u);
  EXPECT_EQ(warnings_of(tl, "negative_duration"), 1u);
  EXPECT_EQ(warnings_of(tl, "missing_column"), 1u);  // MEMSET.globalPid
  EXPECT_EQ(warnings_of(tl, "overlapping_on_stream"), 0u);

  // Launch delay through correlationId: 500 (gemm), 1700 (nccl), 3400 (memcpy, from another thread).
  const TraceAnalysis a = analyze_trace(tl, {});
  EXPECT_EQ(a.launch_delay.gpu_with_correlation, 3u);
  EXPECT_EQ(a.launch_delay.matched, 3u);
  EXPECT_EQ(a.launch_delay.min_ns, 500);
  EXPECT_EQ(a.launch_delay.median_ns, 1700);
  EXPECT_EQ(a.launch_delay.max_ns, 3400);
  ASSERT_EQ(a.launch_delay.worst.size(), 3u);
  EXPECT_EQ(a.launch_delay.worst[0].kernel, "Memcpy HtoD");
  EXPECT_EQ(a.launch_delay.worst[0].runtime, "cudaMemcpyAsync_v3020");
  ASSERT_TRUE(a.comm_comp);
  EXPECT_EQ(a.comm_comp->a_ns, 5000);
  EXPECT_EQ(a.comm_comp->overlap_ns, 2000);
}

TEST(NsysSqlite, OlderAndThinnerSchemasUseDefaultsAndSayWhich) {
  TempDir dir;
  const auto db = dir / "old.sqlite";
  exec(db, "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
           "INSERT INTO StringIds VALUES (1, 'old_kernel');"
           "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, name INT);"
           "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (5000, 6000, 1), (7000, 7500, 42);");
  const Timeline tl = load_trace({db});
  EXPECT_EQ(slices(tl), "rank 0 GPU 0 stream 0 | old_kernel 0 1000\nrank 0 GPU 0 stream 0 | <StringIds 42> 2000 2500\n");
  // deviceId, streamId, correlationId, globalPid
  EXPECT_EQ(warnings_of(tl, "missing_column"), 4u);
}

TEST(NsysSqlite, RefusesWhatIsNotAnExport) {
  TempDir dir;
  const auto other = dir / "other.sqlite";
  exec(other, "CREATE TABLE something (x INT);");
  try {
    load_trace({other});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not an nsys export"), std::string::npos) << e.what();
  }
  const auto no_end = dir / "no_end.sqlite";
  exec(no_end, "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, nameId INT);");
  try {
    load_trace({no_end});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "CUPTI_ACTIVITY_KIND_RUNTIME.end");
  }
}

}  // namespace
}  // namespace densefeed
