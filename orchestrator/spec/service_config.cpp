#include "service_config.h"

#include <grp.h>
#include <pwd.h>

#include <fmt/format.h>

#include "error.h"
#include "install_paths.h"
#include "schema_validator.h"
#include "yaml_document.h"

namespace densefeed {

namespace {

uid_t person_uid(const YamlDocument& doc, const std::string& pointer, const nlohmann::ordered_json& v) {
  if (v.is_number_integer()) return static_cast<uid_t>(v.get<std::int64_t>());
  const std::string login = v.get<std::string>();
  const struct passwd* pw = ::getpwnam(login.c_str());
  if (pw == nullptr) doc.fail(pointer, fmt::format("expected a login of this machine or a uid, got '{}' (no such user)", login));
  return pw->pw_uid;
}

}  // namespace

ServiceConfig load_service_config(const std::filesystem::path& file) {
  const YamlDocument doc = load_yaml_file(file);
  SchemaValidator(schema_path("service.schema.json")).validate(doc);
  const auto& v = doc.value;
  ServiceConfig c;
  c.file = std::filesystem::absolute(file);
  c.repository = std::filesystem::path(v["repository"].get<std::string>()).lexically_normal();
  c.trusted_ref = v["trusted_ref"].get<std::string>();
  if (c.trusted_ref.find("..") != std::string::npos || c.trusted_ref.front() == '-' || c.trusted_ref.front() == '/') {
    doc.fail("/trusted_ref", fmt::format("expected a branch name, got '{}'", c.trusted_ref));
  }
  c.state = std::filesystem::path(v["state"].get<std::string>()).lexically_normal();
  c.socket = std::filesystem::path(v["socket"].get<std::string>()).lexically_normal();
  if (v.contains("project")) {
    const std::filesystem::path p(v["project"].get<std::string>());
    if (p.is_absolute() || p.lexically_normal().string().rfind("..", 0) == 0) {
      doc.fail("/project", fmt::format("expected a folder inside the repository (relative, without '..'), got '{}'", p.string()));
    }
    c.project = p.lexically_normal().string();
  }
  if (c.socket.parent_path() == c.state || c.socket.string().rfind(c.state.string() + "/", 0) == 0) {
    doc.fail("/socket", "expected a socket outside the state folder (the state folder is mode 0700: no agent could reach it)");
  }
  if (v.contains("socket_group")) {
    c.socket_group = v["socket_group"].get<std::string>();
    if (::getgrnam(c.socket_group.c_str()) == nullptr) {
      doc.fail("/socket_group", fmt::format("expected a group of this machine, got '{}' (no such group)", c.socket_group));
    }
  }
  if (v.contains("people")) {
    for (std::size_t i = 0; i < v["people"].size(); ++i) {
      c.people.push_back(person_uid(doc, "/people/" + std::to_string(i), v["people"][i]));
    }
  }
  if (v.contains("head_witness")) c.head_witness = v["head_witness"].get<std::vector<std::string>>();
  if (v.contains("worker")) {
    const auto& w = v["worker"];
    c.worker.slots = w.value("slots", c.worker.slots);
    c.worker.profile = w.value("profile", c.worker.profile);
    c.worker.gpus = w.value("gpus", c.worker.gpus);
    c.worker.executor = w.value("executor", c.worker.executor);
    c.worker.jobs = w.value("jobs", c.worker.jobs);
  }
  if (v.contains("snapshot_limit_mb")) c.snapshot_limit_bytes = v["snapshot_limit_mb"].get<std::uint64_t>() << 20;
  return c;
}

}  // namespace densefeed
