// The candidate's kernel behind the kda-decode gate's C entry point
// (kda_decode_kernel.h), built as libkda_decode_kernel.so: the CPU path
// (decode_step_cpu, decode_cpu.h) and, in a build with CUDA, the sm_90
// kernels (kernel_entry_cuda.cu), the same code the harness runs.
#include "kda_decode_kernel.h"

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "decode_cpu.h"

#if defined(DENSEFEED_KDA_HAVE_CUDA)
// kernel_entry_cuda.cu: launches `version` on the legacy default stream; the
// launch's cudaError_t as an int, its name in `error` when non-zero.
int kda_decode_cuda_launch(densefeed::kda_decode::Version version, const densefeed_kda_decode_problem& p);
#endif

namespace {

namespace kd = densefeed::kda_decode;

void fail(const densefeed_kda_decode_problem* p, const std::string& message) {
  if (p != nullptr && p->error != nullptr && p->error_size > 0) std::snprintf(p->error, p->error_size, "%s", message.c_str());
}

}  // namespace

extern "C" int densefeed_kda_decode_run(const densefeed_kda_decode_problem* p) {
  try {
    if (p == nullptr) return 1;
    if (p->abi != DENSEFEED_KDA_DECODE_ABI) {
      throw std::invalid_argument(fmt::format("ABI {}, this kernel implements {}", p->abi, DENSEFEED_KDA_DECODE_ABI));
    }
    const auto version = kd::parse_version(p->version ? p->version : "");
    if (!version) throw std::invalid_argument(fmt::format("version '{}': expected v0 or v3", p->version ? p->version : ""));
    const std::string device = p->device ? p->device : "";
    if (device == "cpu") {
      kd::BatchView in;
      in.spec.batch = p->batch;
      in.spec.heads = p->heads;
      in.spec.dim_k = p->dim_k;
      in.spec.dim_v = p->dim_v;
      in.q = p->q;
      in.k = p->k;
      in.g_raw = p->g_raw;
      in.v = p->v;
      in.beta = p->beta;
      in.a_log = p->a_log;
      in.dt_bias = p->dt_bias;
      in.state = p->state_in;
      kd::decode_step_cpu(*version, in, kd::StepOptions{}, p->o, p->state_out);
      return 0;
    }
#if defined(DENSEFEED_KDA_HAVE_CUDA)
    if (device == "cuda") return kda_decode_cuda_launch(*version, *p);
    throw std::invalid_argument(fmt::format("device '{}': expected cpu or cuda", device));
#else
    throw std::invalid_argument(fmt::format("device '{}': this build runs cpu only", device));
#endif
  } catch (const std::exception& e) {
    fail(p, e.what());
    return 1;
  }
}
