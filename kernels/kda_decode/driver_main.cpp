// kda_decode_driver: the kda-decode gate's frozen benchmark driver (README,
// "Timings the candidate cannot forge"; kernels/common/driver.h). Built only
// from files the gate freezes, like kda_decode_reference: it draws the batch
// as the harness does (batch_inputs, inputs.h), loads the arm's
// libkda_decode_kernel.so and times densefeed_kda_decode_run
// (kda_decode_kernel.h).
//
//   kda_decode_driver --batch B [--heads 64] [--dim 128]
//
// Bench mode only; the seed and the output folder are DENSEFEED_SEED and
// DENSEFEED_OUT. The arm's parameters version and device (DENSEFEED_PARAMS)
// go to the kernel. Every iteration has its own input set, drawn from its
// seed (DENSEFEED_INPUT_SEEDS, TimingOptions::prepare) outside the timed
// region. cpu: host buffers, std::chrono::steady_clock around the
// call. cuda (a build with CUDA): each set uploaded into the same device
// buffers, before every call
// the outputs poisoned and the L2 cache flushed (outside the timed region),
// CUDA events around the call and a device synchronisation, then o and the
// state brought back for the record. Writes samples.json, timed.json,
// timed/K/ and o.npy [B, H, V], state.npy [B, H, K, V] float32.
// Exit codes: 0 success, 1 the kernel or a check failed, 2 bad argument.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "driver.h"
#include "harness_args.h"
#include "inputs.h"
#include "kda_decode_kernel.h"
#if defined(DENSEFEED_DRIVER_CUDA)
#include "driver_cuda.h"
#endif

