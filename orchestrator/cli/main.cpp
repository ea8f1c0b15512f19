// densefeed CLI: the command table. Each family of verbs (cli_*.cpp) binds
// its flags and returns what runs when it was given; main parses, runs the
// one verb given and maps what it threw to the exit code (exit_code.h:
// 0 green, 1 red, 2 bad input, 3 infrastructure error or an `error` verdict:
// the reference failed).
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "cli_help.h"
#include "command_table.h"
#include "service_client.h"
#include "error.h"
#include "exit_code.h"
#include "printable.h"
#include "process_runner.h"
#include "process_tree.h"

namespace df = densefeed;

namespace {

void print_error(bool json, const char* kind, const std::string& message, const nlohmann::ordered_json& details = {}) {
  if (json) {
    nlohmann::ordered_json doc = {{"verdict", kind}, {"error", message}};
    if (!details.is_null()) doc["details"] = details;
    // A message may quote bytes of a bad input file that are not UTF-8.
    std::cout << doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  }
  std::cerr << "densefeed: " << message << "\n";
}

// A child of a densefeed service ends when the service does, even by
// SIGKILL, so that a killed service leaves no process behind.
void die_with_parent() {
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) std::_Exit(df::kExitError);
}

// The one place an error a verb threw becomes an exit code.
int run_verb(const df::CliVerb& verb, bool& json) {
  try {
    return verb.run();
  } catch (const df::InputError& e) {
    print_error(json, "bad-input", e.what(),
                {{"file", e.file()}, {"line", e.mark().line}, {"column", e.mark().column}, {"field", e.field()}, {"message", e.message()}});
    return df::kExitUsage;
  } catch (const df::InfraError& e) {
    print_error(json, "infrastructure-error", e.what());
    return df::kExitError;
  } catch (const std::exception& e) {
    print_error(json, "infrastructure-error", std::string("internal error: ") + e.what());
    return df::kExitError;
  }
}

}  // namespace

int main(int argc, char** argv) {
  df::kill_children_on_termination();
  df::adopt_orphans();
  CLI::App app{"densefeed: dense-feedback experiments for agent-driven kernel optimisation"};
  df::CliContext ctx;
  const std::vector<df::CliVerb> verbs = df::add_command_table(app, ctx);
  const df::HelpVerb help = df::add_help_verb(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version, --generate
  } catch (const CLI::ParseError& e) {
    // Agents asked for JSON get JSON even when the command line is wrong.
    bool wants_json = false;
    for (int i = 1; i < argc; ++i) wants_json = wants_json || std::string(argv[i]) == "--json";
    // A mistyped verb is named, with the nearest one, before CLI11's "A subcommand is required".
    if (const auto unknown = df::find_unknown_command(app, std::vector<std::string>(argv + 1, argv + argc))) {
      print_error(wants_json, "bad-input", unknown->message(), {{"field", "command line"}, {"message", unknown->message()}});
      return df::kExitUsage;
    }
    if (wants_json) {
      print_error(true, "bad-input", e.what(), {{"field", "command line"}, {"message", e.what()}});
      return df::kExitUsage;
    }
    app.exit(e);
    return df::kExitUsage;
  }

  // Everything printed passes through printable() (control characters and
  // direction marks escaped), but ledger export's CSV and the MCP protocol.
  bool raw_output = false;
  for (const auto& verb : verbs) {
    raw_output = raw_output || (verb.app->parsed() && (verb.app->get_name() == "export" || verb.app->get_name() == "mcp"));
  }
  std::optional<df::PrintableStream> safe_out, safe_err;
  if (!raw_output) {
    safe_out.emplace(std::cout);
    safe_err.emplace(std::cerr);
  }
  if (ctx.die_with_parent) die_with_parent();
  // Help is printed here, never sent to a service.
  if (help.app->parsed()) return df::print_help(app, *help.topic, std::cout, std::cerr);
  for (const auto& verb : verbs) {
    if (!verb.app->parsed()) continue;
    ctx.store_use = verb.store;
    // A verb given while a densefeed service is configured goes to it.
    return run_verb({verb.app,
                     [&] {
                       if (const auto service = df::service_for(app, ctx)) return df::call_service(*service, app, ctx);
                       return verb.run();
                     }},
                    ctx.json);
  }
  return df::kExitUsage;
}
