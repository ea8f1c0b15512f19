// The tools and resources `densefeed mcp` offers. Every tool runs the
// densefeed CLI itself as a child process with --json (through
// run_process), so an agent on MCP gets exactly what the CLI gives — the same
// validation, verdicts, exit codes and schemas (schemas/*.schema.json) — and
// the server shares every code path with it:
//
//   submit_experiment  YAML text -> densefeed submit FILE --json
//   run_queue          densefeed worker --once, in the background
//   get_status         densefeed status ID [--wait --timeout S] --json
//   list_gates         densefeed gate list --json
//   show_gate          densefeed gate show NAME --json
//   compare_tensors    densefeed compare REF CAND [bounds] --json
//   analyze_trace      densefeed trace analyze FILE --json
//   ledger_list        densefeed ledger list [--gate --verdict --since] --json
//   ledger_show        densefeed ledger show ID --json
//   ledger_compare     densefeed ledger compare ID1 ID2 --json
//   write_report       densefeed report ID -o LEDGER-mcp/reports/experiment-ID.html --json
//
// Operands (names, ids, paths) go after "--" and option values as
// --flag=VALUE, so an argument is never read as an option; every string
// argument that reaches argv declares a `pattern` no option matches, which
// McpServer enforces before the tool runs.
//
// A document the CLI prints is a result (a red verdict included); the CLI's
// error document (exit 2 bad input, 3 infrastructure) is a tool error whose
// text says what to change.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "mcp_server.h"

namespace densefeed {

struct McpToolConfig {
  std::filesystem::path densefeed;  // the CLI executable
  std::filesystem::path project;    // --project for every call (and the calls' working directory)
  bool trust_worktree = false;      // pass --trust-worktree on (the person who started the server said so)
  std::filesystem::path ledger;     // --ledger for every call (none when `service` is set)
  // The project's densefeed service (densefeed.yaml's service:; empty: none).
  // Its calls then go there (the CLI routes them): without --ledger, which
  // is the service's, and run_queue starts no worker, the service runs one.
  std::filesystem::path service;
  // The verbs the CLI offers ("submit", "trace analyze", ...): a tool whose
  // verb is missing answers with a tool error instead of a usage message.
  std::set<std::string> verbs;
};

class DensefeedMcpTools {
 public:
  explicit DensefeedMcpTools(McpToolConfig config);
  // Stops a worker run_queue started (SIGTERM: its experiment goes back to the queue).
  ~DensefeedMcpTools();
  DensefeedMcpTools(const DensefeedMcpTools&) = delete;
  DensefeedMcpTools& operator=(const DensefeedMcpTools&) = delete;

  // The tool table; the tools refer to this object, which must outlive them.
  std::vector<McpTool> tools();

  // densefeed://gates/*, densefeed://schemas/*, densefeed://skills/...,
  // densefeed://experiments/*: the files under `root` as they are now.
  // densefeed://skills/... and densefeed://schemas/... from densefeed's
  // installed data, densefeed://gates/... from the gate store's gates folder,
  // densefeed://experiments/... from the project's experiments folder.
  static std::vector<McpResource> resources(const std::filesystem::path& data_dir, const std::filesystem::path& gate_dir,
                                            const std::filesystem::path& experiments_dir);

  // InitializeResult.instructions: the loop in five lines and where the skill is.
  static std::string instructions();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace densefeed
