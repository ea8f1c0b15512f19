// Every seed of the MCP server's fuzzer (tests/fuzz/corpus/mcp) and every
// crasher it found (tests/fuzz/crashers/mcp) replayed through the same entry
// point, in every CI run and without clang: the server answers a ping after
// each and every response is well formed. A crasher's file stays here after
// its fix, so the bug it found cannot come back unseen.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mcp_fuzz_input.h"

namespace densefeed {
namespace {

const std::filesystem::path kFuzzDir = std::filesystem::path(DENSEFEED_SOURCE_DIR) / "tests" / "fuzz";

// corpus/mcp/NAME and crashers/mcp/NAME, sorted; dot files (.gitkeep) are not inputs.
std::vector<std::filesystem::path> inputs() {
  std::vector<std::filesystem::path> files;
  for (const char* dir : {"corpus/mcp", "crashers/mcp"}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(kFuzzDir / dir, ec)) {
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class McpFuzzRegression : public ::testing::TestWithParam<std::filesystem::path> {};

TEST_P(McpFuzzRegression, ServerAnswersPingAfterIt) {
  const auto outcome = run_mcp_fuzz_input(read(GetParam()));
  EXPECT_EQ(outcome.problem, "") << GetParam() << " gave " << outcome.responses.size() << " responses";
}

INSTANTIATE_TEST_SUITE_P(Replay, McpFuzzRegression, ::testing::ValuesIn(inputs()), [](const auto& info) {
  // crashers_mcp_deep_nesting_dot: a gtest name of [A-Za-z0-9_] only.
  std::string name = info.param.parent_path().parent_path().filename().string() + "_" + info.param.filename().string();
  for (char& c : name) if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
});

// The replay above passes only if there is something to replay.
TEST(McpFuzzCorpus, HoldsTheSeedsOfEveryKind) {
  std::set<std::string> names;
  for (const auto& p : inputs()) names.insert(p.filename().string());
  for (const char* seed : {"valid_session", "deep_nesting", "long_line", "invalid_utf8", "nul_bytes", "huge_numbers",
                           "duplicate_ids", "batch_array", "notifications_without_id"}) {
    EXPECT_TRUE(names.count(seed)) << "tests/fuzz/corpus/mcp/" << seed << " is missing";
  }
}

// The checks themselves fail on a server that stopped answering or wrote a broken line.
TEST(McpFuzzChecks, FailWhenThePingGoesUnansweredOrALineIsBroken) {
  const std::string ping = std::string(R"({"jsonrpc":"2.0","id":")") + std::string(kFuzzPingId) + R"(","result":{}})";
  EXPECT_EQ(check_mcp_responses("x\n", {ping}), "");
  EXPECT_EQ(check_mcp_responses("x\n", {}), "the final ping was not answered");
  EXPECT_NE(check_mcp_responses("a\nb\n", {R"({"jsonrpc":"2.0","id":1,"resu)", ping}).find("is not JSON"), std::string::npos);
  EXPECT_NE(check_mcp_responses("a\nb\n", {R"({"jsonrpc":"2.0","id":1})", ping}).find("not a JSON-RPC 2.0 response"),
            std::string::npos);
  EXPECT_NE(check_mcp_responses("a\nb\n", {R"({"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error: boom"}})", ping})
                .find("escaped dispatch"),
            std::string::npos);
  EXPECT_NE(check_mcp_responses("a\nb\n", {R"({"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"?"}})", ping}).find("malformed error"),
            std::string::npos);
  EXPECT_EQ(check_mcp_responses("x", {ping, ping}), "2 responses to 1 input line(s)");
  // And the server, served for real, passes them: a session with each fake tool.
  const auto served = run_mcp_fuzz_input(
      R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}})" "\n"
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi \u001b"}}})");
  EXPECT_EQ(served.problem, "");
  ASSERT_EQ(served.responses.size(), 3u);  // initialize, echo and the ping, the last two in either order
  const auto echo = std::find_if(served.responses.begin(), served.responses.end(),
                                 [](const std::string& r) { return r.find(R"("id":1,)") != std::string::npos; });
  ASSERT_NE(echo, served.responses.end());
  EXPECT_NE(echo->find(R"("text":"hi \\x1b")"), std::string::npos) << *echo;
}

// What each crasher found, answered as the specification says (not only "still up").
TEST(McpFuzzCrashers, ANumberBeyondADoubleIsAParseError) {
  // crashers/mcp/number-overflow-id: nlohmann throws out_of_range 406, which
  // escaped to the catch-all as -32603 "Internal error".
  const auto outcome = run_mcp_fuzz_input(R"({"jsonrpc":"2.0","id":1e400,"method":"ping"})");
  ASSERT_EQ(outcome.responses.size(), 2u);
  const auto error = nlohmann::json::parse(outcome.responses[0]);
  EXPECT_EQ(error["error"]["code"], -32700) << outcome.responses[0];
  EXPECT_TRUE(error["id"].is_null());
}

}  // namespace
}  // namespace densefeed
