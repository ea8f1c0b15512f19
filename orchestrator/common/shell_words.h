// Arguments written as a POSIX shell reads them back (sh(1), "Quoting"):
// for `next` steps' "run:" lines and markdown, which a person pastes.
#pragma once

#include <string>
#include <vector>

namespace densefeed {

// `word` as is when it holds only [A-Za-z0-9_./=:,+-] and is not empty;
// else single-quoted, a ' inside written '\''.
std::string shell_word(const std::string& word);

// The words joined by spaces, each as shell_word writes it.
std::string shell_line(const std::vector<std::string>& words);

}  // namespace densefeed
