#include "placement.h"

namespace densefeed {

Placement local_placement() { return Placement{"local", "", ""}; }

bool ran_elsewhere(const Placement& p) { return !p.executor.empty() && p.executor != "local"; }

std::string to_string(const Placement& p) {
  std::string s = p.executor;
  if (!p.job.empty()) s += " job " + p.job;
  if (!p.node.empty()) s += " on " + p.node;
  return s;
}

nlohmann::json placement_to_json(const Placement& p) { return {{"executor", p.executor}, {"job", p.job}, {"node", p.node}}; }

Placement placement_from_json(const nlohmann::json& j) {
  return Placement{j.at("executor").get<std::string>(), j.at("job").get<std::string>(), j.at("node").get<std::string>()};
}

}  // namespace densefeed
