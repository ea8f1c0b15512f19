// An acceptance-stage harness for the ledger's tests: writes
// DENSEFEED_OUT/metrics.json from its arguments.
//
//   metrics_harness NAME=V1[,V2...] ... [--crash] [--no-metrics]
// Each NAME=V becomes a number, NAME=V1,V2,... a list of samples.
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  const char* mode = std::getenv("DENSEFEED_MODE");
  const char* out = std::getenv("DENSEFEED_OUT");
  if (!mode || std::string(mode) != "acceptance" || !out) return 2;
  nlohmann::json metrics = nlohmann::json::object();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--crash") std::raise(SIGSEGV);
    if (a == "--no-metrics") return 0;
    const auto eq = a.find('=');
    if (eq == std::string::npos) return 2;
    std::vector<double> values;
    std::istringstream in(a.substr(eq + 1));
    for (std::string v; std::getline(in, v, ',');) values.push_back(std::stod(v));
    if (values.size() == 1) metrics[a.substr(0, eq)] = values[0];
    else metrics[a.substr(0, eq)] = values;
  }
  std::ofstream(std::string(out) + "/metrics.json") << metrics.dump();
  return 0;
}
