// Lines of a program's output (git's, tar's): the pieces densefeed reads
// back from the helper programs it runs on the trusted side.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace densefeed {

// `text` up to its first '\n' (all of it when it has none).
inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The lines of `text` that are not empty, in order, without their '\n'.
inline std::vector<std::string> nonempty_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

}  // namespace densefeed
