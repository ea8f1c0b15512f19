#include "mcp_server.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "schema_validator.h"

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

// JSON-RPC 2.0 error codes (jsonrpc.org/specification, section 5.1) and
// MCP's resource-not-found (2025-11-25, server/resources: error handling).
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;
constexpr int kResourceNotFound = -32002;

J error_response(const J& id, int code, const std::string& message, const J& data = nullptr) {
  J error = {{"code", code}, {"message", message}};
  if (!data.is_null()) error["data"] = data;
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", error}};
}

J result_response(const J& id, const J& result) { return {{"jsonrpc", "2.0"}, {"id", id}, {"result", result}}; }

// A request id is a string or an integer (JSON-RPC 2.0 allows numbers;
// MCP 2025-11-25, basic: "MUST be a string or integer").
bool valid_id(const J& id) { return id.is_string() || id.is_number_integer() || id.is_number_unsigned(); }

struct RunningCall {
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> cancel;
  std::shared_ptr<std::atomic<bool>> done;
};

}  // namespace

const std::vector<std::string>& mcp_protocol_versions() {
  // Newest first. 2025-11-25 is the current revision of the initialize
  // handshake (modelcontextprotocol.io/specification/versioning); the older
  // ones differ from it in nothing this server uses.
  static const std::vector<std::string> versions = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
  return versions;
}

struct McpServer::Impl {
  McpServerOptions options;
  std::function<void(const std::string&)> write;
  std::mutex out_mutex;
  std::mutex calls_mutex;
  std::map<std::string, RunningCall> calls;  // by id.dump()
  std::vector<std::unique_ptr<SchemaValidator>> validators;  // one per tool, same order
  bool initialize_answered = false;
  bool initialized_notified = false;
  std::string protocol_version;

