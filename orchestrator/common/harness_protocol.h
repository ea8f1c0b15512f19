// The harness protocol's environment (DESIGN.md, harness protocol): what every
// harness command densefeed starts is told, and the one place its variables
// are spelled. A command of mode MODE gets DENSEFEED_MODE = MODE,
// DENSEFEED_CASE = the case as one JSON object ("{}" for trace and
// acceptance commands, which have no case), DENSEFEED_SEED = the seed in
// decimal, DENSEFEED_OUT = the folder it writes its outputs to; a bench
// command also DENSEFEED_WARMUP and DENSEFEED_ITERS (iteration counts).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace densefeed {

enum class ProtocolMode { gate, bench, trace, acceptance };
const char* to_string(ProtocolMode m);  // "gate" | "bench" | "trace" | "acceptance"

inline constexpr const char* kModeEnv = "DENSEFEED_MODE";
inline constexpr const char* kCaseEnv = "DENSEFEED_CASE";
inline constexpr const char* kSeedEnv = "DENSEFEED_SEED";
inline constexpr const char* kOutEnv = "DENSEFEED_OUT";
inline constexpr const char* kWarmupEnv = "DENSEFEED_WARMUP";
inline constexpr const char* kItersEnv = "DENSEFEED_ITERS";

// {DENSEFEED_MODE, DENSEFEED_CASE, DENSEFEED_SEED, DENSEFEED_OUT} for one
// command. `seed` is its decimal text as recorded (a replayed step's).
std::map<std::string, std::string> protocol_environment(ProtocolMode mode, const nlohmann::ordered_json& case_values,
                                                        const std::string& seed, const std::filesystem::path& out);
inline std::map<std::string, std::string> protocol_environment(ProtocolMode mode, const nlohmann::ordered_json& case_values,
                                                               std::uint64_t seed, const std::filesystem::path& out) {
  return protocol_environment(mode, case_values, std::to_string(seed), out);
}

// A bench command's: protocol_environment(bench, ...) and DENSEFEED_WARMUP,
// DENSEFEED_ITERS.
std::map<std::string, std::string> bench_environment(const nlohmann::ordered_json& case_values, std::uint64_t seed,
                                                     const std::filesystem::path& out, int warmup, int iters);

}  // namespace densefeed
