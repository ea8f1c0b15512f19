#include "command_tree.h"

namespace densefeed {
namespace {

CommandOption to_option(const CLI::Option& opt) {
  CommandOption o;
  for (const auto& n : opt.get_lnames()) o.names.push_back("--" + n);
  for (const auto& n : opt.get_snames()) o.names.push_back("-" + n);
  if (opt.get_positional() && o.names.empty()) o.positional = opt.get_name();
  o.description = opt.get_description();
  o.takes_value = opt.get_expected_min() > 0 && !opt.get_positional();  // a flag expects 0 values (CLI11 add_flag)
  return o;
}

CommandNode to_node(const CLI::App& app, std::vector<std::string> path) {
  CommandNode node;
  node.path = std::move(path);
  node.description = app.get_description();
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_group().empty()) continue;
    node.options.push_back(to_option(*opt));
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* a) { return !a->get_group().empty(); })) {
    std::vector<std::string> child = node.path;
    child.push_back(sub->get_name());
    node.children.push_back(to_node(*sub, std::move(child)));
  }
  return node;
}

void collect(const CommandNode& node, std::vector<const CommandNode*>& out) {
  out.push_back(&node);
  for (const auto& c : node.children) collect(c, out);
}

}  // namespace

std::string CommandNode::path_text() const {
  std::string text;
  for (const auto& p : path) text += (text.empty() ? "" : " ") + p;
  return text;
}

CommandNode command_tree(const CLI::App& app) { return to_node(app, {}); }

std::vector<const CommandNode*> all_nodes(const CommandNode& top) {
  std::vector<const CommandNode*> out;
  collect(top, out);
  return out;
}

}  // namespace densefeed
