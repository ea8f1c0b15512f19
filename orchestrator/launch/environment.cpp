#include "environment.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "process_runner.h"

namespace densefeed {

Environment collect_environment() {
  Environment e;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) e.host = host;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      e.cpu_model = line.substr(line.find(':') + 2);
      break;
    }
  }
  if (!resolve_executable("nvidia-smi").empty()) {
    if (const auto out = capture_output({"nvidia-smi", "--query-gpu=name,uuid,driver_version", "--format=csv,noheader"},
                                        std::filesystem::current_path())) {
      std::istringstream lines(*out);
      for (std::string line; std::getline(lines, line);) {
        std::vector<std::string> fields;
        std::istringstream parts(line);
        for (std::string f; std::getline(parts, f, ',');) fields.push_back(f.substr(f.find_first_not_of(' ')));
        if (fields.size() == 3) e.gpus.push_back({{"name", fields[0]}, {"uuid", fields[1]}, {"driver", fields[2]}});
      }
    }
  }
  if (!resolve_executable("nvcc").empty()) {
    if (const auto out = capture_output({"nvcc", "--version"}, std::filesystem::current_path())) {
      const auto at = out->find("release ");
      if (at != std::string::npos) e.cuda_version = out->substr(at, out->find('\n', at) - at);
    }
  }
  e.compiler = DENSEFEED_COMPILER;
  e.flags = DENSEFEED_FLAGS;
  return e;
}

}  // namespace densefeed
