// `densefeed help [VERB...]`, the hidden `--generate man|bash|zsh|fish` (the
// man page and shell completions the build installs) and the unknown-command
// check main() makes before CLI11 reports a parse error.
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace densefeed {

struct HelpVerb {
  CLI::App* app = nullptr;                                // the `help` subcommand
  std::shared_ptr<std::vector<std::string>> topic;        // the verb words after `help`
};

// Adds `help [VERB...]` and the hidden `--generate WHAT` to `app` (after
// every other verb, so that the generated files see them all) and sets the
// top-level --help footer (help_text.h: EXAMPLES, EXIT STATUS). `--generate`
// prints the man page (man) or a completion script (bash, zsh, fish) of
// `app`'s tree on stdout and throws CLI::Success (exit 0) during parsing;
// any other value is CLI::ValidationError (exit 2).
HelpVerb add_help_verb(CLI::App& app);

// A word where a verb was expected that names none (`densefeed bogus`,
// `densefeed ledger lsit`).
struct UnknownCommand {
  std::vector<std::string> parent;  // the verb words before it ({} at the top, {"ledger"})
  std::string word;                 // what was typed
  std::string closest;              // the visible subcommand of `parent` nearest by edit distance
  // "unknown command 'ledger lsit' (did you mean 'ledger list'?); see densefeed ledger --help"
  std::string message() const;
};

// Walks `args` (argv without argv[0]) down `app`'s subcommands, skipping
// options and the values of options that take one: the first word that is
// neither a subcommand of the verb so far nor an argument of it (the verb
// has subcommands and no positionals) is unknown. nullopt when every verb
// word names a verb. Never throws.
std::optional<UnknownCommand> find_unknown_command(const CLI::App& app, const std::vector<std::string>& args);

// `densefeed help TOPIC...`: the help of the verb TOPIC names (the top-level
// help with its footer when TOPIC is empty), written to `out`; returns 0, or
// 2 after writing UnknownCommand::message() to `err` when TOPIC names no verb.
int print_help(const CLI::App& app, const std::vector<std::string>& topic, std::ostream& out, std::ostream& err);

// Levenshtein distance between two words (insertions, deletions and
// substitutions, each 1), for "did you mean".
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace densefeed
