// A YAML file read into JSON, remembering where every value and key came from,
// so that later stages (schema validation, gate checks) can name the line and
// column of whatever they reject.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "error.h"

namespace densefeed {

struct YamlDocument {
  std::string path;   // as given by the user; used in every error message
  // Where the text came from when it is not the file at `path` as it is now
  // ("as committed on main at 1a2b3c4d5e6f: ..."): appended to every error
  // fail() and fail_at_key() throw. '' for a plain read.
  std::string origin;
  std::string text;   // the raw bytes of the file
  nlohmann::ordered_json value;  // keys in file order
  // JSON pointer ("/candidate/params/precision") -> where the value starts.
  std::map<std::string, SourceMark> value_marks;
  // JSON pointer of a mapping member -> where its key starts.
  std::map<std::string, SourceMark> key_marks;

  // The mark of the value at `pointer`, or of its nearest recorded ancestor.
  SourceMark mark_of(const std::string& pointer) const;
  // The mark of the key of the member at `pointer` (falls back to mark_of).
  SourceMark key_mark_of(const std::string& pointer) const;
  // Throws InputError located at `pointer`, naming it as a dotted field.
  [[noreturn]] void fail(const std::string& pointer, const std::string& message) const;
  [[noreturn]] void fail_at_key(const std::string& pointer, const std::string& message) const;
};

// "/candidate/params/precision" -> "candidate.params.precision"; "/a/0" -> "a[0]".
std::string pointer_to_field(const std::string& pointer);

// Parses YAML 1.2 text (core schema: plain scalars become null, bool, integer
// or float where they look like one; quoted scalars stay strings).
// Throws InputError for a syntax error, a duplicate key, or a non-scalar key.
YamlDocument parse_yaml(const std::string& text, const std::string& path);

// Reads and parses a regular file of at most `max_bytes`. Throws InputError
// when it is missing, not a regular file, too large, or cannot be read.
YamlDocument load_yaml_file(const std::filesystem::path& path, std::size_t max_bytes = 1 << 20);

// `text` without trailing whitespace: folded scalars (">") end in a newline
// that is not part of the field.
std::string trim_trailing_space(std::string text);

// A mapping key as a JSON pointer token ('~' -> "~0", '/' -> "~1").
std::string pointer_token(const std::string& key);

}  // namespace densefeed
