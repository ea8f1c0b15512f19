// mcp: the Model Context Protocol server over stdio (mcp_server.h), with the
// tools of mcp_tools.h. stdout carries protocol messages only; the CLI calls
// the tools make write into files.
#include <csignal>
#include <iostream>

#include "cli.h"
#include "service_client.h"
#include "install_paths.h"
#include "mcp_server.h"
#include "mcp_tools.h"
#include "process_runner.h"

namespace densefeed {
namespace {

// "submit", "ledger show", "trace analyze", ...: every verb path of the CLI.
void collect_verbs(CLI::App* app, const std::string& prefix, std::set<std::string>& out) {
  for (auto* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    const std::string name = prefix.empty() ? sub->get_name() : prefix + " " + sub->get_name();
    out.insert(name);
    collect_verbs(sub, name, out);
  }
}

}  // namespace

std::vector<CliVerb> add_mcp_verbs(CLI::App& app, CliContext& ctx) {
  auto* mcp = app.add_subcommand("mcp", "serve the Model Context Protocol over stdio (JSON-RPC 2.0, one message per line) for agents");
  mcp->add_option("--ledger", ctx.ledger_text, "SQLite ledger the tools use (default: the project's)");
  return {{mcp, [&app, &ctx] {
             // A client that goes away must not kill the server before it has
             // ended the processes it started: a write to a closed pipe fails instead.
             std::signal(SIGPIPE, SIG_IGN);
             McpToolConfig config;
             config.densefeed = self_dir() / "densefeed";
             config.project = ctx.project().dir;
             config.trust_worktree = ctx.trust_worktree;
             config.ledger = ctx.ledger_path();
             config.service = configured_service(ctx);
             collect_verbs(&app, "", config.verbs);
             DensefeedMcpTools tools(config);
             McpServerOptions options;
             options.instructions = DensefeedMcpTools::instructions();
             options.tools = tools.tools();
             options.resources = DensefeedMcpTools::resources(data_dir(), ctx.store().gate_dir(),
                                                              ctx.project().dir / ctx.project().experiments);
             return serve_mcp(std::move(options), std::cin, std::cout);
           },
           StoreUse::always}};
}

}  // namespace densefeed
