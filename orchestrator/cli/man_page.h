// densefeed(1): the man page, in roff (man(7) macros), generated from the
// command tree (command_tree.h) and the examples of `densefeed help`, so it
// names exactly the verbs and options the CLI accepts. The build writes it to
// share/man/man1/densefeed.1 (`densefeed --generate man`).
#pragma once

#include <string>

#include "command_tree.h"

namespace densefeed {

// The whole page: NAME, SYNOPSIS, DESCRIPTION, OPTIONS (the global ones),
// COMMANDS (each verb, its description, positionals and options), EXAMPLES,
// EXIT STATUS, FILES, SEE ALSO. `version` goes in the .TH line. Text is
// escaped for roff (backslashes, hyphens, a leading dot or quote). Never throws.
std::string man_page(const CommandNode& top, const std::string& version);

}  // namespace densefeed
