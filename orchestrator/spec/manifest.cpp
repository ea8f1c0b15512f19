#include "manifest.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "acceptance.h"
#include "error.h"
#include "gate_store.h"
#include "install_paths.h"
#include "project.h"
#include "schema_validator.h"
#include "sha256.h"

namespace densefeed {
namespace {

bool has_type(const nlohmann::ordered_json& v, const std::string& type) {
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "integer") return v.is_number_integer() || v.is_number_unsigned();
  if (type == "number") return v.is_number();
  return false;
}

Arm read_arm(const nlohmann::ordered_json& v) {
  return Arm{v["revision"].get<std::string>(), v.value("params", nlohmann::ordered_json::object())};
}

}  // namespace

namespace {

Manifest from_document(YamlDocument doc, const GateStore& store, const Project& project);

}  // namespace

Manifest load_manifest(const std::filesystem::path& path, const GateStore& store, const Project& project) {
  return from_document(load_yaml_file(path), store, project);
}

Manifest parse_manifest(const std::string& text, const std::string& label, const GateStore& store, const Project& project) {
  return from_document(parse_yaml(text, label), store, project);
}

namespace {

Manifest from_document(YamlDocument doc, const GateStore& store, const Project& project) {
  Manifest m;
  m.doc = std::move(doc);
  SchemaValidator(schema_path("experiment.schema.json")).validate(m.doc);
  const auto& v = m.doc.value;
  m.sha256 = sha256_hex(m.doc.text);
  m.name = v["experiment"].get<std::string>();
  m.author = v.value("author", "");
  m.hypothesis = trim_trailing_space(v["hypothesis"].get<std::string>());
  m.predicted_effect = trim_trailing_space(v["predicted_effect"].get<std::string>());
  m.gate = v["gate"].get<std::string>();
  if (v.contains("predicted_speedup")) m.predicted_speedup = v["predicted_speedup"].get<double>();
  m.risk = v.value("risk", std::vector<std::string>{});
  m.candidate = read_arm(v["candidate"]);
  m.base = read_arm(v["base"]);
  if (v.contains("acceptance")) {
    m.acceptance = v["acceptance"];
    const auto& criteria = m.acceptance["criteria"];
    for (std::size_t i = 0; i < criteria.size(); ++i) {
      try {
        parse_criterion(criteria[i].get<std::string>());
      } catch (const std::invalid_argument& e) {
        m.doc.fail(fmt::format("/acceptance/criteria/{}", i), e.what());
      }
    }
  }
  if (v.contains("trace")) m.trace = v["trace"];
  if (!std::filesystem::is_regular_file(store.path(store.gate_rel(m.gate)))) {
    m.doc.fail("/gate", missing_gate_message(store, m.gate) + (store.worktree ? "" : "; or pass --trust-worktree to run the draft"));
  }
  return m;
}

}  // namespace

nlohmann::ordered_json resolve_params(const Manifest& manifest, const std::string& arm_field, const Arm& arm,
                                      const GateSpec& gate) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [name, value] : arm.params.items()) {
    const std::string ptr = "/" + arm_field + "/params/" + pointer_token(name);
    const ParamSpec* spec = gate.find_param(name);
    if (spec == nullptr) {
      std::vector<std::string> declared;
      for (const auto& p : gate.params) declared.push_back(p.name);
      manifest.doc.fail_at_key(ptr, fmt::format("gate '{}' declares no parameter '{}' (declared: {}); a manifest "
                                                "may set only the gate's parameters",
                                                gate.name, name, fmt::join(declared, ", ")));
    }
    if (!has_type(value, spec->type)) {
      manifest.doc.fail(ptr, fmt::format("expected {} ({}), got {}", spec->type, trim_trailing_space(spec->description),
                                         value.is_null() ? "null" : std::string(value.type_name()) + " " + value.dump()));
    }
    if (spec->enum_values.is_array() &&
        std::find(spec->enum_values.begin(), spec->enum_values.end(), value) == spec->enum_values.end()) {
      manifest.doc.fail(ptr, fmt::format("expected one of {}, got {}", spec->enum_values.dump(), value.dump()));
    }
    out[name] = value;
  }
  for (const auto& p : gate.params) {
    if (out.contains(p.name)) continue;
    if (p.default_value.is_null()) {
      manifest.doc.fail("/" + arm_field + "/params",
                        fmt::format("missing parameter '{}' ({}), which gate '{}' requires", p.name,
                                    trim_trailing_space(p.description), gate.name));
    }
    out[p.name] = p.default_value;
  }
  return out;
}

}  // namespace densefeed
