#include "launch_json.h"

#include "process_json.h"

namespace densefeed {
namespace {

using J = nlohmann::json;

J paths(const std::vector<std::filesystem::path>& v) {
  J a = J::array();
  for (const auto& p : v) a.push_back(p.string());
  return a;
}

std::vector<std::filesystem::path> paths(const J& a) {
  std::vector<std::filesystem::path> v;
  for (const auto& p : a) v.emplace_back(p.get<std::string>());
  return v;
}

J arm_to_json(const ArmContext& a) {
  return {{"label", a.label},         {"project", a.project.string()}, {"gate_dir", a.gate_dir.string()},
          {"exe_dirs", paths(a.exe_dirs)}, {"python", a.python.string()}, {"env", a.env},
          {"python_path", paths(a.python_path)},
          {"readable", paths(a.readable)}, {"hidden", paths(a.hidden)}, {"env_allow", a.env_allow}};
}

void arm_from_json(const J& j, ArmContext& a) {
  a.label = j.at("label").get<std::string>();
  a.project = j.at("project").get<std::string>();
  a.gate_dir = j.at("gate_dir").get<std::string>();
  a.exe_dirs = paths(j.at("exe_dirs"));
  a.python = j.at("python").get<std::string>();
  a.env = j.at("env").get<std::map<std::string, std::string>>();
  a.python_path = paths(j.at("python_path"));
  a.readable = paths(j.at("readable"));
  a.hidden = paths(j.at("hidden"));
  a.env_allow = j.at("env_allow").get<std::vector<std::string>>();
}


}  // namespace

nlohmann::json launch_to_json(const Launch& launch) {
  J j;
  const UntrustedCommand& c = launch.untrusted;
  j["command"] = {{"argv", c.argv},
                  {"arm", c.arm ? arm_to_json(*c.arm) : J(nullptr)},
                  {"env", c.env},
                  {"cwd", c.cwd.string()},
                  {"writable", paths(c.writable)},
                  {"readable", paths(c.readable)},
                  {"stdout_path", c.stdout_path.string()},
                  {"stderr_path", c.stderr_path.string()},
                  {"timeout_ms", c.timeout.count()},
                  {"limits",
                   {{"memory_bytes", c.limits.memory_bytes},
                    {"processes", c.limits.processes},
                    {"file_size_bytes", c.limits.file_size_bytes},
                    {"tmp_bytes", c.limits.tmp_bytes}}},
                  {"sandbox", c.sandbox},
                  {"rank_env", c.rank_env}};
  return j;
}

std::unique_ptr<DecodedLaunch> launch_from_json(const nlohmann::json& j) {
  auto d = std::make_unique<DecodedLaunch>();
  Launch& l = d->launch;
  const J& c = j.at("command");
  UntrustedCommand& u = l.untrusted;
  u.argv = c.at("argv").get<std::vector<std::string>>();
  if (!c.at("arm").is_null()) {
    arm_from_json(c.at("arm"), d->arm);
    u.arm = &d->arm;
  }
  u.env = c.at("env").get<std::map<std::string, std::string>>();
  u.cwd = c.at("cwd").get<std::string>();
  u.writable = paths(c.at("writable"));
  u.readable = paths(c.at("readable"));
  u.stdout_path = c.at("stdout_path").get<std::string>();
  u.stderr_path = c.at("stderr_path").get<std::string>();
  u.timeout = std::chrono::milliseconds(c.at("timeout_ms").get<long long>());
  const J& lim = c.at("limits");
  u.limits.memory_bytes = lim.at("memory_bytes").get<std::uint64_t>();
  u.limits.processes = lim.at("processes").get<std::uint64_t>();
  u.limits.file_size_bytes = lim.at("file_size_bytes").get<std::uint64_t>();
  u.limits.tmp_bytes = lim.at("tmp_bytes").get<std::uint64_t>();
  u.sandbox = c.at("sandbox").get<bool>();
  u.rank_env = c.value("rank_env", std::vector<std::map<std::string, std::string>>{});
  return d;
}

nlohmann::json launch_result_to_json(const LaunchResult& r) {
  J ranks = J::array();
  for (const auto& k : r.result.ranks) ranks.push_back(rank_outcome_to_json(k));
  return {{"process", process_result_to_json(r.result.process)},
          {"limit", r.result.limit},
          {"sandboxed", r.result.sandboxed},
          {"containment", r.result.containment},
          {"ranks", ranks},
          {"gpu", r.gpu},
          {"placement", placement_to_json(r.placement)},
          {"infrastructure", r.infrastructure},
          {"started_at", r.started_at}};
}

LaunchResult launch_result_from_json(const nlohmann::json& j) {
  LaunchResult r;
  r.result.process = process_result_from_json(j.at("process"));
  r.result.limit = j.at("limit").get<std::string>();
  r.result.sandboxed = j.at("sandboxed").get<bool>();
  r.result.containment = j.at("containment").get<std::string>();
  for (const auto& k : j.value("ranks", J::array())) r.result.ranks.push_back(rank_outcome_from_json(k));
  r.gpu = j.at("gpu").get<std::string>();
  r.placement = placement_from_json(j.at("placement"));
  r.infrastructure = j.at("infrastructure").get<std::string>();
  r.started_at = j.at("started_at").get<double>();
  return r;
}

}  // namespace densefeed
