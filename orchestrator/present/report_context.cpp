#include "report_context.h"

#include <map>

#include <fmt/format.h>

namespace densefeed {
namespace {

std::string text_of(const nlohmann::ordered_json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

}  // namespace

ProvenanceLine provenance_line(const nlohmann::ordered_json& p) {
  ProvenanceLine line;
  if (!p.is_object() || !p.contains("clean")) {
    line.text = "not recorded";
    return line;
  }
  line.known = true;
  line.clean = p.value("clean", false);
  const std::string project = text_of(p, "project"), store = text_of(p, "gate_store");
  if (line.clean) {
    line.text = fmt::format("{} at commit {}; gates from {}", project, text_of(p, "commit").substr(0, 12), store);
    return line;
  }
  std::string notes;
  if (p.contains("notes") && p["notes"].is_array()) {
    for (const auto& n : p["notes"]) notes += (notes.empty() ? "" : "; ") + (n.is_string() ? n.get<std::string>() : n.dump());
  }
  line.text = fmt::format("WARNING ({}; gates from {}): {}", project, store, notes.empty() ? "the checkout was not clean" : notes);
  return line;
}

std::string environment_line(const ExperimentRecord& record) {
  if (!record.environment) return "not recorded (no benchmark ran)";
  const Environment& e = *record.environment;
  std::vector<std::string> parts;
  if (!e.host.empty()) parts.push_back("host " + e.host);
  if (!e.cpu_model.empty()) parts.push_back("CPU " + e.cpu_model);
  // Identical GPUs are counted, not repeated.
  std::map<std::string, int> gpus;
  std::vector<std::string> order;
  for (const auto& g : e.gpus) {
    if (!g.is_object()) continue;
    const std::string name = g.value("name", std::string("GPU")) +
                             (g.contains("driver") && g["driver"].is_string() ? " (driver " + g["driver"].get<std::string>() + ")" : "");
    if (!gpus[name]++) order.push_back(name);
  }
  for (const auto& g : order) parts.push_back(gpus[g] > 1 ? fmt::format("GPU {} x{}", g, gpus[g]) : "GPU " + g);
  if (order.empty()) parts.push_back("no GPU");
  if (!e.cuda_version.empty()) parts.push_back("CUDA " + e.cuda_version);
  if (!e.compiler.empty()) parts.push_back("compiler " + e.compiler + (e.flags.empty() ? "" : " (" + e.flags + ")"));
  std::string clocks;
  for (const auto& [arm, mhz] : record.clocks.items()) {
    clocks += fmt::format("{}{} {} MHz", clocks.empty() ? "" : ", ", arm, mhz.is_number() ? fmt::format("{:.0f}", mhz.get<double>()) : mhz.dump());
  }
  if (!clocks.empty()) parts.push_back("SM clocks " + clocks);
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

}  // namespace densefeed
