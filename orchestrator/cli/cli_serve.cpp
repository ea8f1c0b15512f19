// serve: a densefeed service for one project (issue 28), run as its own user:
// agents and people reach it over its unix socket (service_server.h).
#include <fmt/format.h>

#include "cli.h"
#include "service_config.h"
#include "service_server.h"

namespace densefeed {

std::vector<CliVerb> add_serve_verbs(CLI::App& app, CliContext& ctx) {
  (void)ctx;
  auto* serve_cmd = app.add_subcommand(
      "serve", "serve one project's queue and ledger to agents and people over a unix socket, as this (the service's) user");
  auto config = std::make_shared<std::string>();
  serve_cmd->add_option("--config", *config, "the service's configuration (YAML; schemas/service.schema.json)")->required();
  return {{serve_cmd, [config]() -> int { serve(load_service_config(*config)); }, StoreUse::none}};
}

}  // namespace densefeed
