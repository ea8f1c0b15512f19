#include "mcp_fuzz_input.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mcp_server.h"

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

// The resource that exists: written once per process, removed at its end.
struct ResourceFile {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / fmt::format("densefeed-mcp-fuzz-{}.txt", static_cast<long>(::getpid()));
  ResourceFile() { std::ofstream(path) << "gate: fuzz\n\x1b[31m\xff\n"; }
  ~ResourceFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

McpServerOptions fuzz_options() {
  static ResourceFile resource;
  McpServerOptions o;
  o.max_line_bytes = 2048;
  o.max_running_calls = 2;
  o.max_queued_calls = 4;
  o.tools.push_back({"echo", "Echo", "returns its text, escaped, and its arguments as structuredContent",
                     {{"type", "object"},
                      {"properties", {{"text", {{"type", "string"}}}, {"error", {{"type", "boolean"}}}}},
                      {"required", J::array({"text"})},
                      {"additionalProperties", false}},
                     [](const J& a, const std::atomic<bool>&) {
                       return McpToolResult{{{"echo", a}}, a["text"].get<std::string>(), a.value("error", false)};
                     }});
  // Slow enough that calls overlap, queue, are refused as busy and cancelled;
  // quick enough (ticks of 100 µs) that the fuzzer is not waiting on sleeps.
  o.tools.push_back({"wait", "Wait", "waits `ticks` times 100 µs or until cancelled",
                     {{"type", "object"}, {"properties", {{"ticks", {{"type", "integer"}, {"minimum", 0}, {"maximum", 20}}}}}},
                     [](const J& a, const std::atomic<bool>& cancel) {
                       const int ticks = a.value("ticks", 5);
                       for (int i = 0; i < ticks && !cancel; ++i) std::this_thread::sleep_for(std::chrono::microseconds(100));
                       return McpToolResult{J::object(), cancel ? "cancelled" : "waited", false};
                     }});
  // A tool breaking its contract (McpTool::run never throws): the server must still answer.
  o.tools.push_back({"fail", "Fail", "throws", {{"type", "object"}}, [](const J&, const std::atomic<bool>&) -> McpToolResult {
                       throw std::runtime_error("fake tool failed \x1b[2J");
                     }});
  o.resources.push_back({"densefeed://fuzz/present", "fuzz/present", "present", "a file", "text/plain", resource.path});
  o.resources.push_back({"densefeed://fuzz/missing", "fuzz/missing", "missing", "no file", "text/plain",
                         resource.path.string() + ".missing"});
  return o;
}

}  // namespace

std::string check_mcp_responses(std::string_view input, const std::vector<std::string>& responses) {
  static const std::set<int> codes = {-32700, -32600, -32601, -32602, -32603, -32002};
  // serve_mcp's lines: one per '\n', and an unterminated last one.
  const auto lines = static_cast<std::size_t>(std::count(input.begin(), input.end(), '\n')) +
                     (!input.empty() && input.back() != '\n');
  if (responses.size() > lines) return fmt::format("{} responses to {} input line(s)", responses.size(), lines);
  bool pinged = false;
  for (std::size_t i = 0; i < responses.size(); ++i) {
    const std::string& line = responses[i];
    J r;
    try {
      r = J::parse(line);
    } catch (const std::exception& e) {
      return fmt::format("response {} is not JSON ({}): {}", i, e.what(), line.substr(0, 200));
    }
    if (!r.is_object() || r.value("jsonrpc", J()) != "2.0" || !r.contains("id") || r.contains("result") == r.contains("error")) {
      return fmt::format("response {} is not a JSON-RPC 2.0 response: {}", i, line.substr(0, 200));
    }
    if (r.contains("error")) {
      const J& e = r["error"];
      if (!e.is_object() || !e.contains("code") || !e["code"].is_number_integer() || !codes.count(e["code"].get<int>()) ||
          !e.contains("message") || !e["message"].is_string()) {
        return fmt::format("response {} has a malformed error: {}", i, line.substr(0, 200));
      }
      if (e["message"].get<std::string>().rfind("Internal error: ", 0) == 0) {
        return fmt::format("response {}: an exception escaped dispatch: {}", i, line.substr(0, 300));
      }
    }
    if (r["id"] == std::string(kFuzzPingId) && r.contains("result") && r["result"] == J::object()) pinged = true;
  }
  if (!pinged) return "the final ping was not answered";
  return "";
}

McpFuzzOutcome run_mcp_fuzz_input(std::string_view bytes) {
  McpFuzzOutcome outcome;
  outcome.input.assign(bytes);
  outcome.input += fmt::format("\n{{\"jsonrpc\":\"2.0\",\"id\":\"{}\",\"method\":\"ping\"}}\n", kFuzzPingId);
  try {
    std::istringstream in(outcome.input);
    std::ostringstream out;
    serve_mcp(fuzz_options(), in, out);
    std::istringstream written(out.str());
    for (std::string line; std::getline(written, line);) outcome.responses.push_back(line);
    outcome.problem = check_mcp_responses(outcome.input, outcome.responses);
  } catch (const std::exception& e) {
    outcome.problem = std::string("serve_mcp threw: ") + e.what();
  }
  return outcome;
}

}  // namespace densefeed