  void send(const J& message) {
    const std::lock_guard lock(out_mutex);
    // dump() escapes control characters, so a message never holds a raw newline.
    write(message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }

  void reap_finished() {
    std::vector<std::thread> finished;
    {
      const std::lock_guard lock(calls_mutex);
      for (auto it = calls.begin(); it != calls.end();) {
        if (*it->second.done) {
          finished.push_back(std::move(it->second.thread));
          it = calls.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& t : finished) t.join();
  }

  J initialize(const J& params) {
    if (!params.is_object() || !params.contains("protocolVersion") || !params["protocolVersion"].is_string()) {
      throw std::invalid_argument("initialize: params.protocolVersion must be a string (e.g. \"2025-11-25\")");
    }
    if (params.contains("capabilities") && !params["capabilities"].is_object()) {
      throw std::invalid_argument("initialize: params.capabilities must be an object");
    }
    const std::string requested = params["protocolVersion"].get<std::string>();
    const auto& versions = mcp_protocol_versions();
    // lifecycle: version negotiation: the same version if supported, else our latest.
    protocol_version = std::find(versions.begin(), versions.end(), requested) != versions.end() ? requested : versions.front();
    initialize_answered = true;
    J result = {{"protocolVersion", protocol_version},
                {"capabilities",
                 {{"tools", {{"listChanged", false}}}, {"resources", {{"subscribe", false}, {"listChanged", false}}}}},
                {"serverInfo", {{"name", options.name}, {"title", "densefeed"}, {"version", options.version}}}};
    if (!options.instructions.empty()) result["instructions"] = options.instructions;
    return result;
  }

  J tools_list() const {
    J tools = J::array();
    for (const auto& t : options.tools) {
      tools.push_back({{"name", t.name}, {"title", t.title}, {"description", t.description}, {"inputSchema", t.input_schema}});
    }
    return {{"tools", tools}};
  }

  J resources_list() const {
    J resources = J::array();
    for (const auto& r : options.resources) {
      J entry = {{"uri", r.uri}, {"name", r.name}, {"title", r.title}, {"description", r.description}, {"mimeType", r.mime_type}};
      std::error_code ec;
      const auto size = std::filesystem::file_size(r.file, ec);
      if (!ec) entry["size"] = size;
      resources.push_back(entry);
    }
    return {{"resources", resources}};
  }

  // Returns the response, or throws (code, message) through `fail`.
  J resources_read(const J& id, const J& params) {
    if (!params.is_object() || !params.contains("uri") || !params["uri"].is_string()) {
      return error_response(id, kInvalidParams, "resources/read: params.uri must be a string; resources/list gives the URIs");
    }
    const std::string uri = params["uri"].get<std::string>();
    for (const auto& r : options.resources) {
      if (r.uri != uri) continue;
      std::ifstream in(r.file, std::ios::binary);
      if (!in) {
        return error_response(id, kInternalError, fmt::format("resources/read: cannot read {} ({})", uri, r.file.string()),
                              J{{"uri", uri}});
      }
      std::ostringstream text;
      text << in.rdbuf();
      return result_response(id, {{"contents", J::array({{{"uri", uri}, {"mimeType", r.mime_type}, {"text", text.str()}}})}});
    }
    return error_response(id, kResourceNotFound, fmt::format("Resource not found: {} (resources/list gives the URIs)", uri),
                          J{{"uri", uri}});
  }

  void tools_call(const J& id, const J& params) {
    if (!params.is_object() || !params.contains("name") || !params["name"].is_string()) {
      send(error_response(id, kInvalidParams, "tools/call: params.name must be a string naming a tool from tools/list"));
      return;
    }
    const std::string name = params["name"].get<std::string>();
    std::size_t index = options.tools.size();
    for (std::size_t i = 0; i < options.tools.size(); ++i) {
      if (options.tools[i].name == name) index = i;
    }
    if (index == options.tools.size()) {
      std::vector<std::string> names;
      for (const auto& t : options.tools) names.push_back(t.name);
      send(error_response(id, kInvalidParams, fmt::format("Unknown tool: {} (tools: {})", name, fmt::join(names, ", "))));
      return;
    }
    J arguments = params.contains("arguments") ? params["arguments"] : J::object();
    if (arguments.is_null()) arguments = J::object();
    if (!arguments.is_object()) {
      send(error_response(id, kInvalidParams, fmt::format("tools/call {}: params.arguments must be an object", name)));
      return;
    }
    // Argument values of the wrong type are the model's to correct: a tool
    // execution error (server/tools: error handling), not a protocol error.
    const auto all = validators[index]->errors(nlohmann::json(arguments));
    // valijson adds a "failed to validate" line for each enclosing schema; the innermost lines say what is wrong.
    std::vector<std::string> problems;
    for (const auto& p : all) {
      if (p.find("Failed to validate against schema") == std::string::npos) problems.push_back(p);
    }
    if (problems.empty()) problems = all;
    if (!problems.empty()) {
      J schema_hint = options.tools[index].input_schema;
      send(result_response(
          id, {{"content", J::array({{{"type", "text"},
                                      {"text", fmt::format("{}: the arguments do not match its inputSchema: {}. Expected: {}", name,
                                                           fmt::join(problems, "; "), schema_hint.dump())}}})},
               {"isError", true}}));
      return;
    }
    const std::string key = id.dump();
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    auto done = std::make_shared<std::atomic<bool>>(false);
    reap_finished();
    const std::lock_guard lock(calls_mutex);
    if (calls.count(key)) {
      send(error_response(id, kInvalidRequest, fmt::format("request id {} is already in use by a running call", key)));
      return;
    }
    const McpTool* tool = &options.tools[index];
    calls[key] = RunningCall{std::thread([this, id, tool, arguments, cancel, done] {
                               McpToolResult r;
                               try {
                                 r = tool->run(arguments, *cancel);
                               } catch (const std::exception& e) {
                                 r = {J::object(), std::string("internal error in densefeed's MCP server: ") + e.what(), true};
                               }
                               // A cancelled request gets no response (basic/utilities/cancellation).
                               if (!*cancel) {
                                 J result = {{"content", J::array({{{"type", "text"}, {"text", r.text}}})}, {"isError", r.is_error}};
                                 if (!r.structured.empty()) result["structuredContent"] = r.structured;
                                 send(result_response(id, result));
                               }
                               *done = true;
                             }),
                             cancel, done};
  }

  void cancel_call(const J& params) {
    if (!params.is_object() || !params.contains("requestId")) return;
    const std::lock_guard lock(calls_mutex);
    if (auto it = calls.find(params["requestId"].dump()); it != calls.end()) *it->second.cancel = true;
  }

  void handle(const std::string& line) {
    J message;
    try {
      message = J::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      send(error_response(nullptr, kParseError, fmt::format("Parse error: not JSON ({}); send one JSON-RPC object per line", e.what())));
      return;
    }
    if (message.is_array()) {
      send(error_response(nullptr, kInvalidRequest, "Invalid Request: JSON-RPC batches are not supported (MCP 2025-06-18 removed them); send one object per line"));
      return;
    }
    if (!message.is_object()) {
      send(error_response(nullptr, kInvalidRequest, "Invalid Request: a JSON-RPC message must be an object"));
      return;
    }
    const bool has_id = message.contains("id");
    const J id = has_id ? message["id"] : J(nullptr);
    if (!message.contains("method")) {
      // A response to a request of ours: we send none, so there is nothing to match it to.
      if (has_id && (message.contains("result") || message.contains("error"))) return;
      send(error_response(has_id && valid_id(id) ? id : J(nullptr), kInvalidRequest,
                          "Invalid Request: missing \"method\" (a string such as \"tools/list\")"));
      return;
    }
    if (message.value("jsonrpc", J()) != "2.0") {
      if (has_id) send(error_response(valid_id(id) ? id : J(nullptr), kInvalidRequest, "Invalid Request: \"jsonrpc\" must be \"2.0\""));
      return;
    }
    if (!message["method"].is_string()) {
      if (has_id) send(error_response(valid_id(id) ? id : J(nullptr), kInvalidRequest, "Invalid Request: \"method\" must be a string"));
      return;
    }
    const std::string method = message["method"].get<std::string>();
    const J params = message.contains("params") ? message["params"] : J::object();

    if (!has_id) {  // a notification: never answered
      if (method == "notifications/initialized") initialized_notified = true;
      else if (method == "notifications/cancelled") cancel_call(params);
      return;
    }
    if (!valid_id(id)) {
      send(error_response(nullptr, kInvalidRequest, "Invalid Request: \"id\" must be a string or an integer"));
      return;
    }
    if (!params.is_object() && !params.is_null()) {
      send(error_response(id, kInvalidParams, fmt::format("{}: params must be an object", method)));
      return;
    }
    static const std::set<std::string> known = {"initialize", "ping", "tools/list", "tools/call", "resources/list",
                                                "resources/templates/list", "resources/read"};
    if (!known.count(method)) {
      send(error_response(id, kMethodNotFound, fmt::format("Method not found: {} (this server offers: {})", method, fmt::join(known, ", "))));
      return;
    }
    if (method == "ping") {
      send(result_response(id, J::object()));
      return;
    }
    if (method == "initialize") {
      if (initialize_answered) {
        send(error_response(id, kInvalidRequest, "initialize was already answered; one session per process"));
        return;
      }
      try {
        send(result_response(id, initialize(params)));
      } catch (const std::invalid_argument& e) {
        send(error_response(id, kInvalidParams, e.what(), J{{"supported", mcp_protocol_versions()}}));
      }
      return;
    }
    if (!initialize_answered) {
      send(error_response(id, kInvalidRequest, fmt::format("{} before initialize: send initialize first (lifecycle)", method)));
      return;
    }
    // Pagination: everything fits in one page, so only the absence of a cursor is valid.
    if ((method == "tools/list" || method == "resources/list" || method == "resources/templates/list") && params.is_object() &&
        params.contains("cursor")) {
      send(error_response(id, kInvalidParams, fmt::format("{}: unknown cursor (every item fits in the first page)", method)));
      return;
    }
    if (method == "tools/list") send(result_response(id, tools_list()));
    else if (method == "resources/list") send(result_response(id, resources_list()));
    else if (method == "resources/templates/list") send(result_response(id, {{"resourceTemplates", J::array()}}));
    else if (method == "resources/read") send(resources_read(id, params));
    else if (method == "tools/call") tools_call(id, params.is_null() ? J::object() : params);
  }
};

McpServer::McpServer(McpServerOptions options, std::function<void(const std::string&)> write) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->write = std::move(write);
  for (const auto& t : impl_->options.tools) {
    impl_->validators.push_back(std::make_unique<SchemaValidator>(nlohmann::json(t.input_schema), "tool " + t.name));
  }
}

McpServer::~McpServer() {
  {
    const std::lock_guard lock(impl_->calls_mutex);
    for (auto& [id, call] : impl_->calls) *call.cancel = true;
  }
  finish();
}

void McpServer::handle_line(const std::string& line) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return;
  try {
    impl_->handle(line);
  } catch (const std::exception& e) {
    impl_->send(error_response(nullptr, kInternalError, std::string("Internal error: ") + e.what()));
  }
}

void McpServer::finish() {
  std::map<std::string, RunningCall> calls;
  {
    const std::lock_guard lock(impl_->calls_mutex);
    calls.swap(impl_->calls);
  }
  for (auto& [id, call] : calls) call.thread.join();
}

int serve_mcp(McpServerOptions options, std::istream& in, std::ostream& out) {
  McpServer server(std::move(options), [&out](const std::string& text) { out << text << "\n" << std::flush; });
  for (std::string line; std::getline(in, line);) server.handle_line(line);
  server.finish();
  return 0;
}

}  // namespace densefeed
