// One fuzz input through the MCP server's line handling: the bytes are the
// server's stdin, read, split, parsed and dispatched by serve_mcp exactly as
// `densefeed mcp` does, with cheap fake tools in place of densefeed's own (no
// process starts, no ledger is opened). Shared by the libFuzzer target
// (mcp_fuzz_main.cpp, built with DENSEFEED_FUZZ=ON) and the regression test
// that replays tests/fuzz/corpus/mcp and tests/fuzz/crashers/mcp in every CI
// run (mcp_fuzz_regression_test.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace densefeed {

// The id of the ping sent after every input: the server is up when it answers.
inline constexpr std::string_view kFuzzPingId = "densefeed-fuzz-final-ping";

struct McpFuzzOutcome {
  std::string input;                   // the bytes, then "\n" and the final ping
  std::vector<std::string> responses;  // what the server wrote, one line each
  std::string problem;                 // empty when every check held, else what broke
};

// Serves `bytes` + "\n" + a ping (id kFuzzPingId) with the fake tools echo,
// wait and fail and two resources, under small limits so that a short input
// reaches them (lines of at most 2048 bytes, depth 128, 2 calls running and 4
// queued), then checks the responses with check_mcp_responses. Never throws.
McpFuzzOutcome run_mcp_fuzz_input(std::string_view bytes);

// What is wrong with `responses` as the server's answer to `input`, or "":
// every line is one JSON-RPC 2.0 response object (an id, exactly one of
// result and error, an error's code one the server documents), no line is an
// internal error that escaped dispatch ("Internal error: ..."), there are no
// more responses than input lines, and the ping with kFuzzPingId is answered.
std::string check_mcp_responses(std::string_view input, const std::vector<std::string>& responses);

}  // namespace densefeed
