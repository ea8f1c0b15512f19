// The kv_overlap harness and the kv-overlap gate's reference as densefeed runs
// them: real processes, the protocol's environment, a temporary output
// directory, and the files they leave there. The trace tests assert the
// structure the lock makes certain (which intervals can and cannot overlap),
// never a time: they hold on a loaded machine.
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/process.hpp>
#include <nlohmann/json.hpp>

namespace {

namespace bp = boost::process;
namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string stderr_text;
};

// One X event, times in integer nanoseconds (the trace writes microseconds
// with three decimals, so this is exact).
struct Slice {
  std::string name;
  std::string cat;
  std::string lane;
  std::int64_t start = 0;
  std::int64_t end = 0;
  nlohmann::json args;
};

std::int64_t to_ns(const nlohmann::json& us) { return std::llround(us.get<double>() * 1000.0); }

struct Trace {
  nlohmann::json doc;
  std::string text;
  std::vector<Slice> slices;

  std::vector<Slice> named(const std::string& name) const {
    std::vector<Slice> out;
    for (const Slice& s : slices) {
      if (s.name == name) out.push_back(s);
    }
    std::sort(out.begin(), out.end(), [](const Slice& a, const Slice& b) { return a.start < b.start; });
    return out;
  }
};

Trace read_trace(const fs::path& path) {
  Trace t;
  std::ifstream in(path);
  t.text.assign(std::istreambuf_iterator<char>(in), {});
  t.doc = nlohmann::json::parse(t.text);
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> lanes;
  for (const auto& ev : t.doc.at("traceEvents")) {
    if (ev.at("ph") == "M" && ev.at("name") == "thread_name") {
      lanes[{ev.at("pid").get<std::int64_t>(), ev.at("tid").get<std::int64_t>()}] =
          ev.at("args").at("name").get<std::string>();
    }
  }
  for (const auto& ev : t.doc.at("traceEvents")) {
    if (ev.at("ph") != "X") continue;
    Slice s;
    s.name = ev.at("name").get<std::string>();
    s.cat = ev.at("cat").get<std::string>();
    s.lane = lanes.at({ev.at("pid").get<std::int64_t>(), ev.at("tid").get<std::int64_t>()});
    s.start = to_ns(ev.at("ts"));
    s.end = s.start + to_ns(ev.at("dur"));
    s.args = ev.value("args", nlohmann::json::object());
    t.slices.push_back(s);
  }
  return t;
}

bool inside(const Slice& inner, const Slice& outer) {
  return inner.start >= outer.start && inner.end <= outer.end;
}

std::int64_t overlap(const Slice& a, const Slice& b) {
  return std::max<std::int64_t>(0, std::min(a.end, b.end) - std::max(a.start, b.start));
}

// A small model: 12 steps of 500 us, a hand-over after 3 held steps, 8 chunks.
const std::vector<std::string> kSmall = {"--steps",     "12",  "--step-us",   "500", "--switch-steps",
                                         "3",           "--chunks",           "8",   "--chunk-us",
                                         "200",         "--submit-us",        "100", "--chunk-elems",
                                         "64",          "--host-us",          "20"};

class KvOverlapHarness : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "kv_overlap_harness.XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `exe` with `args` and the protocol variables `vars` on top of this
  // process's environment (from which any DENSEFEED_* is removed first).
  Result run(const std::vector<std::string>& args, const std::map<std::string, std::string>& vars = {},
             const std::string& exe = KV_OVERLAP_EXE) {
    bp::environment env = boost::this_process::environment();
    for (const char* name : {"DENSEFEED_MODE", "DENSEFEED_SEED", "DENSEFEED_OUT", "DENSEFEED_WARMUP",
                             "DENSEFEED_ITERS", "DENSEFEED_CASE"}) {
      if (env.find(name) != env.end()) env.erase(name);
    }
    for (const auto& [name, value] : vars) env[name] = value;
    bp::ipstream err;
    bp::child child(bp::exe = exe, bp::args = args, env, bp::std_out > bp::null, bp::std_err > err,
                    bp::std_in < bp::null);
    Result r;
    for (std::string line; std::getline(err, line);) r.stderr_text += line + "\n";
    child.wait();
    r.exit_code = child.exit_code();
    return r;
  }

  Trace traced(const std::string& variant, const std::string& scenario = "") {
    const fs::path out = dir_ / ("trace-" + variant);
    std::vector<std::string> args = {"--variant", variant};
    args.insert(args.end(), kSmall.begin(), kSmall.end());
    if (!scenario.empty()) args.insert(args.end(), {"--scenario", scenario});
    const Result r = run(args, {{"DENSEFEED_MODE", "trace"}, {"DENSEFEED_OUT", out.string()}});
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 1);
    return read_trace(out / "trace.json");
  }

  std::string read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path dir_;
};

