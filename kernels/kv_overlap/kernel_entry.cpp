// The candidate's kernel behind the kv-overlap gate's C entry point
// (kv_overlap_kernel.h), built as libkv_overlap_kernel.so: one prefill_kv run
// of the serving model (serving_model.h), the code the harness runs.
#include "kv_overlap_kernel.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "serving_model.h"

extern "C" int densefeed_kv_overlap_run(const densefeed_kv_overlap_problem* p) {
  namespace kv = densefeed::kv_overlap;
  try {
    if (p == nullptr) return 1;
    if (p->abi != DENSEFEED_KV_OVERLAP_ABI) {
      throw std::invalid_argument(fmt::format("ABI {}, this kernel implements {}", p->abi, DENSEFEED_KV_OVERLAP_ABI));
    }
    const auto variant = kv::parse_variant(p->variant ? p->variant : "");
    if (!variant) throw std::invalid_argument(fmt::format("variant '{}': expected hold or release", p->variant ? p->variant : ""));
    kv::ModelConfig m;
    m.variant = *variant;
    m.steps = p->steps;
    m.step_time = std::chrono::microseconds(p->step_us);
    m.host_time = std::chrono::microseconds(p->host_us);
    m.switch_steps = p->switch_steps;
    m.chunks = p->chunks;
    m.chunk_elems = p->chunk_elems;
    m.chunk_time = std::chrono::microseconds(p->chunk_us);
    m.submit_time = std::chrono::microseconds(p->submit_us);
    m.window = p->window;
    const std::size_t n = p->chunks * p->chunk_elems;
    (void)kv::run_scenario(m, kv::Scenario::prefill_kv, std::span<const float>(p->kv_source, n),
                           std::span<float>(p->kv_received, n), {});
    return 0;
  } catch (const std::exception& e) {
    if (p != nullptr && p->error != nullptr && p->error_size > 0) std::snprintf(p->error, p->error_size, "%s", e.what());
    return 1;
  }
}
