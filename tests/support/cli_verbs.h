// The densefeed CLI's verbs as its own --help lists them ("submit",
// "ledger show", ...), so tests follow the CLI instead of a copied list.
#pragma once

#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"

namespace densefeed::testing {

struct CliVerbInfo {
  std::string help;       // its --help text
  bool has_subcommands = false;
};

// Every verb path (leaves and groups) with its help text. `root_args` go
// before the verb (e.g. {"--project", DIR}).
inline std::map<std::string, CliVerbInfo> cli_verbs(const std::string& exe, const std::vector<std::string>& root_args = {}) {
  const std::regex subcommand_line(R"(^  ([a-z][a-z-]*)\s{2,}\S)");
  std::map<std::string, CliVerbInfo> verbs;
  std::vector<std::string> pending = {""};
  while (!pending.empty()) {
    const std::string verb = pending.back();
    pending.pop_back();
    std::vector<std::string> args = root_args;
    std::istringstream words(verb);
    for (std::string w; words >> w;) args.push_back(w);
    args.push_back("--help");
    CliVerbInfo info;
    info.help = run_cli(exe, args, std::filesystem::temp_directory_path()).out;
    bool in_section = false;
    std::istringstream lines(info.help);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("Subcommands:", 0) == 0 || line.rfind("SUBCOMMANDS:", 0) == 0) {
        in_section = true;
        continue;
      }
      std::smatch m;
      if (in_section && std::regex_search(line, m, subcommand_line)) {
        info.has_subcommands = true;
        pending.push_back(verb.empty() ? m[1].str() : verb + " " + m[1].str());
      } else if (in_section && !line.empty() && line[0] != ' ') {
        in_section = false;
      }
    }
    if (!verb.empty()) verbs[verb] = info;
  }
  return verbs;
}

// The longest verb path that starts `words` ("ledger show" for
// {"ledger", "show", "1"}); "" when none does.
inline std::string verb_of(const std::map<std::string, CliVerbInfo>& verbs, const std::vector<std::string>& words) {
  std::string best, path;
  for (const auto& w : words) {
    path += (path.empty() ? "" : " ") + w;
    if (verbs.count(path)) best = path;
    else break;
  }
  return best;
}

}  // namespace densefeed::testing