TEST_F(KvOverlapHarness, TraceIsKinetoStyleChromeTrace) {
  const Trace t = traced("hold");
  EXPECT_EQ(t.doc.at("displayTimeUnit"), "ms");
  EXPECT_TRUE(t.doc.at("baseTimeNanoseconds").is_number_integer());
  EXPECT_EQ(t.doc.at("kv_overlap").at("variant"), "hold");
  // Every ts and dur is microseconds with exactly three decimals, as Kineto writes them.
  const std::regex number(R"re("(ts|dur)": ([^,}]*))re");
  std::size_t checked = 0;
  for (auto it = std::sregex_iterator(t.text.begin(), t.text.end(), number); it != std::sregex_iterator(); ++it) {
    ASSERT_TRUE(std::regex_match((*it)[2].str(), std::regex(R"(\d+\.\d{3})"))) << (*it)[0].str();
    ++checked;
  }
  EXPECT_GT(checked, 100u);
  std::set<std::string> lanes, cats;
  for (const Slice& s : t.slices) {
    lanes.insert(s.lane);
    cats.insert(s.cat);
  }
  EXPECT_EQ(lanes, (std::set<std::string>{"main thread (prefill)", "kv transfer thread", "stream 7 (compute)",
                                          "stream 20 (copy)"}));
  EXPECT_EQ(cats, (std::set<std::string>{"user_annotation", "cpu_op", "cuda_runtime", "kernel", "gpu_memcpy"}));
  // One window, 12 steps and kernels, 8 chunks submitted and copied; GPU
  // events on device 0 carry their stream.
  EXPECT_EQ(t.named("prefill").size(), 1u);
  EXPECT_EQ(t.named("prefill").front().args.at("scenario"), "prefill_kv");
  EXPECT_EQ(t.named("prefill_step").size(), 12u);
  EXPECT_EQ(t.named("dispatch").size(), 12u);
  EXPECT_EQ(t.named("prefill_kernel").size(), 12u);
  EXPECT_EQ(t.named("kv_submit").size(), 8u);
  EXPECT_EQ(t.named("kv_transfer").size(), 8u);
  for (const Slice& k : t.named("prefill_kernel")) {
    EXPECT_EQ(k.lane, "stream 7 (compute)");
    EXPECT_EQ(k.args.at("stream"), 7);
    EXPECT_EQ(k.args.at("device"), 0);
  }
  // Runtime calls and device ops pair up by correlation id; a device op
  // starts after its call began, and a stream runs one op at a time.
  for (const auto& [call, op] : {std::pair<std::string, std::string>{"cudaLaunchKernel", "prefill_kernel"},
                                 {"cudaMemcpyAsync", "kv_transfer"}}) {
    const std::vector<Slice> calls = t.named(call);
    const std::vector<Slice> ops = t.named(op);
    ASSERT_EQ(calls.size(), ops.size()) << op;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      EXPECT_EQ(calls[i].args.at("correlation"), ops[i].args.at("correlation")) << op << " " << i;
      EXPECT_GE(ops[i].start, calls[i].start) << op << " " << i;
      if (i > 0) EXPECT_GE(ops[i].start, ops[i - 1].end) << op << " " << i;
    }
  }
  // Each runtime call starts an ac2g flow that finishes on its device op.
  std::map<std::int64_t, std::set<std::string>> flows;
  for (const auto& ev : t.doc.at("traceEvents")) {
    if (ev.at("ph") == "s" || ev.at("ph") == "f") flows[ev.at("id").get<std::int64_t>()].insert(ev.at("ph"));
  }
  EXPECT_EQ(flows.size(), 12u + 8u);
  for (const auto& [id, phases] : flows) EXPECT_EQ(phases, (std::set<std::string>{"s", "f"})) << id;
  // Every chunk is transferred once, in order.
  const std::vector<Slice> copies = t.named("kv_transfer");
  for (std::size_t i = 0; i < copies.size(); ++i) {
    EXPECT_EQ(copies[i].args.at("chunk"), i);
    EXPECT_EQ(copies[i].args.at("bytes"), 64 * 4);
  }
}

