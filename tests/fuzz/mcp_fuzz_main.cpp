// libFuzzer entry (DENSEFEED_FUZZ=ON, clang++ -fsanitize=fuzzer,address,undefined):
// each input is a stream of stdin lines for the MCP server; a sanitizer
// report, a hang (-timeout) or a broken check in check_mcp_responses is a
// crasher. tests/fuzz/run_mcp_fuzz.sh runs it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "mcp_fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto outcome = densefeed::run_mcp_fuzz_input(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!outcome.problem.empty()) {
    std::fprintf(stderr, "mcp_fuzz: %s\n", outcome.problem.c_str());
    std::abort();
  }
  return 0;
}
