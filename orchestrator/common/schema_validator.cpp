#include "schema_validator.h"

#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

namespace densefeed {
namespace {

// valijson reports a path as {"<root>", "[name]", "[0]", ...}. Walk the value
// alongside so that "[0]" is read as an index only where the value is an array.
std::string context_to_pointer(const std::vector<std::string>& context, const nlohmann::json& root) {
  std::string pointer;
  const nlohmann::json* node = &root;
  for (const auto& part : context) {
    if (part == "<root>" || part.size() < 2 || part.front() != '[' || part.back() != ']') continue;
    std::string token = part.substr(1, part.size() - 2);
    std::string escaped;
    for (char c : token) escaped += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
    pointer += "/" + escaped;
    if (node == nullptr) continue;
    if (node->is_array()) {
      std::size_t index = std::stoul(token);
      node = index < node->size() ? &(*node)[index] : nullptr;
    } else if (node->is_object() && node->contains(token)) {
      node = &(*node)[token];
    } else {
      node = nullptr;
    }
  }
  return pointer;
}

// The subschema that governs the value at `pointer`, following properties,
// additionalProperties and items (enough for densefeed's own schemas).
const nlohmann::json* resolve_ref(const nlohmann::json& root, const nlohmann::json* s) {
  for (int hops = 0; s != nullptr && s->is_object() && s->contains("$ref") && hops < 8; ++hops) {
    const auto ref = (*s)["$ref"].get<std::string>();
    if (ref.rfind("#", 0) != 0) return s;
    try {
      s = &root.at(nlohmann::json::json_pointer(ref.substr(1)));
    } catch (...) {
      return nullptr;
    }
  }
  return s;
}

const nlohmann::json* subschema_at(const nlohmann::json& schema, const std::string& pointer) {
  const nlohmann::json* s = resolve_ref(schema, &schema);
  if (pointer.empty()) return s;
  std::size_t pos = 0;
  while (pos < pointer.size() && s != nullptr) {
    std::size_t next = pointer.find('/', pos + 1);
    std::string token =
        pointer.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    if (s->contains("properties") && (*s)["properties"].contains(token)) {
      s = &(*s)["properties"][token];
    } else if (s->contains("additionalProperties") && (*s)["additionalProperties"].is_object()) {
      s = &(*s)["additionalProperties"];
    } else if (s->contains("items") && (*s)["items"].is_object()) {
      s = &(*s)["items"];
    } else {
      return nullptr;
    }
    s = resolve_ref(schema, s);
    if (next == std::string::npos) break;
    pos = next;
  }
  return s;
}

std::string describe_expectation(const nlohmann::json* s) {
  if (s == nullptr) return "";
  std::vector<std::string> parts;
  if (s->contains("type")) {
    const auto& t = (*s)["type"];
    parts.push_back("type " + (t.is_string() ? t.get<std::string>() : t.dump()));
  }
  if (s->contains("enum")) parts.push_back("one of " + (*s)["enum"].dump());
  if (s->contains("const")) parts.push_back("exactly " + (*s)["const"].dump());
  if (s->contains("minimum")) parts.push_back(fmt::format("minimum {}", (*s)["minimum"].dump()));
  if (s->contains("pattern")) parts.push_back("matching " + (*s)["pattern"].dump());
  if (s->contains("required")) parts.push_back("required keys " + (*s)["required"].dump());
  if (s->contains("properties") && s->value("additionalProperties", true) == false) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : (*s)["properties"].items()) keys.push_back(k);
    parts.push_back(fmt::format("allowed keys [{}]", fmt::join(keys, ", ")));
  }
  std::string out = fmt::format("{}", fmt::join(parts, ", "));
  if (s->contains("description") && (*s)["description"].is_string()) {
    out += (out.empty() ? "" : " — ") + (*s)["description"].get<std::string>();
  }
  return out;
}

// Pulls a quoted name out of valijson's messages such as
// "Missing required property 'gate'." or "...constraints: 'foo'."
std::string quoted_name(const std::string& text) {
  auto close = text.rfind('\'');
  if (close == std::string::npos || close == 0) return "";
  auto open = text.rfind('\'', close - 1);
  if (open == std::string::npos) return "";
  return text.substr(open + 1, close - open - 1);
}

}  // namespace