namespace {

namespace kd = densefeed::kda_decode;

void run(int argc, char** argv) {
  densefeed::Driver driver;
  CLI::App app{"kda_decode_driver: the kda-decode gate's benchmark driver", "kda_decode_driver"};
  std::string batch, heads = "64", dim = "128";
  app.add_option("--batch", batch, "B, decode batch (sequences)")->required();
  app.add_option("--heads", heads, "H, heads");
  app.add_option("--dim", dim, "K = V, head dimension");
  std::vector<std::string> args = densefeed::cli11_args(argc, argv);
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    throw std::invalid_argument(e.what());
  }
  kd::InputSpec spec;
  try {
    spec.batch = densefeed::parse_positive_arg("--batch", batch);
    spec.heads = densefeed::parse_positive_arg("--heads", heads);
    spec.dim_k = densefeed::parse_positive_arg("--dim", dim);
  } catch (const densefeed::HarnessArgError& e) {
    throw std::invalid_argument(e.what());
  }
  spec.dim_v = spec.dim_k;
  spec.seed = driver.seed();
  const std::string version = driver.param("version");
  const std::string device = driver.param("device");
  kd::BatchInputs in = kd::batch_inputs(spec);
  const std::size_t B = spec.batch, H = spec.heads, K = spec.dim_k, V = spec.dim_v;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> o(B * H * V, nan), state(B * H * K * V, nan);
  char error[512] = {};
  densefeed_kda_decode_problem problem{DENSEFEED_KDA_DECODE_ABI, version.c_str(), device.c_str(), B, H, K, V,
                                       in.q.data(), in.k.data(), in.g_raw.data(), in.v.data(), in.beta.data(),
                                       in.a_log.data(), in.dt_bias.data(), in.state.data(), o.data(), state.data(),
                                       error, sizeof error};
  densefeed::TimingOptions options;
  // Each iteration's own input set (its seed from densefeed, TimingOptions::
  // prepare), drawn outside the timed region; on the device uploaded into
  // the same buffers.
  options.prepare = [&](std::uint64_t seed) {
    spec.seed = seed;
    in = kd::batch_inputs(spec);
    problem.q = in.q.data(), problem.k = in.k.data(), problem.g_raw = in.g_raw.data(), problem.v = in.v.data();
    problem.beta = in.beta.data(), problem.a_log = in.a_log.data(), problem.dt_bias = in.dt_bias.data();
    problem.state_in = in.state.data();
  };
  std::function<void()> fetch = [] {};
  options.flush = [&] {
    std::fill(o.begin(), o.end(), nan);
    std::fill(state.begin(), state.end(), nan);
  };
#if defined(DENSEFEED_DRIVER_CUDA)
  std::unique_ptr<densefeed::CudaEventTimer> timer;
  std::vector<std::unique_ptr<densefeed::DeviceBuffer>> buffers;
  std::unique_ptr<densefeed::L2Flush> l2;
  if (device == "cuda") {
    timer = std::make_unique<densefeed::CudaEventTimer>();
    options.timer = timer.get();
    const auto allocate = [&](const auto& host) {
      buffers.push_back(std::make_unique<densefeed::DeviceBuffer>(host.size() * sizeof(host[0])));
      return buffers.back().get();
    };
    densefeed::DeviceBuffer* d_in[8] = {allocate(in.q), allocate(in.k), allocate(in.g_raw), allocate(in.v),
                                        allocate(in.beta), allocate(in.a_log), allocate(in.dt_bias), allocate(in.state)};
    const auto upload_all = [&problem, &in, d_in] {
      const auto up = [](densefeed::DeviceBuffer* d, const auto& host) {
        d->upload(host.data(), host.size() * sizeof(host[0]));
        return d->get();
      };
      problem.q = static_cast<const std::uint16_t*>(up(d_in[0], in.q));
      problem.k = static_cast<const std::uint16_t*>(up(d_in[1], in.k));
      problem.g_raw = static_cast<const std::uint16_t*>(up(d_in[2], in.g_raw));
      problem.v = static_cast<const std::uint16_t*>(up(d_in[3], in.v));
      problem.beta = static_cast<const std::uint16_t*>(up(d_in[4], in.beta));
      problem.a_log = static_cast<const float*>(up(d_in[5], in.a_log));
      problem.dt_bias = static_cast<const float*>(up(d_in[6], in.dt_bias));
      problem.state_in = static_cast<const float*>(up(d_in[7], in.state));
    };
    upload_all();
    options.prepare = [&spec, &in, upload_all](std::uint64_t seed) {
      spec.seed = seed;
      in = kd::batch_inputs(spec);
      upload_all();
    };
    densefeed::DeviceBuffer* d_o = buffers.emplace_back(std::make_unique<densefeed::DeviceBuffer>(o.size() * sizeof(float))).get();
    densefeed::DeviceBuffer* d_state =
        buffers.emplace_back(std::make_unique<densefeed::DeviceBuffer>(state.size() * sizeof(float))).get();
    problem.o = static_cast<float*>(d_o->get());
    problem.state_out = static_cast<float*>(d_state->get());
    l2 = std::make_unique<densefeed::L2Flush>();
    densefeed::L2Flush* flush_l2 = l2.get();
    options.flush = [d_o, d_state, flush_l2] {
      d_o->poison();
      d_state->poison();
      (*flush_l2)();
    };
    fetch = [d_o, d_state, &o, &state] {
      d_o->download(o.data(), o.size() * sizeof(float));
      d_state->download(state.data(), state.size() * sizeof(float));
    };
  }
#endif
  auto* kernel = driver.load_kernel_as<densefeed_kda_decode_fn>();
  driver.time(
      [&] {
        if (const int rc = kernel(&problem); rc != 0) {
          error[sizeof error - 1] = '\0';
          throw densefeed::DriverError(fmt::format("densefeed_kda_decode_run returned {}: {}", rc, error));
        }
      },
      [&] {
        fetch();
        return std::vector{densefeed::TimedOutput::f32("o", o, {B, H, V}),
                           densefeed::TimedOutput::f32("state", state, {B, H, K, V})};
      },
      options);
}

}  // namespace

int main(int argc, char** argv) {
  return densefeed::driver_main("kda_decode_driver", [&] { run(argc, argv); });
}
