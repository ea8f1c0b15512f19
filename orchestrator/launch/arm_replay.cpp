#include "arm_replay.h"

namespace densefeed {

nlohmann::ordered_json arm_replay_json(const ArmContext& arm) {
  nlohmann::ordered_json dirs = nlohmann::ordered_json::array();
  for (const auto& d : arm.exe_dirs) dirs.push_back(d.string());
  nlohmann::ordered_json env = nlohmann::ordered_json::object();
  for (const auto& [k, v] : arm.env) env[k] = v;
  return {{"label", arm.label},       {"project", arm.project.string()}, {"gate_dir", arm.gate_dir.string()},
          {"exe_dirs", dirs},         {"python", arm.python.string()},   {"env", env}};
}

std::optional<ArmContext> arm_from_replay_json(const nlohmann::ordered_json& j) {
  if (!j.is_object() || !j.contains("project") || !j["project"].is_string()) return std::nullopt;
  const auto text = [&](const char* key) { return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string(); };
  ArmContext arm;
  arm.label = text("label");
  arm.project = text("project");
  arm.gate_dir = text("gate_dir");
  arm.python = text("python");
  if (j.contains("exe_dirs") && j["exe_dirs"].is_array()) {
    for (const auto& d : j["exe_dirs"]) {
      if (d.is_string()) arm.exe_dirs.emplace_back(d.get<std::string>());
    }
  }
  if (j.contains("env") && j["env"].is_object()) {
    for (const auto& [k, v] : j["env"].items()) {
      if (v.is_string()) arm.env[k] = v.get<std::string>();
    }
  }
  return arm;
}

}  // namespace densefeed