TEST_F(KvOverlapHarness, HoldSubmissionsNeverOverlapDispatchAndWaitForAHandOff) {
  const Trace t = traced("hold");
  const std::vector<Slice> dispatches = t.named("dispatch");
  const std::vector<Slice> waits = t.named("dispatch_wait");
  const std::vector<Slice> handoffs = t.named("lock_handoff");
  const std::vector<Slice> submits = t.named("kv_submit");
  const Slice window = t.named("prefill").at(0);
  for (const Slice& w : waits) EXPECT_EQ(w.args.at("holds_lock"), true);
  for (const Slice& s : submits) {
    for (const Slice& d : dispatches) EXPECT_EQ(overlap(s, d), 0) << "chunk " << s.args.at("chunk") << " step " << d.args.at("step");
    // The lock is free only at a hand-off between steps or after the loop.
    const bool at_handoff = std::any_of(handoffs.begin(), handoffs.end(), [&](const Slice& h) { return inside(s, h); });
    EXPECT_TRUE(at_handoff || s.start >= window.end) << "chunk " << s.args.at("chunk");
  }
  // A hand-off happens only while the transfer waits, and gives it one turn:
  // one chunk's submission.
  for (const Slice& h : handoffs) {
    const auto n = std::count_if(submits.begin(), submits.end(), [&](const Slice& s) { return inside(s, h); });
    EXPECT_EQ(n, 1) << "hand-off after step " << h.args.at("step");
  }
  // The transfer was waiting from the start, so the first hand-off comes
  // after exactly --switch-steps held steps, and carries chunk 0.
  ASSERT_FALSE(handoffs.empty());
  EXPECT_EQ(handoffs.front().args.at("step"), 2);
  ASSERT_FALSE(submits.empty());
  EXPECT_TRUE(inside(submits.front(), handoffs.front()));
  EXPECT_GE(submits.front().start, dispatches.at(2).end);
  EXPECT_LE(submits.front().end, dispatches.at(3).start);
  // Hand-offs are at least --switch-steps steps apart and never after the last step.
  for (std::size_t i = 1; i < handoffs.size(); ++i) {
    EXPECT_GE(handoffs[i].args.at("step").get<int>() - handoffs[i - 1].args.at("step").get<int>(), 3);
  }
  for (const Slice& h : handoffs) EXPECT_LT(h.args.at("step").get<int>(), 11);
}

TEST_F(KvOverlapHarness, ReleaseSubmissionsFallInsideDispatchWaits) {
  const Trace t = traced("release");
  const std::vector<Slice> waits = t.named("dispatch_wait");
  const std::vector<Slice> submits = t.named("kv_submit");
  const Slice window = t.named("prefill").at(0);
  for (const Slice& w : waits) EXPECT_EQ(w.args.at("holds_lock"), false);
  // The waits release the lock every step, so no step is held through and
  // the main thread never hands the lock over between steps.
  EXPECT_TRUE(t.named("lock_handoff").empty());
  for (const Slice& s : submits) {
    if (s.start >= window.end) continue;  // after the loop the lock is free anyway
    const bool in_wait = std::any_of(waits.begin(), waits.end(), [&](const Slice& w) { return inside(s, w); });
    EXPECT_TRUE(in_wait) << "chunk " << s.args.at("chunk") << " at " << s.start;
  }
  // The transfer was waiting from the start: chunk 0 goes in the first wait.
  ASSERT_FALSE(submits.empty());
  EXPECT_TRUE(inside(submits.front(), waits.at(0)));
}

