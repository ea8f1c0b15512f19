#include "experiment_comparison.h"

#include <map>
#include <string>

#include <fmt/format.h>

#include "ledger.h"

namespace densefeed {
namespace {

// What two experiments are compared on, as flat "path" -> value pairs.
void flatten(const nlohmann::ordered_json& v, const std::string& path, std::map<std::string, nlohmann::ordered_json>& out) {
  if (v.is_object()) {
    for (const auto& [k, x] : v.items()) flatten(x, path.empty() ? k : path + "." + k, out);
  } else {
    out[path] = v;
  }
}

nlohmann::ordered_json comparable(const nlohmann::ordered_json& e) {
  nlohmann::ordered_json c;
  for (const char* k : {"name", "gate", "author", "candidate_revision", "candidate_sha", "base_revision", "base_sha",
                        "worktree_dirty", "state"}) {
    c["experiment"][k] = e[k];
  }
  c["experiment"]["candidate_params"] = e["candidate_params"];
  c["experiment"]["base_params"] = e["base_params"];
  c["experiment"]["risk"] = e["risk"].dump();
  if (!e["gate_run"].is_null()) {
    const auto& g = e["gate_run"];
    for (const char* k : {"verdict", "reason", "profile", "seed", "gate_sha256"}) c["gate"][k] = g[k];
    for (const auto& cs : g["cases"]) {
      auto& row = c["gate"]["cases"][cs["case_label"].get<std::string>()];
      row["verdict"] = cs["verdict"];
      for (const auto& m : cs["metrics"]) row[m["output"].get<std::string>() + "." + m["metric"].get<std::string>()] = m["value"];
    }
  }
  for (const auto& b : e["bench_cases"]) {
    auto& row = c["bench"][b["case_label"].get<std::string>()];
    for (const char* k : {"verdict", "speedup", "speedup_lo", "speedup_hi", "base_median", "candidate_median"}) row[k] = b[k];
  }
  for (const auto& t : e["trace_findings"]) {
    auto& row = c["trace"][fmt::format("{}[{}]", t["arm"].get<std::string>(), t["check_index"].get<std::int64_t>())];
    row["kind"] = t["kind"];
    row["passed"] = t["passed"];
    row["value"] = t["value"];
  }
  if (!e["acceptance_runs"].empty()) {
    const auto& a = e["acceptance_runs"].back();
    c["acceptance"]["verdict"] = a["verdict"];
    for (const auto& k : a["criteria"]) c["acceptance"][k["criterion"].get<std::string>()] = k["lhs"];
  }
  return c;
}

}  // namespace

ExperimentComparison compare_experiments(const Ledger& ledger, std::int64_t a_id, std::int64_t b_id) {
  std::map<std::string, nlohmann::ordered_json> a, b;
  flatten(comparable(ledger.show(a_id)), "", a);
  flatten(comparable(ledger.show(b_id)), "", b);
  std::map<std::string, std::pair<nlohmann::ordered_json, nlohmann::ordered_json>> keys;
  for (const auto& [k, v] : a) keys[k].first = v;
  for (const auto& [k, v] : b) keys[k].second = v;
  ExperimentComparison c;
  c.a = a_id;
  c.b = b_id;
  for (const auto& [k, v] : keys) {
    if (v.first == v.second) continue;
    nlohmann::ordered_json row = {{"field", k}, {"a", v.first}, {"b", v.second}};
    if (v.first.is_number() && v.second.is_number()) {
      const double x = v.first.get<double>(), y = v.second.get<double>();
      row["delta"] = y - x;
      if (x != 0) row["ratio"] = y / x;
    }
    c.differences.push_back(row);
  }
  return c;
}

}  // namespace densefeed
