#include "harness_protocol.h"

namespace densefeed {

const char* to_string(ProtocolMode m) {
  switch (m) {
    case ProtocolMode::gate: return "gate";
    case ProtocolMode::bench: return "bench";
    case ProtocolMode::trace: return "trace";
    case ProtocolMode::acceptance: return "acceptance";
  }
  return "?";
}

std::map<std::string, std::string> protocol_environment(ProtocolMode mode, const nlohmann::ordered_json& case_values,
                                                        const std::string& seed, const std::filesystem::path& out) {
  return {{kModeEnv, to_string(mode)},
          {kCaseEnv, case_values.is_null() ? std::string("{}") : case_values.dump()},
          {kSeedEnv, seed},
          {kOutEnv, out.string()}};
}

std::map<std::string, std::string> bench_environment(const nlohmann::ordered_json& case_values, std::uint64_t seed,
                                                     const std::filesystem::path& out, int warmup, int iters) {
  auto env = protocol_environment(ProtocolMode::bench, case_values, seed, out);
  env[kWarmupEnv] = std::to_string(warmup);
  env[kItersEnv] = std::to_string(iters);
  return env;
}

}  // namespace densefeed
