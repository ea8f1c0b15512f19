// An experiment manifest (experiments/*.yaml, schema in
// schemas/experiment.schema.json): what an agent submits. Everything in it is
// untrusted: it may only choose values for the parameters its gate declares.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gate_spec.h"
#include "yaml_document.h"

namespace densefeed {

// One arm of the experiment: a revision ("WORKTREE" = the project folder as
// it is) and the gate parameters it sets.
struct Arm {
  std::string revision;
  nlohmann::ordered_json params;  // object; as written in the manifest
};

struct Manifest {
  YamlDocument doc;      // text, path and source marks
  std::string sha256;    // of the manifest's bytes
  std::string name;
  std::string author;
  std::string hypothesis;
  std::string predicted_effect;
  std::optional<double> predicted_speedup;  // base time / candidate time the author expects
  std::string gate;
  std::vector<std::string> risk;
  Arm candidate;
  Arm base;
  // Pre-registered end-to-end criteria: {command, statistic, timeout_s,
  // criteria[]} as written (null when absent); bound by sha256 at submission.
  nlohmann::ordered_json acceptance;
  // Trace stage: {command, window, timeout_s, checks[]} as written (null when absent).
  nlohmann::ordered_json trace;
};

struct GateStore;
struct Project;

// Reads and validates a manifest against densefeed's experiment schema and
// checks that its gate is in the gate store (saying so when the gate exists
// only in the project's worktree). Throws InputError (file:line:column,
// field, what was expected).
Manifest load_manifest(const std::filesystem::path& path, const GateStore& store, const Project& project);
// The same for a manifest's text (a queued one, read back from the ledger);
// `label` names it in errors.
Manifest parse_manifest(const std::string& text, const std::string& label, const GateStore& store, const Project& project);

// Checks an arm's params against the gate (declared, right type, in the enum)
// and returns them completed with the gate's defaults. Throws InputError
// located at the offending parameter in the manifest.
nlohmann::ordered_json resolve_params(const Manifest& manifest, const std::string& arm_field, const Arm& arm,
                                      const GateSpec& gate);

}  // namespace densefeed
