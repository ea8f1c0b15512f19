#include "mcp_server.h"

#include <algorithm>
#include <deque>
#include <list>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error.h"
#include "printable.h"
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
  std::shared_ptr<std::atomic<bool>> cancel;
  std::shared_ptr<std::atomic<bool>> done;
};

// A tool call accepted but not yet running.
struct PendingCall {
  J id;
  const McpTool* tool = nullptr;
  J arguments;
  std::shared_ptr<std::atomic<bool>> cancel;
  std::shared_ptr<std::atomic<bool>> done;
  J progress_token;  // params._meta.progressToken (null: no progress wanted)
};

// A thread that runs calls one after another while any are pending.
struct Runner {
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> exited = std::make_shared<std::atomic<bool>>(false);
};

struct TooDeep {};

// One declared argument of a tool (a property of its object inputSchema):
// its schema, a validator of it, and its `pattern` when it has one. The
// words that reach the CLI's argv (names, paths, profiles) declare a pattern
// that no option ('-x', '--help') matches, and a maxLength: std::regex
// (libstdc++) matches by recursion, one frame per character, so a pattern is
// only ever tried on a string within its maxLength (a 2 MB name would
// overflow the stack).
struct ArgumentSchema {
  std::string argument;
  J schema;
  std::unique_ptr<SchemaValidator> validator;
  std::string pattern;  // ECMA-262, as JSON Schema draft-07 says; "" for none
  std::regex regex;
  std::size_t max_length = 0;  // characters; set whenever pattern is
};

