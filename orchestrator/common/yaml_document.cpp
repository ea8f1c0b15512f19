#include "yaml_document.h"

#include <cctype>
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

}  // namespace

std::string trim_trailing_space(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

std::string pointer_token(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

namespace {

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
  if (std::regex_match(s, float_re)) {
    try {
      return std::stod(s);
    } catch (const std::out_of_range&) {
      return s;  // beyond a double: left as text, so a schema asking for a number names it
    }
  }
  // JSON has no Inf/NaN: keep them as strings so that a schema asking for a
  // number rejects them with a clear message.
  if (std::regex_match(s, inf_re) || std::regex_match(s, nan_re)) return s;
  return s;
}

// Aliases share nodes, so nine nested anchors can stand for a billion values
// ("billion laughs"); stop well before memory does.
constexpr std::size_t kMaxValues = 100'000;
constexpr int kMaxDepth = 128;

class Converter {
 public:
  explicit Converter(YamlDocument& doc) : doc_(doc) {}

  nlohmann::ordered_json convert(const YAML::Node& node, const std::string& pointer) {
    if (++values_ > kMaxValues) {
      throw InputError(doc_.path, to_mark(node.Mark()), pointer_to_field(pointer),
                       fmt::format("more than {} values (do aliases expand without bound?)", kMaxValues));
    }
    // A self-referencing alias (&a [*a]) is infinitely deep: stop long before the stack does.
    struct Depth {
      int& d;
      explicit Depth(int& depth) : d(++depth) {}
      ~Depth() { --d; }
    } depth(depth_);
    if (depth_ > kMaxDepth) {
      throw InputError(doc_.path, to_mark(node.Mark()), pointer_to_field(pointer.substr(0, 200)),
                       fmt::format("nested deeper than {} levels (a self-referencing alias?)", kMaxDepth));
    }
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
          const std::string child = pointer + "/" + pointer_token(name);
          if (name == "<<" && key.Tag() == "?") {
            throw InputError(doc_.path, to_mark(key.Mark()), pointer_to_field(pointer),
                             "YAML merge keys (<<) are not supported: write the keys out");
          }
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
  std::size_t values_ = 0;
  int depth_ = 0;
};

// Line and column (1-based) of byte `offset` in `text`.
SourceMark mark_at(const std::string& text, std::size_t offset) {
  SourceMark m{1, 1};
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++m.line;
      m.column = 1;
    } else {
      ++m.column;
    }
  }
  return m;
}

// Offset of the first byte that breaks UTF-8 (RFC 3629), or npos.
std::size_t invalid_utf8_at(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || c == 0xC0 || c == 0xC1 || c > 0xF4 || i + len > text.size()) return i;
    std::uint32_t cp = len == 1 ? c : c & (0x3F >> (len - 1));
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc >> 6) != 0x2) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return i;
    }
    i += len;
  }
  return std::string::npos;
}

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
    // An empty value (null) has no mark of its own: its key is where it is.
    if (auto it = key_marks.find(p); it != key_marks.end() && it->second.line > 0) return it->second;
    if (p.empty()) return {};
    p = parent_pointer(p);
  }
}

SourceMark YamlDocument::key_mark_of(const std::string& pointer) const {
  if (auto it = key_marks.find(pointer); it != key_marks.end()) return it->second;
  return mark_of(pointer);
}

void YamlDocument::fail(const std::string& pointer, const std::string& message) const {
  throw InputError(path, mark_of(pointer), pointer_to_field(pointer), origin.empty() ? message : message + " (" + origin + ")");
}

void YamlDocument::fail_at_key(const std::string& pointer, const std::string& message) const {
  throw InputError(path, key_mark_of(pointer), pointer_to_field(pointer), origin.empty() ? message : message + " (" + origin + ")");
}

YamlDocument parse_yaml(const std::string& text, const std::string& path) {
  YamlDocument doc;
  doc.path = path;
  doc.text = text;
  if (const auto bad = invalid_utf8_at(text); bad != std::string::npos) {
    throw InputError(path, mark_at(text, bad), "", fmt::format("byte 0x{:02X} is not valid UTF-8 (YAML text must be UTF-8)",
                                                               static_cast<unsigned char>(text[bad])));
  }
  if (const auto nul = text.find('\0'); nul != std::string::npos) {
    throw InputError(path, mark_at(text, nul), "", "a NUL byte: YAML text may not contain one");
  }
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    std::string hint;
    const SourceMark m = to_mark(e.mark);
    // yaml-cpp says "illegal map value" for tab indentation; say why.
    std::size_t line_start = 0;
    for (int l = 1; l < m.line && line_start != std::string::npos; ++l) {
      line_start = text.find('\n', line_start);
      if (line_start != std::string::npos) ++line_start;
    }
    if (line_start != std::string::npos) {
      const std::string line = text.substr(line_start, text.find('\n', line_start) - line_start);
      if (line.find('\t') != std::string::npos) hint = " (this line has a tab: YAML indents with spaces only)";
    }
    throw InputError(path, m, "", "not valid YAML: " + e.msg + hint);
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

YamlDocument load_yaml_file(const std::filesystem::path& path, std::size_t max_bytes) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw InputError(path.string(), {}, "", "no such file");
  if (std::filesystem::is_directory(status)) throw InputError(path.string(), {}, "", "is a directory, expected a YAML file");
  if (!std::filesystem::is_regular_file(status)) {
    throw InputError(path.string(), {}, "", "not a regular file (a device, FIFO or socket); expected a YAML file");
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > max_bytes) {
    throw InputError(path.string(), {}, "", fmt::format("{} bytes, more than the {} a YAML file here may have", size, max_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string(), {}, "", "cannot open the file for reading");
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > max_bytes) {
    throw InputError(path.string(), {}, "", fmt::format("more than the {} bytes a YAML file here may have", max_bytes));
  }
  return parse_yaml(text, path.string());
}

}  // namespace densefeed
