// kv_overlap_reference: the reference of the kv-overlap gate, speaking the
// harness protocol of DESIGN.md: the KV cache the transfer must deliver,
// copied directly from its source with no threads, no lock and no streams.
// Built only from files the gate freezes (kv_values, kernels/common), so no
// edit of the candidate harness can change it.
//
//   kv_overlap_reference --chunks N [--chunk-elems E] [--seed S] [--out DIR]
//
// gate (DENSEFEED_MODE unset or gate; there is no other mode): writes DIR/kv.npy,
//      shape [N, E], float32: chunk c, element i is kv_value(seed, c, i).
// Exit codes: 0 success, 2 bad argument or environment, 3 internal failure.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "harness_args.h"
#include "harness_env.h"
#include "kv_values.h"
#include "npy_writer.h"
#include "session_serve.h"

namespace {

namespace kv = densefeed::kv_overlap;

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;
constexpr int kExitInternal = 3;

// A bad argument: the message starts with the flag's name.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One case: `own` as argv[1..], `env` the protocol's variables (the
// process's, or a session request's). Throws UsageError for a bad argument.
int run_case(const std::vector<std::string>& own, const densefeed::HarnessEnv& env) {
  CLI::App app{"kv_overlap_reference: the kv-overlap gate's reference, the KV cache copied directly",
               "kv_overlap_reference"};
  std::string chunks_text;
  std::string chunk_elems_text = "4096";
  std::string seed_text;
  std::string out_text;
  app.add_option("--chunks", chunks_text, "KV chunks")->required();
  app.add_option("--chunk-elems", chunk_elems_text, "float32 elements per chunk");
  app.add_option("--seed", seed_text, "u64 seed of the KV values (default: DENSEFEED_SEED)");
  app.add_option("--out", out_text, "output directory (default: DENSEFEED_OUT)");
  std::vector<std::string> args = densefeed::cli11_args(own);
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  std::size_t chunks = 0;
  std::size_t chunk_elems = 0;
  std::uint64_t seed = 0;
  std::filesystem::path out;
  try {
        if (env.mode != densefeed::HarnessMode::gate) {
      throw UsageError(fmt::format("DENSEFEED_MODE={}: kv_overlap_reference supports gate only",
                                   densefeed::to_string(env.mode)));
    }
    chunks = densefeed::parse_positive_arg("--chunks", chunks_text);
    chunk_elems = densefeed::parse_positive_arg("--chunk-elems", chunk_elems_text);
    seed = densefeed::seed_arg(seed_text, env);
    out = densefeed::out_arg(out_text, env);
  } catch (const densefeed::HarnessArgError& e) {
    throw UsageError(e.what());
  }
  std::vector<float> source(chunks * chunk_elems);
  kv::fill_kv(seed, chunks, chunk_elems, source);
  // Poisoned first, as every gate output is, then one direct copy.
  std::vector<float> received(source.size(), std::numeric_limits<float>::quiet_NaN());
  std::copy(source.begin(), source.end(), received.begin());
  std::filesystem::create_directories(out);
  const std::vector<std::size_t> shape = {chunks, chunk_elems};
  densefeed::write_npy(out / "kv.npy", received, shape);
  return kExitOk;
}

// The gate's case keys and the flags they stand for (gates/kv-overlap.yaml): main serves
// sessions (session_serve.h), each request's case giving these flags; outside
// one it runs a single case from its flags or DENSEFEED_CASE.
const std::vector<std::pair<std::string, std::string>> kCaseFlags = {
    {"chunks", "--chunks"}, {"chunk_elems", "--chunk-elems"}};

}  // namespace

int main(int argc, char** argv) {
  try {
    densefeed::serve_case_flags(argc, argv, kCaseFlags, run_case);
    return kExitOk;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kv_overlap_reference: %s\n", e.what());
    return kExitBadInput;
  } catch (const densefeed::HarnessEnvError& e) {  // a malformed request or DENSEFEED_* variable
    std::fprintf(stderr, "kv_overlap_reference: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kv_overlap_reference: internal failure: %s\n", e.what());
    return kExitInternal;
  }
}
