// The densefeed command table: the global options and every verb family,
// bound to one CliContext. main() parses a command line with it; a densefeed
// service parses each request's arguments with the same table
// (service_call.h), so that what it allows is what its child runs.
#pragma once

#include <vector>

#include <CLI/CLI.hpp>

#include "cli.h"

namespace densefeed {

// Adds the global options (--project, --trust-worktree, --service, and the
// hidden --die-with-parent) and the verbs to `app`, in the order of
// `densefeed --help`.
std::vector<CliVerb> add_command_table(CLI::App& app, CliContext& ctx);

}  // namespace densefeed
