// A parameter of a gate that a manifest may set (gate.schema.json params).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace densefeed {

// `type` is one of string|integer|number|boolean.
struct ParamSpec {
  std::string name;
  std::string type;
  nlohmann::ordered_json enum_values;  // array, or null when any value of the type is allowed
  nlohmann::ordered_json default_value;
  std::string description;
};

}  // namespace densefeed