struct SchemaValidator::Impl {
  nlohmann::json schema_json;
  valijson::Schema schema;
};

SchemaValidator::SchemaValidator(const std::filesystem::path& schema_path) : impl_(std::make_unique<Impl>()) {
  std::ifstream in(schema_path);
  if (!in) throw InfraError(fmt::format("{}: cannot open the JSON Schema", schema_path.string()));
  try {
    impl_->schema_json = nlohmann::json::parse(in);
    valijson::SchemaParser parser;
    valijson::adapters::NlohmannJsonAdapter adapter(impl_->schema_json);
    parser.populateSchema(adapter, impl_->schema);
  } catch (const std::exception& e) {
    throw InfraError(fmt::format("{}: not a usable JSON Schema: {}", schema_path.string(), e.what()));
  }
}

SchemaValidator::SchemaValidator(const nlohmann::json& schema, const std::string& label) : impl_(std::make_unique<Impl>()) {
  try {
    impl_->schema_json = schema;
    valijson::SchemaParser parser;
    valijson::adapters::NlohmannJsonAdapter adapter(impl_->schema_json);
    parser.populateSchema(adapter, impl_->schema);
  } catch (const std::exception& e) {
    throw InfraError(fmt::format("{}: not a usable JSON Schema: {}", label, e.what()));
  }
}

SchemaValidator::~SchemaValidator() = default;

std::vector<std::string> SchemaValidator::errors(const nlohmann::json& value) const {
  valijson::Validator validator(valijson::Validator::kStrongTypes);
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter target(value);
  std::vector<std::string> out;
  if (validator.validate(impl_->schema, target, &results)) return out;
  valijson::ValidationResults::Error error;
  while (results.popError(error)) out.push_back(context_to_pointer(error.context, value) + ": " + error.description);
  return out;
}

void SchemaValidator::validate(const YamlDocument& doc) const {
  valijson::Validator validator(valijson::Validator::kStrongTypes);
  valijson::ValidationResults results;
  // valijson's adapter reads nlohmann::json; the document keeps file order.
  const nlohmann::json value = nlohmann::json::parse(doc.value.dump());
  valijson::adapters::NlohmannJsonAdapter target(value);
  if (validator.validate(impl_->schema, target, &results)) return;

  // valijson reports the innermost failure first and then each enclosing
  // "failed to validate ..." wrapper; the deepest one is the actionable one.
  valijson::ValidationResults::Error error;
  valijson::ValidationResults::Error deepest;
  bool have = false;
  while (results.popError(error)) {
    if (!have || error.context.size() > deepest.context.size()) {
      deepest = error;
      have = true;
    }
  }
  std::string pointer = context_to_pointer(deepest.context, value);
  const std::string& text = deepest.description;
  const std::string name = quoted_name(text);
  if (text.rfind("Missing required property", 0) == 0 && !name.empty()) {
    const std::string child = pointer + "/" + name;
    const std::string expected = describe_expectation(subschema_at(impl_->schema_json, child));
    throw InputError(doc.path, doc.mark_of(pointer), pointer_to_field(child),
                     "missing required field" + (expected.empty() ? "" : "; expected " + expected));
  }
  if (text.find("could not be validated using 'properties'") != std::string::npos && !name.empty()) {
    const std::string child = pointer + "/" + name;
    const std::string expected = describe_expectation(subschema_at(impl_->schema_json, pointer));
    throw InputError(doc.path, doc.key_mark_of(child), pointer_to_field(child),
                     "unknown key" + (expected.empty() ? "" : "; expected " + expected));
  }
  const std::string expected = describe_expectation(subschema_at(impl_->schema_json, pointer));
  std::string got;
  if (const auto* v = [&]() -> const nlohmann::json* {
        try {
          return &value.at(nlohmann::json::json_pointer(pointer));
        } catch (...) {
          return nullptr;
        }
      }()) {
    got = v->is_null() ? "; got null (an empty value)" : fmt::format("; got {} {}", v->type_name(), v->dump().substr(0, 80));
  }
  throw InputError(doc.path, doc.mark_of(pointer), pointer_to_field(pointer),
                   text + (expected.empty() ? "" : "; expected " + expected) + got);
}

}  // namespace densefeed
