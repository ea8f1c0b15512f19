// JSON Schema validation (draft 7, through valijson) of YAML documents, with
// errors placed at the offending line and column.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "yaml_document.h"

namespace densefeed {

class SchemaValidator {
 public:
  // Loads a JSON Schema file. Throws InfraError if it is missing or invalid
  // (schemas are part of densefeed's own checkout, so that is our fault).
  explicit SchemaValidator(const std::filesystem::path& schema_path);
  // A schema held in memory (e.g. an MCP tool's inputSchema); `label` names
  // it in the InfraError thrown when it is not a usable schema.
  SchemaValidator(const nlohmann::json& schema, const std::string& label);
  ~SchemaValidator();
  SchemaValidator(const SchemaValidator&) = delete;
  SchemaValidator& operator=(const SchemaValidator&) = delete;

  // Throws InputError naming the file, line, column and field of the deepest
  // violation, with what the schema expected there (type, enum, description).
  void validate(const YamlDocument& doc) const;

  // For densefeed's own JSON output: every violation as "POINTER: message"
  // (empty when valid).
  std::vector<std::string> errors(const nlohmann::json& value) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace densefeed
