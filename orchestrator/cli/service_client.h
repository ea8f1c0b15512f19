// The CLI's side of a densefeed service (issue 28): a verb given while a
// service is configured (--service SOCKET, or `service:` in the worktree's
// densefeed.yaml) is sent over the socket instead of run here, with the
// files it reads uploaded and the files it writes sent back; a WORKTREE
// candidate of `submit` goes as a snapshot of the worktree
// (worktree_snapshot.h).
#pragma once

#include <filesystem>
#include <optional>

#include <CLI/CLI.hpp>

#include "cli.h"

namespace densefeed {

// The service the parsed verb goes to: --service, else the worktree
// project's `service:` (densefeed.yaml, read without opening anything) for a
// verb the service serves; nullopt to run it here (no service configured, a
// verb such as init or mcp that runs here and talks to the service itself,
// or a verb a service runs for a peer: --peer). Throws InputError when
// --service names a service and the verb is not served.
std::optional<std::filesystem::path> service_for(const CLI::App& app, CliContext& ctx);

// The service configured for this command line: --service, else the
// worktree project's densefeed.yaml `service:` (read without opening
// anything); empty when none is.
std::filesystem::path configured_service(const CliContext& ctx);

// Sends the parsed verb, prints the service's stdout and stderr, writes the
// files it sent back; returns the service's exit code. Throws InputError
// for a file operand that cannot be read, InfraError when the service
// cannot be reached or breaks the protocol.
int call_service(const std::filesystem::path& socket, const CLI::App& app, CliContext& ctx);

}  // namespace densefeed
