// The densefeed command line: each file cli_*.cpp adds one family of verbs to
// the CLI11 app and returns, per verb, what runs when it was given. Verbs
// print text, or one JSON document with --json, and return the exit code
// (STYLE.md: 0 green, 1 red, 2 bad input, 3 infrastructure error); they throw
// InputError / InfraError, which main() reports.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace densefeed {

struct CliContext {
  std::string root_text;    // --root (default: env DENSEFEED_ROOT or the source checkout)
  std::string ledger_text;  // --ledger ('' = ROOT/.densefeed/ledger.db)
  bool json = false;        // --json
  std::filesystem::path root() const { return std::filesystem::absolute(root_text); }
  std::filesystem::path ledger_path() const;
};

struct CliVerb {
  CLI::App* app;
  std::function<int()> run;
};

// Decimal digits only, no sign, no wrap-around. Throws InputError naming `what`.
std::uint64_t parse_unsigned(const std::string& what, const std::string& text, std::uint64_t max);
// An experiment id given on the command line.
std::int64_t parse_experiment_id(const std::string& text);
// Adds `--ledger` and `--json` to a verb.
void add_ledger_and_json(CLI::App* verb, CliContext& ctx);

// ledger list|show|compare|export|verify, audit
std::vector<CliVerb> add_ledger_verbs(CLI::App& app, CliContext& ctx);
// review approve|reject, promote
std::vector<CliVerb> add_review_verbs(CLI::App& app, CliContext& ctx);
// submit, worker, status, cancel
std::vector<CliVerb> add_queue_verbs(CLI::App& app, CliContext& ctx);
// mcp (the Model Context Protocol server)
std::vector<CliVerb> add_mcp_verbs(CLI::App& app, CliContext& ctx);

}  // namespace densefeed
