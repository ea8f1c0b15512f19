// Shell completion for densefeed, generated from the command tree
// (command_tree.h): each script finds the verb typed so far (the words that
// name subcommands, from the top) and offers that verb's subcommands, or its
// options when the word starts with '-'; a word after an option that takes a
// value is skipped. The build writes them to
// share/bash-completion/completions/densefeed, share/zsh/site-functions/_densefeed
// and share/fish/vendor_completions.d/densefeed.fish (`densefeed --generate bash|zsh|fish`).
#pragma once

#include <string>

#include "command_tree.h"

namespace densefeed {

// For bash-completion: defines _densefeed and `complete -F _densefeed densefeed`
// (words that are not subcommands or options complete as file names).
std::string bash_completion(const CommandNode& top);
// For zsh's compinit: `#compdef densefeed`, subcommands and options with their descriptions.
std::string zsh_completion(const CommandNode& top);
// For fish: `complete -c densefeed` lines, conditioned on the verb typed so far.
std::string fish_completion(const CommandNode& top);

}  // namespace densefeed
