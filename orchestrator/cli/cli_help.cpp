#include "cli_help.h"

#include <algorithm>
#include <iostream>
#include <numeric>

#include <fmt/format.h>

#include "command_tree.h"
#include "densefeed_version.h"
#include "exit_code.h"
#include "help_text.h"
#include "man_page.h"
#include "printable.h"
#include "shell_completion.h"

namespace densefeed {
namespace {

std::string join(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& w : words) text += (text.empty() ? "" : " ") + w;
  return text;
}

void generate(const CLI::App& app, const std::string& what) {
  const CommandNode tree = command_tree(app);
  if (what == "man") std::cout << man_page(tree, DENSEFEED_VERSION);
  else if (what == "bash") std::cout << bash_completion(tree);
  else if (what == "zsh") std::cout << zsh_completion(tree);
  else if (what == "fish") std::cout << fish_completion(tree);
  else throw CLI::ValidationError("--generate", fmt::format("expected man, bash, zsh or fish, got '{}'", what));
  std::cout.flush();
  throw CLI::Success();
}

// The option `word` ("--ledger", "--ledger=x", "-o") names on `app` or the
// verbs above it (CLI11 lets a verb's options follow its subcommand).
const CLI::Option* option_named(const CLI::App* app, const std::string& word) {
  const std::string name = word.substr(0, word.find('='));
  for (; app != nullptr; app = app->get_parent()) {
    if (const CLI::Option* opt = app->get_option_no_throw(name)) return opt;
  }
  return nullptr;
}

std::string closest_subcommand(const CLI::App& app, const std::string& word) {
  std::string best;
  std::size_t best_distance = 0;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); })) {
    const std::size_t d = edit_distance(word, sub->get_name());
    if (best.empty() || d < best_distance) best = sub->get_name(), best_distance = d;
  }
  return best;
}

// CLI11 2.1 has no get_subcommand_no_throw.
const CLI::App* subcommand_named(const CLI::App& app, const std::string& word) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(word)) return sub;
  }
  return nullptr;
}

bool has_positionals(const CLI::App& app) {
  return !app.get_options([](const CLI::Option* o) { return o->get_positional(); }).empty();
}

}  // namespace

HelpVerb add_help_verb(CLI::App& app) {
  HelpVerb help{app.add_subcommand("help", "print the help of densefeed (with examples) or of one verb: densefeed help ledger list"),
                std::make_shared<std::vector<std::string>>()};
  help.app->add_option("VERB", *help.topic, "the verb (and its subcommand) to print the help of");
  app.add_option_function<std::string>("--generate", [&app](const std::string& what) { generate(app, what); },
                                       "print the man page or a shell completion script (man, bash, zsh, fish)")
      ->trigger_on_parse()
      ->group("");
  app.footer(help_footer());
  return help;
}

std::string UnknownCommand::message() const {
  std::vector<std::string> typed = parent, suggested = parent;
  typed.push_back(word);
  suggested.push_back(closest);
  // The typed word is the caller's, shown as text: its control characters escaped (printable.h).
  std::string text = fmt::format("unknown command '{}'", one_line(join(typed)));
  if (!closest.empty()) text += fmt::format(" (did you mean '{}'?)", join(suggested));
  return text + fmt::format("; see densefeed {}--help", parent.empty() ? "" : join(parent) + " ");
}

std::optional<UnknownCommand> find_unknown_command(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* node = &app;
  std::vector<std::string> parent;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") return std::nullopt;
    if (word.size() > 1 && word[0] == '-') {
      const CLI::Option* opt = option_named(node, word);
      if (opt != nullptr && opt->get_expected_min() > 0 && word.find('=') == std::string::npos) ++i;
      continue;
    }
    if (node->get_subcommands([](const CLI::App*) { return true; }).empty() || has_positionals(*node)) return std::nullopt;
    const CLI::App* sub = subcommand_named(*node, word);
    if (sub == nullptr) return UnknownCommand{parent, word, closest_subcommand(*node, word)};
    parent.push_back(word);
    node = sub;
  }
  return std::nullopt;
}

int print_help(const CLI::App& app, const std::vector<std::string>& topic, std::ostream& out, std::ostream& err) {
  if (const auto unknown = find_unknown_command(app, topic)) {
    err << "densefeed: " << unknown->message() << "\n";
    return kExitUsage;
  }
  // As --help names it ("densefeed ledger list"); App::help() would print
  // the parsed `help` verb's own help instead.
  const CLI::App* node = &app;
  std::string name = app.get_name();
  for (const auto& word : topic) {
    const CLI::App* sub = subcommand_named(*node, word);
    if (sub == nullptr) break;  // an argument of a verb with positionals: that verb's help
    node = sub;
    name += " " + sub->get_name();
  }
  out << node->get_formatter()->make_help(node, name, CLI::AppFormatMode::Normal);
  return 0;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace densefeed
