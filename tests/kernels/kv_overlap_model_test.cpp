// The pieces of the kv_overlap harness that its trace's structure rests on:
// the interpreter-style lock's first-come-first-served hand-over, the KV
// values, and the trace writer's Kineto-style numbers.
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "interpreter_lock.h"
#include "kv_values.h"
#include "serving_model.h"
#include "trace_recorder.h"

namespace {

namespace kv = densefeed::kv_overlap;

TEST(InterpreterLock, AWaiterGetsTheLockBeforeTheHolderTakesItBack) {
  kv::InterpreterLock lock;
  std::vector<std::string> order;  // appended only by the holder
  lock.acquire();
  std::thread waiter([&] {
    lock.acquire();
    order.push_back("waiter");
    lock.release();
  });
  lock.wait_for_waiters(1);
  EXPECT_EQ(lock.waiters(), 1u);
  lock.release();
  lock.acquire();  // asks after the waiter: served after it
  order.push_back("holder");
  lock.release();
  waiter.join();
  EXPECT_EQ(order, (std::vector<std::string>{"waiter", "holder"}));
  EXPECT_EQ(lock.waiters(), 0u);
}

TEST(InterpreterLock, WaitersAreServedInTheOrderTheyAsked) {
  kv::InterpreterLock lock;
  std::vector<int> order;
  lock.acquire();
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      lock.acquire();
      order.push_back(i);
      lock.release();
    });
    lock.wait_for_waiters(static_cast<std::size_t>(i) + 1);  // thread i asked before thread i + 1
  }
  lock.release();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(InterpreterLock, YieldTurnGivesEachWaiterOneTurnThenTheCaller) {
  kv::InterpreterLock lock;
  std::vector<std::string> order;
  lock.acquire();
  std::thread waiter([&] {
    lock.acquire();
    order.push_back("waiter 1");
    lock.release();
    lock.acquire();  // asks again at once: after the yielding holder
    order.push_back("waiter 2");
    lock.release();
  });
  lock.wait_for_waiters(1);
  lock.yield_turn();
  order.push_back("holder");
  lock.release();
  waiter.join();
  EXPECT_EQ(order, (std::vector<std::string>{"waiter 1", "holder", "waiter 2"}));
}

TEST(InterpreterLock, YieldTurnWithoutWaitersKeepsTheLock) {
  kv::InterpreterLock lock;
  lock.acquire();
  lock.yield_turn();
  EXPECT_EQ(lock.waiters(), 0u);
  lock.release();
  lock.acquire();
  lock.release();
}

TEST(InterpreterLock, AFreeLockIsTakenAtOnce) {
  kv::InterpreterLock lock;
  lock.acquire();
  EXPECT_EQ(lock.waiters(), 0u);
  lock.release();
  lock.acquire();
  lock.release();
}

TEST(KvValues, AreMultiplesOfTwoToTheMinus23InMinusOneToOne) {
  for (std::size_t chunk : {0u, 1u, 7u}) {
    for (std::size_t i = 0; i < 1000; ++i) {
      const float v = kv::kv_value(42, chunk, i);
      ASSERT_GE(v, -1.0f);
      ASSERT_LT(v, 1.0f);
      const double scaled = (static_cast<double>(v) + 1.0) * 0x1p23;
      ASSERT_EQ(scaled, std::floor(scaled)) << v;
    }
  }
}

TEST(KvValues, DependOnSeedChunkAndIndex) {
  EXPECT_EQ(kv::kv_value(1, 2, 3), kv::kv_value(1, 2, 3));
  EXPECT_NE(kv::kv_value(1, 2, 3), kv::kv_value(2, 2, 3));
  EXPECT_NE(kv::kv_value(1, 2, 3), kv::kv_value(1, 3, 3));
  EXPECT_NE(kv::kv_value(1, 2, 3), kv::kv_value(1, 2, 4));
  // Chunk c, index i and chunk c + 1, index i must not repeat a pattern.
  std::size_t equal = 0;
  for (std::size_t i = 0; i < 256; ++i) equal += kv::kv_value(9, 0, i) == kv::kv_value(9, 1, i);
  EXPECT_LT(equal, 2u);
}

TEST(KvValues, FillIsRowMajorAndChecksItsSize) {
  std::vector<float> out(3 * 5);
  kv::fill_kv(11, 3, 5, out);
  EXPECT_EQ(out[2 * 5 + 4], kv::kv_value(11, 2, 4));
  std::vector<float> wrong(14);
  EXPECT_THROW(kv::fill_kv(11, 3, 5, wrong), std::invalid_argument);
}

TEST(ServingModel, RefusesBuffersOfTheWrongSize) {
  kv::ModelConfig config;
  config.chunks = 2;
  config.chunk_elems = 4;
  std::vector<float> source(8), received(7);
  EXPECT_THROW(kv::run_scenario(config, kv::Scenario::prefill_kv, source, received, {}), std::invalid_argument);
  config.window = 0;
  received.resize(8);
  EXPECT_THROW(kv::run_scenario(config, kv::Scenario::prefill_kv, source, received, {}), std::invalid_argument);
}

