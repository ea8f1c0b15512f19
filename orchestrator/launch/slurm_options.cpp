#include "slurm_options.h"

#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

extern char** environ;

namespace densefeed {

bool wants_exclusive(const AllocationRequest& request) {
  if (request.resources.exclusive) return *request.resources.exclusive;
  return request.stage == "bench" || request.stage == "acceptance";
}

std::string merged_gres(int gpus, const std::string& type, const std::string& sbatch_gres) {
  if (gpus <= 0) return "";
  std::string user_type;
  std::vector<std::string> others;
  std::stringstream in(sbatch_gres);
  for (std::string entry; std::getline(in, entry, ',');) {
    if (entry.empty()) continue;
    if (entry == "gpu" || entry.rfind("gpu:", 0) == 0) {
      // gpu:TYPE:N or gpu:N: keep only the type.
      const auto first = entry.find(':');
      const auto second = first == std::string::npos ? std::string::npos : entry.find(':', first + 1);
      if (second != std::string::npos) user_type = entry.substr(first + 1, second - first - 1);
      else if (first != std::string::npos && entry.substr(first + 1).find_first_not_of("0123456789") != std::string::npos)
        user_type = entry.substr(first + 1);
      continue;
    }
    others.push_back(entry);
  }
  const std::string& t = type.empty() ? user_type : type;
  std::string gres = t.empty() ? fmt::format("gpu:{}", gpus) : fmt::format("gpu:{}:{}", t, gpus);
  for (const auto& o : others) gres += "," + o;
  return gres;
}

std::map<std::string, std::string> sbatch_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind("SBATCH_", 0) != 0) continue;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::vector<std::string> slurm_resource_options(const AllocationRequest& request, long minutes,
                                                const std::map<std::string, std::string>& env, bool for_srun) {
  const ResourceRequest& r = request.resources;
  std::vector<std::string> o;
  if (r.cpus) o.push_back(fmt::format("--cpus-per-task={}", *r.cpus));
  if (!r.mem.empty()) o.push_back("--mem=" + r.mem);
  if (!r.constraint.empty()) o.push_back("--constraint=" + r.constraint);
  if (!r.partition.empty() && !for_srun) o.push_back("--partition=" + r.partition);
  const int gpus = r.gpus ? *r.gpus : request.gpus;
  const auto user_gres = env.find(for_srun ? "SLURM_GRES" : "SBATCH_GRES");
  const std::string gres = merged_gres(gpus, r.gpu_type, user_gres == env.end() ? "" : user_gres->second);
  if (!gres.empty()) o.push_back("--gres=" + gres);
  if (wants_exclusive(request)) o.push_back("--exclusive");
  if (!for_srun) {
    o.push_back(fmt::format("--time={}", r.time_min ? *r.time_min : minutes));
    if (request.resumable) {
      const char* s = std::getenv("DENSEFEED_SLURM_SIGNAL_S");
      const long before = s && std::atol(s) > 0 ? std::atol(s) : 120;
      o.push_back(fmt::format("--signal=B:USR1@{}", before));
      o.push_back("--requeue");
    }
  }
  return o;
}

}  // namespace densefeed
