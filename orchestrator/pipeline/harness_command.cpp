#include "harness_command.h"

#include <stdexcept>

#include "input_sets.h"
#include "outside_clock.h"

namespace densefeed {

UntrustedCommand harness_command(const HarnessCall& call) {
  if (!call.arm) throw std::invalid_argument("a harness command with no arm to run from");
  UntrustedCommand c;
  c.argv = arm_command(call.command, call.values, *call.arm);
  c.arm = call.arm;
  c.env = call.extra_env;
  const std::uint64_t seed = call.values.seed;
  const auto told = call.session                       ? std::map<std::string, std::string>{{kModeEnv, to_string(call.mode)}}
                    : call.mode == ProtocolMode::bench ? bench_environment(call.case_values, seed, call.out, call.warmup, call.iters)
                                                       : protocol_environment(call.mode, call.case_values, seed, call.out);
  for (const auto& [k, v] : told) c.env[k] = v;
  if (call.input_seeds) c.env[kInputSeedsEnv] = input_seeds_value(*call.input_seeds);
  if (!call.gpu.empty()) c.env["CUDA_VISIBLE_DEVICES"] = call.gpu;
  if (call.clock_fd >= 0) {
    c.clock_fd = call.clock_fd;
    c.env[kClockFdEnv] = std::to_string(kClockChildFd);
  }
  c.rank_env = call.rank_env;
  c.cwd = call.dir;
  c.writable = {call.out};
  c.readable = call.readable;
  c.stdout_path = harness_log(call, "stdout");
  c.stderr_path = harness_log(call, "stderr");
  c.timeout = call.timeout;
  c.limits = call.limits;
  c.sandbox = call.sandbox;
  return c;
}

HarnessCall session_call(HarnessCall call, const std::filesystem::path& dir) {
  call.session = true;
  call.dir = dir;
  call.out = dir / "exchange";
  call.timeout = std::chrono::hours(24 * 7);
  return call;
}

std::filesystem::path harness_log(const HarnessCall& call, const char* stream) {
  return call.dir / (std::string(stream) + ".log");
}

std::chrono::milliseconds harness_timeout(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

}  // namespace densefeed
