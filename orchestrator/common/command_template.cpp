#include "command_template.h"

#include <stdexcept>

#include "case_grid.h"

namespace densefeed {
namespace {

// Calls `on_placeholder(name)` for each "{name}" in `text` and returns the
// text with each replaced by what it returns.
template <typename F>
std::string substitute(const std::string& text, F&& on_placeholder) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t open = text.find('{', pos);
    if (open == std::string::npos) {
      out += text.substr(pos);
      break;
    }
    std::size_t close = text.find('}', open);
    if (close == std::string::npos) {
      throw std::invalid_argument("unterminated placeholder in '" + text + "'");
    }
    out += text.substr(pos, open - pos);
    out += on_placeholder(text.substr(open + 1, close - open - 1));
    pos = close + 1;
  }
  return out;
}

void check_name(const std::string& name) {
  if (name == "seed" || name == "out" || name == "src" || name == "build" || name == "project" || name == "gate_dir") return;
  if ((name.rfind("case.", 0) == 0 && name.size() > 5) || (name.rfind("param.", 0) == 0 && name.size() > 6)) {
    return;
  }
  throw std::invalid_argument("unknown placeholder '{" + name +
                              "}' (expected {case.NAME}, {param.NAME}, {seed}, {out}, {project}, {gate_dir}, or in build commands {src} and {build})");
}

}  // namespace

std::set<std::string> placeholders(const std::vector<std::string>& argv) {
  std::set<std::string> names;
  for (const auto& arg : argv) {
    substitute(arg, [&](const std::string& name) {
      check_name(name);
      names.insert(name);
      return std::string();
    });
  }
  return names;
}

std::vector<std::string> render_command(const std::vector<std::string>& argv, const TemplateValues& values) {
  std::vector<std::string> out;
  for (const auto& arg : argv) {
    out.push_back(substitute(arg, [&](const std::string& name) -> std::string {
      check_name(name);
      if (name == "seed") return std::to_string(values.seed);
      if (name == "out") return values.out;
      if (name == "src" || name == "build") {
        const std::string& v = name == "src" ? values.src : values.build;
        if (v.empty()) throw std::invalid_argument("placeholder '{" + name + "}' is for build commands only");
        return v;
      }
      if (name == "project" || name == "gate_dir") {
        const std::string& v = name == "project" ? values.project : values.gate_dir;
        if (v.empty()) throw std::invalid_argument("placeholder '{" + name + "}' has no value here");
        return v;
      }
      const bool is_case = name.rfind("case.", 0) == 0;
      const std::string key = name.substr(is_case ? 5 : 6);
      const auto& source = is_case ? values.case_values : values.params;
      if (!source.contains(key)) throw std::invalid_argument("placeholder '{" + name + "}' has no value");
      return scalar_text(source[key]);
    }));
  }
  return out;
}

}  // namespace densefeed
