#include "yaml_document.h"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace densefeed {
namespace {

SourceMark to_mark(const YAML::Mark& m) {
  if (m.is_null()) return {};
  return {m.line + 1, m.column + 1};
}

std::string escape_pointer_token(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

// YAML 1.2 core schema resolution of a plain scalar
// (https://yaml.org/spec/1.2.2/#1023-core-schema).
nlohmann::ordered_json resolve_plain_scalar(const std::string& s) {
  static const std::regex null_re("^(null|Null|NULL|~|)$");
  static const std::regex true_re("^(true|True|TRUE)$");
  static const std::regex false_re("^(false|False|FALSE)$");
  static const std::regex int_re("^[-+]?[0-9]+$");
  static const std::regex float_re("^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$");
  static const std::regex inf_re("^[-+]?\\.(inf|Inf|INF)$");
  static const std::regex nan_re("^\\.(nan|NaN|NAN)$");
  if (std::regex_match(s, null_re)) return nullptr;
  if (std::regex_match(s, true_re)) return true;
  if (std::regex_match(s, false_re)) return false;
  if (std::regex_match(s, int_re)) {
    try {
      return std::stoll(s);
    } catch (const std::out_of_range&) {
      if (s[0] != '-') {
        try {
          return std::stoull(s);
        } catch (const std::out_of_range&) {
        }
      }
      return std::stod(s);
    }
  }
  if (std::regex_match(s, float_re)) return std::stod(s);
  // JSON has no Inf/NaN: keep them as strings so that a schema asking for a
  // number rejects them with a clear message.
  if (std::regex_match(s, inf_re) || std::regex_match(s, nan_re)) return s;
  return s;
}

class Converter {
 public:
  explicit Converter(YamlDocument& doc) : doc_(doc) {}

  nlohmann::ordered_json convert(const YAML::Node& node, const std::string& pointer) {
    doc_.value_marks[pointer] = to_mark(node.Mark());
    switch (node.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        return nullptr;
      case YAML::NodeType::Scalar:
        if (node.Tag() == "?") return resolve_plain_scalar(node.Scalar());
        return node.Scalar();  // quoted or explicitly tagged: a string
      case YAML::NodeType::Sequence: {
        nlohmann::ordered_json out = nlohmann::ordered_json::array();
        std::size_t i = 0;
        for (const auto& item : node) {
          out.push_back(convert(item, pointer + "/" + std::to_string(i)));
          ++i;
        }
        return out;
      }
      case YAML::NodeType::Map: {
        nlohmann::ordered_json out = nlohmann::ordered_json::object();
        std::map<std::string, SourceMark> seen;
        for (const auto& member : node) {
          const YAML::Node& key = member.first;
          if (!key.IsScalar()) {
            throw InputError(doc_.path, to_mark(key.Mark()), pointer_to_field(pointer),
                             "a mapping key must be a plain string");
          }
          const std::string name = key.Scalar();
          const std::string child = pointer + "/" + escape_pointer_token(name);
          if (auto it = seen.find(name); it != seen.end()) {
            throw InputError(doc_.path, to_mark(key.Mark()), pointer_to_field(child),
                             fmt::format("duplicate key '{}' (first defined at line {})", name,
                                         it->second.line));
          }
          seen[name] = to_mark(key.Mark());
          doc_.key_marks[child] = to_mark(key.Mark());
          out[name] = convert(member.second, child);
        }
        return out;
      }
    }
    return nullptr;
  }

 private:
  YamlDocument& doc_;
};

std::string parent_pointer(const std::string& pointer) {
  auto slash = pointer.rfind('/');
  if (slash == std::string::npos || pointer.empty()) return "";
  return pointer.substr(0, slash);
}

}  // namespace

std::string pointer_to_field(const std::string& pointer) {
  std::string out;
  std::size_t pos = 0;
  while (pos < pointer.size()) {
    std::size_t next = pointer.find('/', pos + 1);
    std::string token = pointer.substr(pos + 1, next == std::string::npos ? std::string::npos
                                                                        : next - pos - 1);
    std::string unescaped;
    for (std::size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size()) {
        unescaped += token[i + 1] == '1' ? '/' : '~';
        ++i;
      } else {
        unescaped += token[i];
      }
    }
    const bool is_index = !unescaped.empty() &&
                          unescaped.find_first_not_of("0123456789") == std::string::npos;
    if (is_index) out += "[" + unescaped + "]";
    else out += (out.empty() ? "" : ".") + unescaped;
    if (next == std::string::npos) break;
    pos = next;
  }
  return out;
}

SourceMark YamlDocument::mark_of(const std::string& pointer) const {
  std::string p = pointer;
  while (true) {
    if (auto it = value_marks.find(p); it != value_marks.end() && it->second.line > 0) {
      return it->second;
    }
    if (p.empty()) return {};
    p = parent_pointer(p);
  }
}

SourceMark YamlDocument::key_mark_of(const std::string& pointer) const {
  if (auto it = key_marks.find(pointer); it != key_marks.end()) return it->second;
  return mark_of(pointer);
}

void YamlDocument::fail(const std::string& pointer, const std::string& message) const {
  throw InputError(path, mark_of(pointer), pointer_to_field(pointer), message);
}

void YamlDocument::fail_at_key(const std::string& pointer, const std::string& message) const {
  throw InputError(path, key_mark_of(pointer), pointer_to_field(pointer), message);
}

YamlDocument parse_yaml(const std::string& text, const std::string& path) {
  YamlDocument doc;
  doc.path = path;
  doc.text = text;
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(path, to_mark(e.mark), "", "not valid YAML: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw InputError(path, to_mark(e.mark), "", "not valid YAML: " + e.msg);
  }
  if (documents.size() != 1) {
    throw InputError(path, {}, "",
                     fmt::format("expected exactly one YAML document, found {}", documents.size()));
  }
  Converter converter(doc);
  doc.value = converter.convert(documents.front(), "");
  return doc;
}

YamlDocument load_yaml_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string(), {}, "", "cannot open the file for reading");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return parse_yaml(buffer.str(), path.string());
}

}  // namespace densefeed