TEST_F(KvOverlapHarness, TraceOfBothScenariosHasTwoWindowsAndOneTransfer) {
  const Trace t = traced("release", "both");
  const std::vector<Slice> windows = t.named("prefill");
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_EQ(windows[0].args.at("scenario"), "prefill");
  EXPECT_EQ(windows[1].args.at("scenario"), "prefill_kv");
  EXPECT_LE(windows[0].end, windows[1].start);
  EXPECT_EQ(t.named("prefill_kernel").size(), 24u);
  for (const Slice& s : t.named("kv_submit")) EXPECT_GE(s.start, windows[1].start);
}

TEST_F(KvOverlapHarness, AcceptanceWritesSamplesOfBothScenarios) {
  const fs::path out = dir_ / "acceptance";
  std::vector<std::string> args = {"--variant", "release", "--reps", "3"};
  args.insert(args.end(), kSmall.begin(), kSmall.end());
  const Result r = run(args, {{"DENSEFEED_MODE", "acceptance"}, {"DENSEFEED_OUT", out.string()}});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::ifstream in(out / "metrics.json");
  const nlohmann::json m = nlohmann::json::parse(in);
  std::set<std::string> keys;
  for (const auto& [k, v] : m.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"prefill_ms", "prefill_kv_ms", "prefill_kv_loop_ms"}));
  for (const auto& [k, v] : m.items()) {
    ASSERT_EQ(v.size(), 3u) << k;
    // A prefill of 12 steps of 500 us cannot take less than 6 ms.
    for (const auto& x : v) EXPECT_GE(x.get<double>(), 6.0) << k;
  }
  for (std::size_t i = 0; i < 3; ++i) EXPECT_GE(m["prefill_kv_ms"][i].get<double>(), m["prefill_kv_loop_ms"][i].get<double>());

  const fs::path only = dir_ / "only";
  args.insert(args.end(), {"--scenario", "prefill"});
  ASSERT_EQ(run(args, {{"DENSEFEED_MODE", "acceptance"}, {"DENSEFEED_OUT", only.string()}}).exit_code, 0);
  std::ifstream in2(only / "metrics.json");
  const nlohmann::json m2 = nlohmann::json::parse(in2);
  EXPECT_EQ(m2.size(), 1u);
  EXPECT_EQ(m2.at("prefill_ms").size(), 3u);
}

TEST_F(KvOverlapHarness, GateOutputIsTheReferencesBytesForBothVariants) {
  const fs::path ref = dir_ / "reference";
  ASSERT_EQ(run({"--chunks", "8", "--chunk-elems", "64", "--seed", "99", "--out", ref.string()}, {},
                KV_OVERLAP_REFERENCE_EXE)
                .exit_code,
            0);
  const std::string expected = read_bytes(ref / "kv.npy");
  ASSERT_EQ(expected.size(), 128u + 8 * 64 * 4);  // a 128-byte v1.0 header
  EXPECT_NE(expected.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(expected.find("'shape': (8, 64)"), std::string::npos);
  for (const std::string variant : {"hold", "release"}) {
    const fs::path out = dir_ / variant;
    std::vector<std::string> args = {"--variant", variant};
    args.insert(args.end(), kSmall.begin(), kSmall.end());
    const Result r = run(args, {{"DENSEFEED_SEED", "99"}, {"DENSEFEED_OUT", out.string()}});
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 1);
    EXPECT_EQ(read_bytes(out / "kv.npy"), expected) << variant;
  }
  const fs::path other = dir_ / "other";
  ASSERT_EQ(run({"--chunks", "8", "--chunk-elems", "64", "--seed", "100", "--out", other.string()}, {},
                KV_OVERLAP_REFERENCE_EXE)
                .exit_code,
            0);
  EXPECT_NE(read_bytes(other / "kv.npy"), expected);
}