TEST(ServingModel, PrefillKvDeliversEveryChunkAndPrefillNone) {
  kv::ModelConfig config;
  config.steps = 3;
  config.step_time = std::chrono::microseconds(100);
  config.host_time = std::chrono::microseconds(0);
  config.chunks = 5;
  config.chunk_elems = 7;
  config.chunk_time = std::chrono::microseconds(20);
  config.submit_time = std::chrono::microseconds(5);
  for (kv::Variant variant : {kv::Variant::hold, kv::Variant::release}) {
    config.variant = variant;
    std::vector<float> source(35), received(35, -5.0f);
    kv::fill_kv(3, 5, 7, source);
    kv::run_scenario(config, kv::Scenario::prefill, source, received, {});
    EXPECT_EQ(received, std::vector<float>(35, -5.0f));
    const kv::ScenarioTimes t = kv::run_scenario(config, kv::Scenario::prefill_kv, source, received, {});
    EXPECT_EQ(received, source);
    EXPECT_GE(t.total_ms, t.prefill_ms);
  }
}

TEST(TraceRecorder, WritesKinetoStyleMicrosecondsWithNanosecondDecimals) {
  const kv::Clock::time_point base{};
  kv::TraceRecorder recorder(base, 1'700'000'000'000'000'123);
  recorder.name_process(77, "proc");
  kv::TraceLane& cpu = recorder.add_lane(77, 78, "main thread", 1, false);
  kv::TraceLane& gpu = recorder.add_lane(0, 7, "stream 7", 7, true);
  kv::TraceEvent e;
  e.name = "dispatch_wait";
  e.cat = "cpu_op";
  e.start = base + std::chrono::nanoseconds(1'234'567);
  e.end = base + std::chrono::nanoseconds(1'234'567 + 5'000'001);
  e.step = 3;
  e.holds_lock = 0;
  cpu.add(e);
  kv::TraceEvent k;
  k.name = "prefill_kernel";
  k.cat = "kernel";
  k.start = base + std::chrono::nanoseconds(7);
  k.end = base + std::chrono::nanoseconds(1007);
  k.correlation = 12;
  gpu.add(k);
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("kv_overlap_trace_" + std::to_string(::getpid()) + ".json");
  recorder.write(path, {{"note", "x"}});
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  const std::string s = text.str();
  EXPECT_NE(s.find("\"ts\": 1234.567, \"dur\": 5000.001"), std::string::npos) << s;
  EXPECT_NE(s.find("\"ts\": 0.007, \"dur\": 1.000"), std::string::npos) << s;
  const nlohmann::json doc = nlohmann::json::parse(s);
  EXPECT_EQ(doc.at("baseTimeNanoseconds").get<std::int64_t>(), 1'700'000'000'000'000'123);
  EXPECT_EQ(doc.at("displayTimeUnit"), "ms");
  EXPECT_EQ(doc.at("note"), "x");
  const nlohmann::json& events = doc.at("traceEvents");
  std::size_t x_events = 0;
  for (const auto& ev : events) {
    if (ev.at("ph") == "M" && ev.at("name") == "thread_name" && ev.at("tid") == 78) {
      EXPECT_EQ(ev.at("args").at("name"), "main thread");
    }
    if (ev.at("ph") != "X") continue;
    ++x_events;
    if (ev.at("name") == "prefill_kernel") {
      EXPECT_EQ(ev.at("pid"), 0);
      EXPECT_EQ(ev.at("tid"), 7);
      EXPECT_EQ(ev.at("args").at("device"), 0);
      EXPECT_EQ(ev.at("args").at("stream"), 7);
      EXPECT_EQ(ev.at("args").at("correlation"), 12);
    } else {
      EXPECT_EQ(ev.at("args").at("holds_lock"), false);
      EXPECT_EQ(ev.at("args").at("step"), 3);
      EXPECT_FALSE(ev.at("args").contains("device"));
    }
  }
  EXPECT_EQ(x_events, 2u);
  // The kernel's correlation id gives a flow's finish on it, bound to it.
  std::size_t flows = 0;
  for (const auto& ev : events) {
    if (ev.at("ph") != "f") continue;
    ++flows;
    EXPECT_EQ(ev.at("id"), 12);
    EXPECT_EQ(ev.at("tid"), 7);
    EXPECT_EQ(ev.at("bp"), "e");
    EXPECT_EQ(ev.at("cat"), "ac2g");
  }
  EXPECT_EQ(flows, 1u);
  EXPECT_NE(s.find("\"ph\": \"f\", \"id\": 12, \"pid\": 0, \"tid\": 7, \"ts\": 0.007"), std::string::npos) << s;
}

TEST(TraceRecorder, NamesTheFileItCannotWrite) {
  kv::TraceRecorder recorder;
  const std::filesystem::path path = "/nonexistent-dir-kv-overlap/trace.json";
  try {
    recorder.write(path, nlohmann::ordered_json::object());
    FAIL() << "expected TraceWriteError";
  } catch (const kv::TraceWriteError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
}

}  // namespace
