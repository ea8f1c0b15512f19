// The analyses on a small hand-built Kineto-style trace whose answers are
// known exactly (times below in us from the first event):
//   CPU thread 100:  aten::mm [0,30) > cudaLaunchKernel [10,20) corr 1
//                    nccl:all_reduce [40,60) > cudaLaunchKernel [45,50) corr 3
//                    aten::mm [150,180) > cudaLaunchKernel [160,170) corr 2
//                    cudaMemcpyAsync [305,308) corr 4, aten::relu [350,360)
//   annotations:     ProfilerStep#1 [100,200)
//   GPU 0 stream 7:  gemm [25,125) corr 1, gemm [200,300) corr 2, Memcpy HtoD [310,320) corr 4
//   GPU 0 stream 20: ncclDevKernel_AllReduce_Sum_f32 [50,250) corr 3
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "error.h"
#include "test_support.h"
#include "trace_analysis.h"
#include "trace_loader.h"

namespace densefeed {
namespace {

using densefeed::testing::TempDir;
using densefeed::testing::write_file;

constexpr std::int64_t us = 1000;

std::string x(const char* cat, const char* name, long ts, long dur, const char* pid, const char* tid, const std::string& args = "") {
  return fmt::format(R"({{"ph":"X","cat":"{}","name":"{}","ts":{},"dur":{},"pid":{},"tid":{}{}}},)", cat, name,
                     1712345678000000L + ts, dur, pid, tid, args.empty() ? "" : ",\"args\":{" + args + "}");
}

std::string kineto_trace(int rank, long shift = 0) {
  std::string e;
  e += x("cpu_op", "aten::mm", 0, 30, "100", "100");
  e += x("cuda_runtime", "cudaLaunchKernel", 10, 10, "100", "100", R"("correlation":1)");
  e += x("cpu_op", "nccl:all_reduce", 40, 20, "100", "100");
  e += x("cuda_runtime", "cudaLaunchKernel", 45, 5, "100", "100", R"("correlation":3)");
  e += x("cpu_op", "aten::mm", 150, 30, "100", "100");
  e += x("cuda_runtime", "cudaLaunchKernel", 160, 10, "100", "100", R"("correlation":2)");
  e += x("cuda_runtime", "cudaMemcpyAsync", 305, 3, "100", "100", R"("correlation":4)");
  e += x("cpu_op", "aten::relu", 350, 10, "100", "100");
  e += x("user_annotation", "ProfilerStep#1", 100, 100, "100", "100");
  e += x("kernel", "gemm", 25, 100, "0", "7", R"("device":0,"stream":7,"correlation":1)");
  e += x("kernel", "gemm", 200, 100, "0", "7", R"("device":0,"stream":7,"correlation":2)");
  e += x("gpu_memcpy", "Memcpy HtoD", 310, 10, "0", "7", R"("device":0,"stream":7,"correlation":4)");
  e += x("kernel", "ncclDevKernel_AllReduce_Sum_f32", 50 + shift, 200, "0", "20", R"("device":0,"stream":20,"correlation":3)");
  e.pop_back();
  return fmt::format(R"({{"distributedInfo": {{"rank": {}}}, "traceEvents": [{}]}})", rank, e);
}

class TraceAnalysisTest : public ::testing::Test {
 protected:
  Timeline load(const std::string& text, const std::string& name = "rank0.json") {
    write_file(dir_ / name, text);
    return load_trace({dir_ / name});
  }
  TempDir dir_;
};

TEST_F(TraceAnalysisTest, WhereTheTimeWentSumsToTheWindowByPrecedence) {
  const auto t = load(kineto_trace(0));
  const auto a = analyze_trace(t, {});
  EXPECT_EQ(a.window.start, 0);
  EXPECT_EQ(a.window.end, 360 * us);
  ASSERT_EQ(a.breakdown.size(), 1u);
  const auto& b = a.breakdown[0];
  EXPECT_EQ(b.ns[static_cast<int>(SliceClass::compute)], 200 * us);        // the two gemms
  EXPECT_EQ(b.ns[static_cast<int>(SliceClass::communication)], 75 * us);   // nccl not under a gemm: [125,200)
  EXPECT_EQ(b.ns[static_cast<int>(SliceClass::transfer)], 13 * us);        // cudaMemcpyAsync + Memcpy HtoD
  EXPECT_EQ(b.ns[static_cast<int>(SliceClass::other)], 35 * us);           // host alone: [0,25) and aten::relu
  EXPECT_EQ(b.ns[static_cast<int>(SliceClass::idle)], 37 * us);            // [300,305) [308,310) [320,350)
  std::int64_t sum = 0;
  for (auto v : b.ns) sum += v;
  EXPECT_EQ(sum, b.window_ns);
  EXPECT_TRUE(a.warnings.empty());
}

TEST_F(TraceAnalysisTest, CommunicationComputationOverlapAsHtaDefinesIt) {
  const auto t = load(kineto_trace(0));
  const auto a = analyze_trace(t, {});
  ASSERT_TRUE(a.comm_comp);
  const auto& o = *a.comm_comp;
  EXPECT_EQ(o.a.text, "lane=gpu;class=communication");
  EXPECT_EQ(o.a_ns, 200 * us);
  EXPECT_EQ(o.overlap_ns, 125 * us);  // [50,125) + [200,250)
  EXPECT_EQ(o.exposed_ns, 75 * us);
  ASSERT_TRUE(o.fraction);
  EXPECT_DOUBLE_EQ(*o.fraction, 0.625);
  ASSERT_EQ(o.exposed.size(), 1u);
  EXPECT_EQ(o.exposed[0].name, "ncclDevKernel_AllReduce_Sum_f32");
  EXPECT_EQ(o.exposed[0].lane, "rank 0 GPU 0 stream 20");
  EXPECT_EQ(o.exposed[0].start, 50 * us);
  EXPECT_EQ(o.exposed[0].end, 250 * us);
  EXPECT_EQ(o.exposed[0].ns, 75 * us);
  EXPECT_EQ(o.exposed[0].event, 12u);
}

TEST_F(TraceAnalysisTest, OverlapQueriesBySelectorAndAnEmptyAIsNoFigure) {
  const auto t = load(kineto_trace(0));
  AnalysisOptions opt;
  opt.overlaps.emplace_back(SliceSelector::parse("nccl;lane=gpu", "q"), SliceSelector::parse("name=^gemm$", "q"));
  opt.overlaps.emplace_back(SliceSelector::parse("name=no such kernel", "q"), SliceSelector::parse("gemm", "q"));
  opt.overlaps.emplace_back(SliceSelector::parse("gemm", "q"), SliceSelector::parse("cat=no such category", "q"));
  const auto a = analyze_trace(t, opt);
  ASSERT_EQ(a.overlaps.size(), 3u);
  EXPECT_DOUBLE_EQ(*a.overlaps[0].fraction, 0.625);
  EXPECT_FALSE(a.overlaps[1].fraction);
  EXPECT_EQ(a.overlaps[1].notes.size(), 1u);
  EXPECT_NE(a.overlaps[1].notes[0].find("matched no slice"), std::string::npos);
  // B empty: A is fully exposed, and the result says why.
  EXPECT_DOUBLE_EQ(*a.overlaps[2].fraction, 0.0);
  EXPECT_EQ(a.overlaps[2].exposed_count, 2u);
  EXPECT_NE(a.overlaps[2].notes[0].find("nothing can hide A"), std::string::npos);
}

TEST_F(TraceAnalysisTest, WindowRestrictsEveryAnalysisToTheNamedSlice) {
  const auto t = load(kineto_trace(0));
  AnalysisOptions opt;
  opt.window = "ProfilerStep#1";
  const auto a = analyze_trace(t, opt);
  EXPECT_EQ(a.window.start, 100 * us);
  EXPECT_EQ(a.window.end, 200 * us);
  EXPECT_EQ(a.window.slices, 1u);
  EXPECT_EQ(a.comm_comp->a_ns, 100 * us);
  EXPECT_EQ(a.comm_comp->overlap_ns, 25 * us);  // gemm until 125
  EXPECT_EQ(a.breakdown[0].ns[static_cast<int>(SliceClass::compute)], 25 * us);
  EXPECT_EQ(a.breakdown[0].ns[static_cast<int>(SliceClass::communication)], 75 * us);
  EXPECT_EQ(a.breakdown[0].ns[static_cast<int>(SliceClass::idle)], 0);
  opt.window = "ProfilerStep#9";
  try {
    analyze_trace(t, opt);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no slice is named 'ProfilerStep#9'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'ProfilerStep#1'"), std::string::npos) << e.what();
  }
}

TEST_F(TraceAnalysisTest, LanesBusyTimeAndGaps) {
  const auto t = load(kineto_trace(0));
  const auto a = analyze_trace(t, {});
  ASSERT_EQ(a.lanes.size(), 4u);
  EXPECT_EQ(a.lanes[0].label, "rank 0 GPU 0 stream 7");
  EXPECT_EQ(a.lanes[0].slices, 3u);
  EXPECT_EQ(a.lanes[0].busy_ns, 210 * us);
  EXPECT_EQ(a.lanes[0].gaps, 2u);
  EXPECT_EQ(a.lanes[0].gap_ns, 85 * us);
  EXPECT_EQ(a.lanes[0].largest_gap_ns, 75 * us);
  EXPECT_EQ(a.lanes[0].largest_gap_start, 125 * us);
  EXPECT_EQ(a.lanes[1].label, "rank 0 GPU 0 stream 20");
  EXPECT_EQ(a.lanes[1].gaps, 0u);
  EXPECT_EQ(a.lanes[2].label, "rank 0 pid 100 tid 100");
  EXPECT_EQ(a.lanes[2].slices, 8u);
  EXPECT_EQ(a.lanes[2].busy_ns, 93 * us);
  EXPECT_EQ(a.lanes[2].gaps, 4u);
  EXPECT_EQ(a.lanes[2].gap_ns, 267 * us);
  EXPECT_EQ(a.lanes[2].largest_gap_ns, 125 * us);
  EXPECT_EQ(a.lanes[2].largest_gap_start, 180 * us);
  EXPECT_DOUBLE_EQ(a.lanes[2].busy_fraction, 93.0 / 360.0);
  EXPECT_EQ(a.lanes[3].kind, LaneKind::annotation);
}

TEST_F(TraceAnalysisTest, TopNamesByExclusiveTime) {
  const auto t = load(kineto_trace(0));
  AnalysisOptions opt;
  opt.top = 3;
  const auto a = analyze_trace(t, opt);
  ASSERT_EQ(a.top.size(), 3u + 3u + 1u);
  EXPECT_EQ(a.top[0].name, "gemm");
  EXPECT_EQ(a.top[0].kind, LaneKind::gpu);
  EXPECT_EQ(a.top[0].count, 2u);
  EXPECT_EQ(a.top[0].exclusive_ns, 200 * us);
  EXPECT_EQ(a.top[1].name, "ncclDevKernel_AllReduce_Sum_f32");
  EXPECT_EQ(a.top[1].slice_class, SliceClass::communication);
  EXPECT_EQ(a.top[2].name, "Memcpy HtoD");
  EXPECT_EQ(a.top[2].slice_class, SliceClass::transfer);
  EXPECT_EQ(a.top[3].name, "aten::mm");
  EXPECT_EQ(a.top[3].inclusive_ns, 60 * us);
  EXPECT_EQ(a.top[3].exclusive_ns, 40 * us);  // minus the launches inside
  EXPECT_EQ(a.top[4].name, "cudaLaunchKernel");
  EXPECT_EQ(a.top[4].count, 3u);
  EXPECT_EQ(a.top[4].exclusive_ns, 25 * us);
  EXPECT_EQ(a.top[5].name, "nccl:all_reduce");
  EXPECT_EQ(a.top[5].exclusive_ns, 15 * us);
  EXPECT_EQ(a.top[6].name, "ProfilerStep#1");
  EXPECT_EQ(a.top[6].kind, LaneKind::annotation);
}

TEST_F(TraceAnalysisTest, LaunchDelayThroughCorrelationIds) {
  const auto t = load(kineto_trace(0));
  AnalysisOptions opt;
  opt.list_limit = 2;
  const auto a = analyze_trace(t, opt);
  const auto& ld = a.launch_delay;
  EXPECT_EQ(ld.gpu_with_correlation, 4u);
  EXPECT_EQ(ld.matched, 4u);
  // delays 5, 30, 0, 2 us
  EXPECT_EQ(ld.min_ns, 0);
  EXPECT_EQ(ld.median_ns, 2 * us);
  EXPECT_EQ(ld.p90_ns, 30 * us);
  EXPECT_EQ(ld.max_ns, 30 * us);
  EXPECT_DOUBLE_EQ(ld.mean_ns, 37.0 * us / 4);
  EXPECT_EQ(ld.negative, 0u);
  ASSERT_EQ(ld.worst.size(), 2u);
  EXPECT_EQ(ld.worst[0].kernel, "gemm");
  EXPECT_EQ(ld.worst[0].correlation, 2);
  EXPECT_EQ(ld.worst[0].runtime_end, 170 * us);
  EXPECT_EQ(ld.worst[0].kernel_start, 200 * us);
}

TEST_F(TraceAnalysisTest, OverlapIsPerRankAndSummedOverRanks) {
  // Rank 1's collective starts 100 us later: [150,350) against gemms [25,125) [200,300).
  write_file(dir_ / "r0.json", kineto_trace(0));
  write_file(dir_ / "r1.json", kineto_trace(1, 100));
  const auto t = load_trace({dir_.path()});
  const auto a = analyze_trace(t, {});
  ASSERT_TRUE(a.comm_comp);
  ASSERT_EQ(a.comm_comp->ranks.size(), 2u);
  EXPECT_DOUBLE_EQ(*a.comm_comp->ranks[0].fraction, 0.625);
  EXPECT_DOUBLE_EQ(*a.comm_comp->ranks[1].fraction, 0.5);
  EXPECT_EQ(a.comm_comp->overlap_ns, 225 * us);
  EXPECT_DOUBLE_EQ(*a.comm_comp->fraction, 225.0 / 400.0);
  ASSERT_EQ(a.breakdown.size(), 2u);
  EXPECT_EQ(a.breakdown[1].rank, 1);
}

TEST(SliceSelectorTest, ParsesTermsAndRefusesBadOnes) {
  const auto s = SliceSelector::parse(" name=nccl ; lane=gpu;rank=1;class=communication;cat=kernel", "x");
  EXPECT_EQ(s.text, "name=nccl;cat=kernel;lane=gpu;class=communication;rank=1");
  EXPECT_EQ(SliceSelector::parse("a=b", "x").text, "name=a=b");
  EXPECT_EQ(SliceSelector::parse("lane=stream 7", "x").lane_label, "stream 7");
  EXPECT_THROW(SliceSelector::parse("class=fast", "x"), InputError);
  EXPECT_THROW(SliceSelector::parse("name=(", "x"), InputError);
  EXPECT_THROW(SliceSelector::parse(" ; ", "x"), InputError);
  EXPECT_THROW(SliceSelector::parse("rank=one", "x"), InputError);
  EXPECT_EQ(SliceSelector::from_json(nlohmann::json{{"name", "gemm"}, {"lane", "gpu"}}, "x").text, "name=gemm;lane=gpu");
}

TEST(SliceClassTest, ClassifiesLikeHtaOnGpuLanesAndByNameOnHosts) {
  EXPECT_EQ(classify_slice(LaneKind::gpu, "ncclDevKernel_AllGather_RING_LL", "kernel"), SliceClass::communication);
  EXPECT_EQ(classify_slice(LaneKind::gpu, "ncclKernel_AllReduce_RING_LL_Sum_float", "kernel"), SliceClass::communication);
  EXPECT_EQ(classify_slice(LaneKind::gpu, "Memcpy DtoD (Device -> Device)", "gpu_memcpy"), SliceClass::transfer);
  EXPECT_EQ(classify_slice(LaneKind::gpu, "Memset (Device)", "gpu_memset"), SliceClass::transfer);
  EXPECT_EQ(classify_slice(LaneKind::gpu, "void at::native::vectorized_elementwise_kernel<4>", "kernel"), SliceClass::compute);
  EXPECT_EQ(classify_slice(LaneKind::gpu, "memcpy_like_kernel", "kernel"), SliceClass::compute);
  EXPECT_EQ(classify_slice(LaneKind::cpu, "c10d::allreduce_", "cpu_op"), SliceClass::communication);
  EXPECT_EQ(classify_slice(LaneKind::cpu, "cudaMemcpyAsync", "cuda_runtime"), SliceClass::transfer);
  EXPECT_EQ(classify_slice(LaneKind::cpu, "kv_transfer_submit", ""), SliceClass::transfer);
  EXPECT_EQ(classify_slice(LaneKind::cpu, "aten::mm", "cpu_op"), SliceClass::other);
  EXPECT_EQ(classify_slice(LaneKind::annotation, "ProfilerStep#1", "user_annotation"), SliceClass::other);
}

}  // namespace
}  // namespace densefeed
