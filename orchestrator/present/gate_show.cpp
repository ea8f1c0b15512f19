#include "gate_show.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "wrong_candidates.h"

namespace densefeed {

namespace {

// structure (gate_structure.h): null when the gate declares none.
nlohmann::ordered_json structure_json(const GateStructure& st) {
  if (!st.declared) return nullptr;
  nlohmann::ordered_json partition = nullptr;
  if (st.partition) partition = st.partition->reported ? nlohmann::ordered_json{{"parts", "reported"}} : nlohmann::ordered_json{{"key", st.partition->key}};
  return {{"partition", partition}, {"trend", st.default_trend ? nlohmann::ordered_json(st.trend_max_exponent) : nlohmann::ordered_json(false)},
          {"precision", st.precision}, {"algorithm", st.algorithm}, {"states", st.states}};
}

}  // namespace

nlohmann::ordered_json gate_json(const GateSpec& g, const std::vector<std::string>& lock_problems, const BlindSpots* blind,
                                 const std::string& blind_note) {
  using J = nlohmann::ordered_json;
  J params = J::object();
  for (const auto& p : g.params) {
    params[p.name] = {{"type", p.type}, {"enum", p.enum_values}, {"default", p.default_value}, {"description", p.description}};
  }
  J outputs = J::object();
  for (const auto& o : g.outputs) {
    outputs[o.name] = {{"dtype", o.dtype},
                       {"reference_dtype", o.reference_dtype},
                       {"shape", o.shape},
                       {"tolerance", tolerance_to_json(o.tolerance)},
                       {"default_tolerance", o.default_tolerance},
                       {"partition_axis", o.partition_axis ? J(*o.partition_axis) : J(nullptr)},
                       {"trend", J::array()}};
    for (const auto& t : o.trends) {
      outputs[o.name]["trend"].push_back({{"metric", t.metric}, {"along", t.along}, {"max_exponent", t.max_exponent}});
    }
  }
  J could_fail = {{"gate_run_id", nullptr}, {"experiment_id", nullptr}, {"recorded_at", nullptr},
                  {"note", blind_note}, {"cases", J::array()}};
  if (blind && blind->gate_run_id != 0) {
    could_fail["gate_run_id"] = blind->gate_run_id;
    could_fail["experiment_id"] = blind->experiment_id;
    could_fail["recorded_at"] = blind->recorded_at;
    for (const auto& e : blind->entries) {
      could_fail["cases"].push_back({{"case", e.case_label}, {"output", e.output}, {"candidate", e.candidate},
                                     {"finding", wrong_candidate_sentence(e.candidate)}});
    }
  } else if (blind && blind_note.empty()) {
    could_fail["note"] = "no recorded run of this gate judged its cases yet";
  }
  J profiles = J::object();
  for (const auto& [name, filter] : g.profiles) profiles[name] = select_cases(g.cases, filter).size();
  J cases = J::array();
  for (const auto& c : g.cases) cases.push_back(c.label);
  J bench = J::array();
  for (const auto& c : g.bench.cases) bench.push_back(c.label);
  // Who times the benchmark: the gate's frozen driver, or the candidate.
  J driver = nullptr;
  if (const auto& d = g.bench.driver) {
    driver = {{"command", d->command}};
    if (!d->library.empty()) driver["kernel"] = {{"library", d->library}, {"symbol", d->symbol}};
    else driver["kernel"] = {{"module", d->module}, {"function", d->function}, {"path", d->path}};
  }
  J work = J::object();
  if (!g.bench.work.bytes.empty()) work["bytes"] = g.bench.work.bytes;
  if (!g.bench.work.flops.empty()) work["flops"] = g.bench.work.flops;
  return {{"gate", g.name},
          {"description", g.description},
          {"file", g.file.string()},
          {"lock", lock_problems.empty() ? "ok" : "NOT OK"},
          {"lock_problems", lock_problems},
          {"reference_command", g.reference_command},
          {"reference_case_keys", g.reference_case_keys ? J(*g.reference_case_keys) : J(nullptr)},
          {"candidate_command", g.candidate_command},
          {"params", params},
          {"outputs", outputs},
          {"cases", cases},
          {"profiles", profiles},
          {"timeout_s", g.timeout_s},
          {"gpus", g.gpus},
          {"ranks", g.ranks},
          {"rank_outputs", g.per_rank_outputs ? "per_rank" : "gathered"},
          {"protocol", g.sessions ? "session" : "process"},
          {"bench", {{"warmup", g.bench.warmup}, {"iters", g.bench.iters}, {"looks", g.bench.looks},
                     {"max_seconds_per_case", g.bench.max_seconds_per_case},
                     {"max_warmup_seconds", g.bench.max_warmup_seconds}, {"cases", bench},
                     {"timing", g.bench.driver ? "driver" : "candidate"}, {"driver", driver}, {"work", work},
                     {"max_speedup", g.bench.max_speedup}}},
          {"freezes", g.freezes},
          {"structure", structure_json(g.structure)},
          {"wrong_candidates", could_fail}};
}

std::string render_gate_text(const nlohmann::ordered_json& d) {
  std::string s = fmt::format("gate {} ({})\n  {}\n", d["gate"].get<std::string>(), d["file"].get<std::string>(),
                              d["description"].get<std::string>());
  s += fmt::format("  lock: {}\n", d["lock"].get<std::string>());
  for (const auto& p : d["lock_problems"]) s += "    " + p.get<std::string>() + "\n";
  s += "  reference: " + fmt::format("{}", fmt::join(d["reference_command"].get<std::vector<std::string>>(), " ")) + "\n";
  if (d.contains("reference_case_keys") && d["reference_case_keys"].is_array()) {
    s += fmt::format("    depends on case keys {} (cases that agree on them share one reference run)\n",
                     fmt::join(d["reference_case_keys"].get<std::vector<std::string>>(), ", "));
  }
  s += "  candidate: " + fmt::format("{}", fmt::join(d["candidate_command"].get<std::vector<std::string>>(), " ")) + "\n";
  for (const auto& [name, p] : d["params"].items()) {
    s += fmt::format("  param {}: {} {} default {} — {}\n", name, p["type"].get<std::string>(), p["enum"].dump(),
                     p["default"].dump(), p["description"].get<std::string>());
  }
  for (const auto& [name, o] : d["outputs"].items()) {
    s += fmt::format("  output {}: {} (reference {}), shape {}, tolerance {}{}\n", name, o["dtype"].get<std::string>(),
                     o["reference_dtype"].get<std::string>(), o["shape"].dump(), o["tolerance"].dump(),
                     o["default_tolerance"].get<bool>() ? " (dtype default)" : "");
  }
  for (const auto& [name, n] : d["profiles"].items()) s += fmt::format("  profile {}: {} case(s)\n", name, n.get<std::size_t>());
  s += fmt::format("  timeout per process: {} s\n", d["timeout_s"].get<double>());
  s += fmt::format("  protocol: {}\n", d["protocol"].get<std::string>());
  if (d.value("ranks", std::string("1")) != "1") {
    s += fmt::format("  ranks per candidate: {} ({} outputs)\n", d["ranks"].get<std::string>(), d["rank_outputs"].get<std::string>());
  }
  s += fmt::format("  bench cases: {}\n", d["bench"]["cases"].dump());
  const auto& b = d["bench"];
  if (b["driver"].is_null()) {
    s += "  bench timed by: the candidate's harness (no bench.driver; promotion needs --accept-candidate-timing)\n";
  } else {
    const auto& k = b["driver"]["kernel"];
    s += fmt::format("  bench timed by: the frozen driver {} loading {}\n",
                     fmt::join(b["driver"]["command"].get<std::vector<std::string>>(), " "),
                     k.contains("library") ? fmt::format("{} from the arm's bin folders ({})", k["library"].get<std::string>(), k["symbol"].get<std::string>())
                                           : fmt::format("{}.{} from the arm's tree ({})", k["module"].get<std::string>(), k["function"].get<std::string>(),
                                                         k["path"].get<std::string>()));
  }
  s += fmt::format("  bench work: {}; speedups above {}x need a person's acceptance\n",
                   b["work"].empty() ? std::string("not declared (no check against the machine's ceilings)") : b["work"].dump(),
                   b["max_speedup"].get<double>());
  s += fmt::format("  freezes: {}\n", d["freezes"].dump());
  if (const auto& st = d["structure"]; st.is_object()) {
    s += fmt::format("  structure: partition {}, precision params {}, algorithm params {}, states {}\n", st["partition"].dump(),
                     st["precision"].dump(), st["algorithm"].dump(), st["states"].dump());
  } else {
    s += "  structure: none declared (hints and densefeed narrow fall back on the case keys' numbers)\n";
  }
  for (const auto& [name, o] : d["outputs"].items()) {
    for (const auto& t : o["trend"]) {
      s += fmt::format("  trend bound on {}: {} ~ {}^p with p <= {}\n", name, t["metric"].get<std::string>(),
                       t["along"].get<std::string>(), t["max_exponent"].get<double>());
    }
  }
  const auto& w = d["wrong_candidates"];
  if (w["gate_run_id"].is_null()) {
    s += fmt::format("  could it fail? unknown: {}\n", w["note"].get<std::string>());
  } else if (w["cases"].empty()) {
    s += fmt::format("  could it fail? yes: in gate run {} (experiment {}, {}) every case fails the simple wrong candidates "
                     "(zeros, the reference's mean, the last partition zeroed)\n",
                     w["gate_run_id"].get<std::int64_t>(), w["experiment_id"].get<std::int64_t>(), w["recorded_at"].get<std::string>());
  } else {
    s += fmt::format("  could it fail? NOT everywhere: in gate run {} (experiment {}, {}) — tighten these bounds:\n",
                     w["gate_run_id"].get<std::int64_t>(), w["experiment_id"].get<std::int64_t>(), w["recorded_at"].get<std::string>());
    for (const auto& c : w["cases"]) {
      s += fmt::format("    case {}: {}: {}\n", c["case"].get<std::string>(), c["output"].get<std::string>(),
                       c["finding"].get<std::string>());
    }
  }
  return s;
}

}  // namespace densefeed
