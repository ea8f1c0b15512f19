#include "resources_spec.h"

namespace densefeed {
namespace {

ResourceRequest read_request(const nlohmann::ordered_json& v) {
  ResourceRequest r;
  if (!v.is_object()) return r;
  if (v.contains("cpus")) r.cpus = v["cpus"].get<int>();
  if (v.contains("mem")) r.mem = v["mem"].is_string() ? v["mem"].get<std::string>() : std::to_string(v["mem"].get<long long>());
  if (v.contains("gpus")) r.gpus = v["gpus"].get<int>();
  r.gpu_type = v.value("gpu_type", std::string());
  r.constraint = v.value("constraint", std::string());
  r.partition = v.value("partition", std::string());
  if (v.contains("time")) r.time_min = v["time"].get<long>();
  if (v.contains("exclusive")) r.exclusive = v["exclusive"].get<bool>();
  if (v.contains("array_throttle")) r.array_throttle = v["array_throttle"].get<int>();
  return r;
}

}  // namespace

ResourceRequest StageResources::for_stage(const std::string& stage) const {
  ResourceRequest r = under ? under->for_stage(stage) : ResourceRequest{};
  r = overlay(r, all);
  if (auto it = stages.find(stage); it != stages.end()) r = overlay(r, it->second);
  return r;
}

StageResources read_resources(const nlohmann::ordered_json& v) {
  StageResources s;
  if (!v.is_object()) return s;
  s.all = read_request(v);
  for (const char* stage : {"gate", "bench", "trace", "acceptance", "build"}) {
    if (v.contains(stage)) s.stages[stage] = read_request(v[stage]);
  }
  return s;
}

StageResources layered(const StageResources& under, StageResources over) {
  over.under = std::make_shared<const StageResources>(under);
  return over;
}

}  // namespace densefeed