TEST_F(KvOverlapHarness, BenchWritesOneSamplePerTimedIterationAndTheGatedBytes) {
  const fs::path out = dir_ / "bench";
  std::vector<std::string> args = {"--variant", "hold"};
  args.insert(args.end(), kSmall.begin(), kSmall.end());
  const Result r = run(args, {{"DENSEFEED_MODE", "bench"},
                              {"DENSEFEED_SEED", "5"},
                              {"DENSEFEED_OUT", out.string()},
                              {"DENSEFEED_WARMUP", "1"},
                              {"DENSEFEED_ITERS", "3"}});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::ifstream in(out / "samples.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc.at("unit"), "ms");
  ASSERT_EQ(doc.at("samples").size(), 3u);
  for (const auto& s : doc.at("samples")) EXPECT_GE(s.get<double>(), 6.0);
  const fs::path ref = dir_ / "reference";
  ASSERT_EQ(run({"--chunks", "8", "--chunk-elems", "64", "--seed", "5", "--out", ref.string()}, {},
                KV_OVERLAP_REFERENCE_EXE)
                .exit_code,
            0);
  EXPECT_EQ(read_bytes(out / "kv.npy"), read_bytes(ref / "kv.npy"));
}

TEST_F(KvOverlapHarness, BadInputExitsTwoWithOneLineNamingIt) {
  const std::map<std::string, std::string> gate = {{"DENSEFEED_SEED", "1"}, {"DENSEFEED_OUT", (dir_ / "o").string()}};
  struct Bad {
    std::vector<std::string> args;
    std::map<std::string, std::string> vars;
    std::string message;
    std::string exe = KV_OVERLAP_EXE;
  };
  const std::vector<Bad> cases = {
      {{"--variant", "spin"}, gate, "--variant: expected hold or release, got 'spin'"},
      {{"--chunks", "4"}, gate, "--variant is required"},
      {{"--variant", "hold", "--scenario", "decode"}, gate, "--scenario: expected prefill, prefill_kv or both"},
      {{"--variant", "hold", "--scenario", "prefill"}, gate, "--scenario: DENSEFEED_MODE=gate runs the transfer"},
      {{"--variant", "hold", "--window", "0"}, gate, "--window: expected a positive integer, got '0'"},
      {{"--variant", "hold", "--step-us", "2000000"}, gate, "--step-us: expected microseconds"},
      {{"--variant", "hold", "--chunk-us", "-1"}, gate, "--chunk-us: expected microseconds"},
      {{"--variant", "hold", "--reps", "1001"}, gate, "--reps: expected at most 1000"},
      {{"--variant", "hold"}, {{"DENSEFEED_OUT", (dir_ / "o").string()}}, "--seed: expected a seed"},
      {{"--variant", "hold"}, {{"DENSEFEED_MODE", "profile"}}, "DENSEFEED_MODE='profile'"},
      {{"--variant", "hold"}, {{"DENSEFEED_MODE", "trace"}}, "--out: expected an output directory"},
      {{"--chunks", "4"}, {{"DENSEFEED_MODE", "trace"}, {"DENSEFEED_SEED", "1"}, {"DENSEFEED_OUT", "x"}},
       "DENSEFEED_MODE=trace: kv_overlap_reference supports gate only", KV_OVERLAP_REFERENCE_EXE},
      {{"--chunks", "0"}, gate, "--chunks: expected a positive integer", KV_OVERLAP_REFERENCE_EXE},
  };
  for (const Bad& b : cases) {
    const Result r = run(b.args, b.vars, b.exe);
    EXPECT_EQ(r.exit_code, 2) << b.message;
    EXPECT_NE(r.stderr_text.find(b.message), std::string::npos) << r.stderr_text;
    EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
  }
  EXPECT_FALSE(fs::exists(dir_ / "o" / "kv.npy"));
}

}  // namespace
