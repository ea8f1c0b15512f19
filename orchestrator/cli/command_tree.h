// The command line's tree as plain data, read from the CLI11 app that
// add_command_table() built: what `densefeed help`, the man page and the
// shell completions are generated from, so that none of them can drift from
// the verbs and options densefeed really accepts.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace densefeed {

struct CommandOption {
  std::vector<std::string> names;  // "--json", "-o" (long names first); empty for a positional
  std::string positional;          // "MANIFEST" for a positional, else ''
  std::string description;
  bool takes_value = false;        // the next word is its value (not a flag)
};

struct CommandNode {
  std::vector<std::string> path;  // {} for densefeed itself, {"ledger", "list"}
  std::string description;
  std::vector<CommandOption> options;  // visible options and positionals, in the order of --help (--help included)
  std::vector<CommandNode> children;   // visible subcommands, in the order of --help
  std::string path_text() const;       // "ledger list", '' for the top
};

// The visible verbs and options under `app`: hidden ones (group "") are
// left out, as --help leaves them out. Never throws.
CommandNode command_tree(const CLI::App& app);

// Every node of the tree, depth first, the top first.
std::vector<const CommandNode*> all_nodes(const CommandNode& top);

}  // namespace densefeed