// The properties of an object inputSchema, each with its own validator, so
// that a refusal names the argument it is about (a typed field, not a pointer
// read back out of valijson's message). Throws InfraError for a pattern that
// is not a regular expression or comes without a maxLength.
std::vector<ArgumentSchema> argument_schemas(const J& schema, const std::string& tool) {
  std::vector<ArgumentSchema> out;
  if (!schema.is_object() || !schema.contains("properties") || !schema["properties"].is_object()) return out;
  for (const auto& [name, property] : schema["properties"].items()) {
    ArgumentSchema a{name, property, std::make_unique<SchemaValidator>(nlohmann::json(property), "tool " + tool + " argument " + name)};
    if (property.is_object() && property.contains("pattern")) {
      if (!property["pattern"].is_string() || !property.contains("maxLength") || !property["maxLength"].is_number_unsigned()) {
        throw InfraError(fmt::format("tool {}: inputSchema property '{}': a pattern needs a string and a maxLength", tool, name));
      }
      a.pattern = property["pattern"].get<std::string>();
      a.max_length = property["maxLength"].get<std::size_t>();
      try {
        a.regex = std::regex(a.pattern, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        throw InfraError(fmt::format("tool {}: inputSchema property '{}': pattern '{}' is not a regular expression ({})", tool,
                                     name, a.pattern, e.what()));
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

// A JSON value's type as JSON Schema names it, for "got a number".
std::string json_type(const J& v) {
  if (v.is_string()) return "a string";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  return "an object";
}

// Characters (code points) of UTF-8 text, as JSON Schema's maxLength counts them.
std::size_t characters(const std::string& text) {
  std::size_t n = 0;
  for (const unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

// The arguments a tools/call refuses, each with what it expects: the
// structured list (invalid_arguments) and its lines for people.
struct Refusals {
  J invalid = J::array();
  std::vector<std::string> lines;
  void refuse(const std::string& argument, const std::string& problem, const J& expected) {
    invalid.push_back({{"argument", argument}, {"problem", problem}, {"expected", expected}});
    lines.push_back(fmt::format("argument '{}' {}; expected {}", argument, problem, expected.dump()));
  }
};

// `text` cut for a message, as printable() shows it.
std::string shown(const std::string& text) { return printable(text.size() > 200 ? text.substr(0, 200) + "..." : text, false); }

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
  std::map<std::string, RunningCall> calls;  // by id.dump(): running or pending
  std::deque<PendingCall> pending;           // in arrival order
  std::list<Runner> runners;                 // at most options.max_running_calls alive
  std::vector<std::unique_ptr<SchemaValidator>> validators;  // one per tool, same order
  std::vector<std::vector<ArgumentSchema>> arguments;         // one list per tool, same order
  bool initialize_answered = false;
  bool initialized_notified = false;
  std::string protocol_version;

  void send(const J& message) {
    const std::lock_guard lock(out_mutex);
    // dump() escapes control characters, so a message never holds a raw newline.
    write(message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }

  void reap_finished() {
    std::list<Runner> finished;
    {
      const std::lock_guard lock(calls_mutex);
      for (auto it = calls.begin(); it != calls.end();) {
        if (*it->second.done) it = calls.erase(it);
        else ++it;
      }
      for (auto it = runners.begin(); it != runners.end();) {
        auto next = std::next(it);
        if (*it->exited) finished.splice(finished.end(), runners, it);
        it = next;
      }
    }
    for (auto& r : finished) r.thread.join();
  }

  void run_call(const PendingCall& c) {
    if (!*c.cancel) {
      McpToolResult r;
      try {
        if (c.tool->run_with_progress) {
          McpProgress progress;
          if (!c.progress_token.is_null()) {
            auto last = std::make_shared<double>(-1);
            progress = [this, token = c.progress_token, last, cancel = c.cancel](double p, std::optional<double> total,
                                                                                 const std::string& message) {
              // The progress value must increase with each notification (basic/utilities/progress).
              if (p <= *last || *cancel) return;
              *last = p;
              J params = {{"progressToken", token}, {"progress", p}};
              if (total) params["total"] = *total;
              if (!message.empty()) params["message"] = one_line(message);
              send({{"jsonrpc", "2.0"}, {"method", "notifications/progress"}, {"params", params}});
            };
          }
          r = c.tool->run_with_progress(c.arguments, *c.cancel, progress);
        } else {
          r = c.tool->run(c.arguments, *c.cancel);
        }
      } catch (const std::exception& e) {
        r = {J::object(), std::string("internal error in densefeed's MCP server: ") + e.what(), true};
      }
      // A cancelled request gets no response (basic/utilities/cancellation).
      if (!*c.cancel) {
        // Tool text quotes manifests and harness output: printable.h.
        J result = {{"content", J::array({{{"type", "text"}, {"text", printable(r.text)}}})}, {"isError", r.is_error}};
        if (!r.structured.empty()) result["structuredContent"] = r.structured;
        send(result_response(c.id, result));
      }
    }
    *c.done = true;
  }

  // The body of a Runner: its first call, then pending ones until none is left.
  void run_calls(PendingCall first, std::shared_ptr<std::atomic<bool>> exited) {
    PendingCall c = std::move(first);
    for (;;) {
      run_call(c);
      const std::lock_guard lock(calls_mutex);
      if (pending.empty()) {
        *exited = true;
        return;
      }
      c = std::move(pending.front());
      pending.pop_front();
    }
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

  // The index of the tool that params.name names; none: the error is sent.
  std::optional<std::size_t> called_tool(const J& id, const J& params) {
    if (!params.is_object() || !params.contains("name") || !params["name"].is_string()) {
      send(error_response(id, kInvalidParams, "tools/call: params.name must be a string naming a tool from tools/list"));
      return std::nullopt;
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
      return std::nullopt;
    }
    return index;
  }

  // A string longer than its maxLength never reaches a regular expression
  // (neither ours nor valijson's): refused first, as a tool error.
  static void refuse_overlong(const std::vector<ArgumentSchema>& declared, const J& arguments, Refusals& refusals) {
    for (const auto& a : declared) {
      if (a.pattern.empty() || !arguments.contains(a.argument) || !arguments[a.argument].is_string()) continue;
      const std::size_t n = characters(arguments[a.argument].get<std::string>());
      if (n > a.max_length) refusals.refuse(a.argument, fmt::format("is a string of {} characters", n), a.schema);
    }
  }

  // A string argument that misses its declared pattern (a gate name that
  // is "--help") is refused as invalid params before anything runs: the
  // words that reach the CLI's argv are never options (issue 25). The
  // tools pass operands after "--" as well; this is the first of the two.
  // False: the error is sent.
  bool patterns_match(const J& id, const std::string& name, const std::vector<ArgumentSchema>& declared, const J& arguments) {
    for (const auto& a : declared) {
      if (a.pattern.empty() || !arguments.contains(a.argument) || !arguments[a.argument].is_string()) continue;  // absent or mistyped: the schema's turn
      const std::string value = arguments[a.argument].get<std::string>();
      if (std::regex_search(value, a.regex)) continue;
      send(error_response(
          id, kInvalidParams,
          fmt::format("tools/call {}: argument '{}' is \"{}\": expected a string matching {}{}; nothing was run", name,
                      a.argument, shown(value), a.pattern,
                      a.schema.contains("description") ? " (" + a.schema["description"].get<std::string>() + ")" : ""),
          J{{"tool", name}, {"argument", a.argument}, {"pattern", a.pattern}}));
      return false;
    }
    return true;
  }

  // Argument values of the wrong type are the model's to correct: a tool
  // execution error (server/tools: error handling), not a protocol error.
  static void refuse_mistyped(const J& tool_schema, const std::vector<ArgumentSchema>& declared, const J& arguments, Refusals& refusals) {
    const auto declared_as = [&](const std::string& key) {
      return std::find_if(declared.begin(), declared.end(), [&](const ArgumentSchema& a) { return a.argument == key; });
    };
    for (const auto& [key, value] : arguments.items()) {
      const auto it = declared_as(key);
      if (it == declared.end()) {
        if (tool_schema.value("additionalProperties", true) == false) {
          std::vector<std::string> names;
          for (const auto& a : declared) names.push_back(a.argument);
          refusals.refuse(printable(key, false), "is not an argument of this tool", J(names));
        }
        continue;
      }
      if (!it->validator->errors(nlohmann::json(value)).empty()) {
        refusals.refuse(key, fmt::format("is {} ({})", json_type(value), shown(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))),
                        it->schema);
      }
    }
    if (tool_schema.contains("required") && tool_schema["required"].is_array()) {
      for (const auto& r : tool_schema["required"]) {
        if (!r.is_string() || arguments.contains(r.get<std::string>())) continue;
        const auto it = declared_as(r.get<std::string>());
        refusals.refuse(r.get<std::string>(), "is missing (it is required)", it == declared.end() ? J::object() : it->schema);
      }
    }
  }

  // The arguments against the tool's inputSchema; false: the refusal (a
  // tool error or invalid params) is sent and nothing runs.
  bool arguments_accepted(const J& id, const std::string& name, std::size_t index, const J& arguments) {
    const J& tool_schema = options.tools[index].input_schema;
    const auto& declared = this->arguments[index];
    // Each refusal names the argument and what it expects (its property schema).
    Refusals refusals;
    refuse_overlong(declared, arguments, refusals);
    if (!refusals.lines.empty()) {
      send(result_response(id, {{"content", J::array({{{"type", "text"},
                                                       {"text", fmt::format("{}: the arguments do not match its inputSchema: {}. "
                                                                            "Nothing was run.",
                                                                            name, fmt::join(refusals.lines, "; "))}}})},
                                {"structuredContent", {{"invalid_arguments", refusals.invalid}}},
                                {"isError", true}}));
      return false;
    }
    if (!patterns_match(id, name, declared, arguments)) return false;
    refuse_mistyped(tool_schema, declared, arguments, refusals);
    // The whole schema too: what the per-argument checks cannot see, and
    // valijson's own words (JSON pointers) beside them.
    const auto all = validators[index]->errors(nlohmann::json(arguments));
    // valijson adds a "failed to validate" line for each enclosing schema; the innermost lines say what is wrong.
    std::vector<std::string> problems;
    for (const auto& p : all) {
      if (p.find("Failed to validate against schema") == std::string::npos) problems.push_back(printable(p, false));
    }
    if (problems.empty()) problems = all;
    const auto& lines = refusals.lines;
    if (lines.empty() && problems.empty()) return true;
    const std::string text =
        lines.empty() ? fmt::format("{}: the arguments do not match its inputSchema: {}. Expected: {}. Nothing was run.", name,
                                    fmt::join(problems, "; "), tool_schema.dump())
                      : fmt::format("{}: the arguments do not match its inputSchema: {}. Nothing was run. (JSON Schema: {})", name,
                                    fmt::join(lines, "; "), fmt::join(problems, "; "));
    send(result_response(id, {{"content", J::array({{{"type", "text"}, {"text", text}}})},
                              {"structuredContent", {{"invalid_arguments", refusals.invalid}}},
                              {"isError", true}}));
    return false;
  }

  // Runs the call on a runner thread, queues it behind the running ones,
  // or refuses it (an id in use, too many calls).
  void start_call(const J& id, std::size_t index, const J& arguments, const J& progress_token) {
    const std::string key = id.dump();
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    auto done = std::make_shared<std::atomic<bool>>(false);
    reap_finished();
    const std::lock_guard lock(calls_mutex);
    if (calls.count(key)) {
      send(error_response(id, kInvalidRequest, fmt::format("request id {} is already in use by a running call", key)));
      return;
    }
    std::size_t alive = 0;
    for (const auto& r : runners) alive += !*r.exited;
    PendingCall call{id, &options.tools[index], arguments, cancel, done, progress_token};
    if (alive >= options.max_running_calls && pending.size() >= options.max_queued_calls) {
      send(error_response(id, kInternalError,
                          fmt::format("busy: {} tool calls are running and {} waiting; retry when one has answered", alive,
                                      pending.size())));
      return;
    }
    calls[key] = RunningCall{cancel, done};
    if (alive >= options.max_running_calls) {
      pending.push_back(std::move(call));
      return;
    }
    Runner& r = runners.emplace_back();
    r.thread = std::thread([this, call, exited = r.exited] { run_calls(call, exited); });
  }

  void tools_call(const J& id, const J& params) {
    const auto index = called_tool(id, params);
    if (!index) return;
    const std::string name = params["name"].get<std::string>();
    J arguments = params.contains("arguments") ? params["arguments"] : J::object();
    if (arguments.is_null()) arguments = J::object();
    if (!arguments.is_object()) {
      send(error_response(id, kInvalidParams, fmt::format("tools/call {}: params.arguments must be an object", name)));
      return;
    }
    if (!arguments_accepted(id, name, *index, arguments)) return;
    // A progress token is a string or an integer (basic/utilities/progress); anything else asks for none.
    J token = nullptr;
    if (params.contains("_meta") && params["_meta"].is_object() && params["_meta"].contains("progressToken")) {
      const J& t = params["_meta"]["progressToken"];
      if (t.is_string() || t.is_number_integer()) token = t;
    }
    start_call(id, *index, arguments, token);
  }

  void cancel_call(const J& params) {
    if (!params.is_object() || !params.contains("requestId")) return;
    const std::lock_guard lock(calls_mutex);
    if (auto it = calls.find(params["requestId"].dump()); it != calls.end()) *it->second.cancel = true;
  }

  void handle(const std::string& line) {
    J message;
    try {
      // Refused while parsing, before any deep value exists: copying or
      // validating one recurses once per level.
      const int max_depth = options.max_depth;
      message = J::parse(line, [max_depth](int depth, nlohmann::json::parse_event_t event, J&) {
        if ((event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start) &&
            depth >= max_depth) {
          throw TooDeep{};
        }
        return true;
      });
    } catch (const TooDeep&) {
      send(error_response(nullptr, kInvalidRequest,
                          fmt::format("Invalid Request: JSON nested deeper than {} levels; the message was dropped", options.max_depth)));
      return;
    } catch (const nlohmann::json::exception& e) {
      // parse_error, and out_of_range 406 for a number beyond a double
      // (1e400): either way the line is not a message we can read.
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
    impl_->arguments.push_back(argument_schemas(t.input_schema, t.name));
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
  std::list<Runner> runners;
  {
    const std::lock_guard lock(impl_->calls_mutex);
    runners.swap(impl_->runners);
  }
  // A runner still takes pending calls until none is left; joined in order.
  for (auto& r : runners) r.thread.join();
  const std::lock_guard lock(impl_->calls_mutex);
  impl_->calls.clear();
}

void McpServer::line_too_long(std::size_t bytes_seen) {
  impl_->send(error_response(nullptr, kInvalidRequest,
                             fmt::format("Invalid Request: a line of more than {} bytes (at least {} read) was dropped unread; "
                                         "send one JSON-RPC message of at most that size per line",
                                         impl_->options.max_line_bytes, bytes_seen)));
}

const McpServerOptions& McpServer::options() const { return impl_->options; }

int serve_mcp(McpServerOptions options, std::istream& in, std::ostream& out) {
  McpServer server(std::move(options), [&out](const std::string& text) { out << text << "\n" << std::flush; });
  const std::size_t max = server.options().max_line_bytes;
  std::streambuf* input = in.rdbuf();
  std::string line;
  for (;;) {
    // One line, of which at most `max` bytes are kept: the rest of a longer
    // one is counted and skipped, never stored.
    line.clear();
    std::size_t seen = 0;
    bool any = false;
    int c = std::char_traits<char>::eof();
    while ((c = input->sbumpc()) != std::char_traits<char>::eof()) {
      any = true;
      if (c == '\n') break;
      if (++seen <= max) line.push_back(static_cast<char>(c));
    }
    if (!any) break;
    if (seen > max) server.line_too_long(seen);
    else server.handle_line(line);
    if (c == std::char_traits<char>::eof()) break;
  }
  server.finish();
  return 0;
}

}  // namespace densefeed
