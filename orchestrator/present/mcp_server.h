// `densefeed mcp`: a Model Context Protocol server over stdio. Messages are
// JSON-RPC 2.0 objects, one per line (MCP 2025-11-25, basic/transports:
// stdio; no embedded newlines). The server negotiates the protocol version
// and capabilities in `initialize` (basic/lifecycle), then answers ping,
// tools/list, tools/call, resources/list, resources/templates/list and
// resources/read (server/tools, server/resources), and honours
// notifications/cancelled by ending the cancelled call's processes.
//
// Errors follow the specification: a message that is not JSON is -32700
// (parse error), one that is not a request -32600, an unknown method -32601,
// bad params or an unknown tool -32602, an unknown resource -32002, a
// request before initialize -32600; a tool that runs and fails (bad input,
// a red verdict is NOT a failure) is a result with isError: true. Nothing a
// client sends stops the server; only the end of its input does.
//
// A tool call's arguments are checked before anything runs, in two steps:
// a string argument that misses the `pattern` its inputSchema property
// declares (a gate name "--help": the tools' patterns match no word that
// starts with '-') is invalid params, -32602, whose data names the tool, the
// argument and the pattern (issue 25: an argument never becomes a CLI
// option). Any other mismatch (a number where a string is declared, a
// missing or unknown argument) is the model's to correct, a tool execution
// error as MCP 2025-11-25 (server/tools: error handling) says: isError,
// text naming each argument and its property schema, structuredContent
// {invalid_arguments: [{argument, problem, expected}]}.
//
// Tool calls run on their own threads, so ping and quick calls are answered
// while a long one (status --wait) is in flight; responses are written whole,
// one line each, under a lock. Hostile input cannot take it down: a line
// longer than max_line_bytes is dropped unread (-32600), nesting deeper than
// max_depth is refused while parsing (-32600; a nlohmann parser callback,
// so no deep value is ever built, copied or destroyed), at most
// max_running_calls tool calls run at once and up to max_queued_calls more
// wait their turn in order; beyond that a call is refused (-32603, retry).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace densefeed {

// What a tool returns: the document (structuredContent, an object), the text
// an agent reads (content[0].text) and whether the call failed.
struct McpToolResult {
  nlohmann::ordered_json structured = nlohmann::ordered_json::object();
  std::string text;
  bool is_error = false;
};

// Tells the client how far a long tool call has come (MCP 2025-11-25,
// basic/utilities/progress: notifications/progress with the request's
// _meta.progressToken). `progress` only grows; a call whose client sent no
// token gets an empty one.
using McpProgress = std::function<void(double progress, std::optional<double> total, const std::string& message)>;

struct McpTool {
  std::string name;   // [A-Za-z0-9_.-]{1,128} (server/tools: tool names)
  std::string title;
  std::string description;
  // JSON Schema (draft-07) of `arguments`, an object schema; checked before
  // `run`. A property's `pattern` (ECMA-262) is enforced as invalid params.
  nlohmann::ordered_json input_schema;
  // Runs the tool on arguments that passed input_schema. `cancel` becomes
  // true when the client cancels the call (or the server is ending). Never throws.
  std::function<McpToolResult(const nlohmann::ordered_json& arguments, const std::atomic<bool>& cancel)> run;
  // Instead of `run` when set: the same, told where to send progress (an
  // empty McpProgress when the client asked for none).
  std::function<McpToolResult(const nlohmann::ordered_json& arguments, const std::atomic<bool>& cancel, const McpProgress& progress)>
      run_with_progress;
};

struct McpResource {
  std::string uri;  // densefeed://...
  std::string name;
  std::string title;
  std::string description;
  std::string mime_type;
  std::filesystem::path file;  // read on every resources/read
};

struct McpServerOptions {
  std::string name = "densefeed";
  std::string version = "1";
  std::string instructions;  // InitializeResult.instructions
  std::vector<McpTool> tools;
  std::vector<McpResource> resources;
  std::size_t max_line_bytes = 8u << 20;  // one JSON-RPC message, bytes (8 MiB)
  int max_depth = 128;                    // arrays and objects inside each other
  std::size_t max_running_calls = 4;      // tool calls on threads at once
  std::size_t max_queued_calls = 64;      // waiting beyond those
};

// Protocol revisions this server speaks, newest first; the first is the one
// offered to a client that asks for another.
const std::vector<std::string>& mcp_protocol_versions();

class McpServer {
 public:
  // `write` receives each outgoing message (one JSON text, no newline); it
  // is called under the server's output lock.
  McpServer(McpServerOptions options, std::function<void(const std::string&)> write);
  ~McpServer();  // cancels and joins calls still running
  McpServer(const McpServer&) = delete;
  McpServer& operator=(const McpServer&) = delete;

  // Handles one incoming line (blank lines are ignored). Never throws.
  void handle_line(const std::string& line);
  // A line that was longer than max_line_bytes and dropped: answered with
  // -32600 (id null: it was never read).
  void line_too_long(std::size_t bytes_seen);
  const McpServerOptions& options() const;

  // Cancels every running tool call and waits for them (their responses
  // are still written).
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads `in` line by line until it ends, writing responses to `out`
// (flushed after each), then finishes running calls. A line is read up to
// options.max_line_bytes; the rest of a longer one is skipped without being
// stored. Returns 0.
int serve_mcp(McpServerOptions options, std::istream& in, std::ostream& out);

}  // namespace densefeed
