// What `densefeed help` (and --help) says beyond each verb's own help: the
// examples, the exit codes and a short description; the man page
// (man_page.h) prints the same text.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace densefeed {

struct HelpExample {
  std::string command;  // a real command line: "densefeed ledger list --verdict red"
  std::string what;     // what it does, one sentence
};

// The examples, in the order of a newcomer's first hour: init, run, status,
// ledger list, report, narrow, help.
const std::vector<HelpExample>& help_examples();

// The exit codes (exit_code.h), as "0", "green" pairs.
const std::vector<std::pair<std::string, std::string>>& help_exit_codes();

// A paragraph on what densefeed does, for the man page's DESCRIPTION.
std::string help_description();

// The footer of `densefeed --help` and `densefeed help`: EXAMPLES, the exit
// codes and where the documentation is.
std::string help_footer();

}  // namespace densefeed
