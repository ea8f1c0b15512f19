#include "gate_spec.h"

#include "resources_spec.h"

#include "bench_work.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "command_template.h"
#include "error.h"
#include "gate_store.h"
#include "install_paths.h"
#include "schema_validator.h"

namespace densefeed {
namespace {

std::string json_type_of(const nlohmann::ordered_json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return "number";
  return v.type_name();
}

void check_command(const YamlDocument& doc, const std::string& pointer, const std::vector<std::string>& argv,
                   const GateSpec& gate) {
  std::set<std::string> names;
  try {
    names = placeholders(argv);
  } catch (const std::invalid_argument& e) {
    doc.fail(pointer, e.what());
  }
  const bool is_build = pointer.rfind("/build", 0) == 0;
  for (const auto& name : names) {
    if ((name == "src" || name == "build") != is_build) {
      doc.fail(pointer, is_build ? fmt::format("a build command may use only {{src}} and {{build}}, not '{{{}}}'", name)
                                 : fmt::format("'{{{}}}' is for build commands only", name));
    }
    if ((name == "project" || name == "gate_dir") && pointer.rfind("/outputs", 0) == 0) {
      doc.fail(pointer, fmt::format("'{{{}}}' is for commands, not shape rules", name));
    }
    if (name.rfind("param.", 0) == 0 && pointer.rfind("/reference", 0) == 0) {
      doc.fail(pointer, fmt::format("the reference command may not use '{{{}}}': a manifest can never change "
                                    "the reference", name));
    }
    if (name.rfind("param.", 0) == 0 && gate.find_param(name.substr(6)) == nullptr) {
      doc.fail(pointer, fmt::format("placeholder '{{{}}}' names a parameter the gate does not declare", name));
    }
    // A session's command starts it once for every case: the case, its
    // seed and its output folder come with each request (session.h).
    if (gate.sessions && (pointer == "/reference/command" || pointer == "/candidate/command") &&
        (name.rfind("case.", 0) == 0 || name == "seed" || name == "out")) {
      doc.fail(pointer, fmt::format("with protocol: session a harness is started once for all cases, so its command may not "
                                    "use '{{{}}}': the case, seed and output folder come with each request", name));
    }
    if (name.rfind("case.", 0) == 0) {
      const std::string key = name.substr(5);
      for (const auto& c : gate.cases) {
        if (!c.values.contains(key)) {
          doc.fail(pointer, fmt::format("placeholder '{{{}}}' is not defined by case '{}' (add it to "
                                        "cases.defaults)", name, c.label));
        }
      }
    }
  }
}

using Json = nlohmann::ordered_json;

// The reference and candidate commands and how each case runs: protocol,
// ranks, GPUs and limits (checked against the cases later, check_ranks).
void read_harnesses(const Json& v, GateSpec& gate) {
  gate.reference_command = v["reference"]["command"].get<std::vector<std::string>>();
  if (v["reference"].contains("case_keys")) {
    gate.reference_case_keys = v["reference"]["case_keys"].get<std::vector<std::string>>();
  }
  gate.candidate_command = v["candidate"]["command"].get<std::vector<std::string>>();
  gate.timeout_s = v.value("timeout_s", kDefaultHarnessTimeoutS);
  gate.gpus = v.value("gpus", 0);
  gate.sessions = v.value("protocol", std::string("process")) == "session";
  if (v.contains("ranks")) gate.ranks = v["ranks"].is_string() ? v["ranks"].get<std::string>() : std::to_string(v["ranks"].get<int>());
  gate.per_rank_outputs = v.value("rank_outputs", std::string("gathered")) == "per_rank";
  if (v.contains("resources")) gate.resources = read_resources(v["resources"]);
  if (v.contains("limits")) {
    const auto& l = v["limits"];
    const auto mib = [&](const char* key, std::uint64_t fallback) {
      return l.contains(key) ? l[key].get<std::uint64_t>() << 20 : fallback;
    };
    gate.limits.memory_bytes = mib("memory_mb", gate.limits.memory_bytes);
    gate.limits.processes = l.value("processes", gate.limits.processes);
    gate.limits.file_size_bytes = mib("file_size_mb", gate.limits.file_size_bytes);
    gate.limits.tmp_bytes = mib("tmp_mb", gate.limits.tmp_bytes);
  }
}

// params: each default of the parameter's type and among its enum values.
void read_params(const YamlDocument& doc, const Json& v, GateSpec& gate) {
  if (!v.contains("params")) return;
  for (const auto& [pname, p] : v["params"].items()) {
    ParamSpec spec{pname, p["type"].get<std::string>(), p.value("enum", nlohmann::ordered_json()),
                   p.value("default", nlohmann::ordered_json()), trim_trailing_space(p.value("description", ""))};
    const std::string ptr = "/params/" + pname;
    if (!spec.default_value.is_null()) {
      const std::string t = json_type_of(spec.default_value);
      if (!(t == spec.type || (spec.type == "number" && t == "integer"))) {
        doc.fail(ptr + "/default", fmt::format("default has type {}, the parameter is {}", t, spec.type));
      }
      if (spec.enum_values.is_array() &&
          std::find(spec.enum_values.begin(), spec.enum_values.end(), spec.default_value) ==
              spec.enum_values.end()) {
        doc.fail(ptr + "/default", "default is not one of the parameter's enum values");
      }
    }
    gate.params.push_back(std::move(spec));
  }
}

// (pointer, along) of a trend bound: checked once the cases are known (read_cases).
using TrendPointers = std::vector<std::pair<std::string, std::string>>;

// One output: its dtype, tolerance, shape rule, partition and trend bounds.
OutputSpec read_output(const YamlDocument& doc, const std::string& oname, const Json& o, TrendPointers& trend_pointers) {
  OutputSpec out;
  out.name = oname;
  out.dtype = o["dtype"].get<std::string>();
  out.reference_dtype = o.value("reference_dtype", out.dtype);
  if (o.contains("tolerance")) {
    out.tolerance = tolerance_from_json(o["tolerance"]);
  } else {
    out.tolerance = default_tolerance(out.dtype);
    out.default_tolerance = true;
  }
  if (out.tolerance.max_ulp && !ulp_dtype(out.dtype)) {
    doc.fail("/outputs/" + oname + "/tolerance/max_ulp",
             fmt::format("max_ulp applies to float32, float16 and bfloat16 outputs, not {}", out.dtype));
  }
  if (out.tolerance.max_violation_fraction > 0 && !out.tolerance.atol && !out.tolerance.rtol) {
    doc.fail("/outputs/" + oname + "/tolerance/max_violation_fraction",
             "max_violation_fraction needs an elementwise bound (atol and/or rtol)");
  }
  for (const auto& d : o.value("shape", nlohmann::ordered_json::array())) out.shape.push_back(scalar_text(d));
  if (o.contains("partition")) {
    out.partition_axis = o["partition"]["axis"].get<std::size_t>();
    if (o["partition"].contains("parts")) out.partition_parts = scalar_text(o["partition"]["parts"]);
    if (!out.shape.empty() && *out.partition_axis >= out.shape.size()) {
      doc.fail("/outputs/" + oname + "/partition/axis", fmt::format("axis {} but the shape rule has {} dimensions",
                                                                    *out.partition_axis, out.shape.size()));
    }
  }
  if (o.contains("trend")) {
    const auto& t = o["trend"];
    const auto bounds = t.is_array() ? t : nlohmann::ordered_json::array({t});
    for (std::size_t i = 0; i < bounds.size(); ++i) {
      const std::string ptr = "/outputs/" + oname + "/trend" + (t.is_array() ? fmt::format("/{}", i) : "");
      TrendBound b;
      b.along = bounds[i]["along"].get<std::string>();
      b.max_exponent = bounds[i]["max_exponent"].get<double>();
      b.metric = bounds[i].value("metric", b.metric);
      out.trends.push_back(b);
      trend_pointers.emplace_back(ptr, b.along);
    }
  }
  return out;
}

// cases: expanded from defaults, grid and extra; every trend bound needs
// three numeric values of its key among them.
void read_cases(const YamlDocument& doc, const Json& v, const TrendPointers& trend_pointers, GateSpec& gate) {
  const auto& cases = v["cases"];
  gate.cases = expand_cases(cases.value("defaults", nlohmann::ordered_json::object()),
                            cases.value("grid", nlohmann::ordered_json::array()),
                            cases.value("extra", nlohmann::ordered_json::array()));
  if (gate.cases.empty()) doc.fail("/cases", "the gate has no cases");
  // A trend bound along a key that no case sets as a number could never be
  // judged: a gate that says it bounds growth must be able to.
  for (const auto& [ptr, along] : trend_pointers) {
    std::set<double> values;
    for (const auto& c : gate.cases) {
      if (c.values.contains(along) && c.values[along].is_number()) values.insert(c.values[along].get<double>());
    }
    if (values.size() < 3) {
      doc.fail(ptr + "/along", fmt::format("the cases give '{}' {} numeric value(s); a trend needs at least 3 to be fitted",
                                           along, values.size()));
    }
  }
}

// profiles: each selects at least one case.
void read_profiles(const YamlDocument& doc, const Json& v, GateSpec& gate) {
  for (const auto& [pname, filter] : v["profiles"].items()) {
    ProfileFilter f;
    for (const auto& [key, allowed] : filter.items()) f[key] = allowed.get<std::vector<nlohmann::ordered_json>>();
    gate.profiles[pname] = f;
    if (select_cases(gate.cases, f).empty()) doc.fail("/profiles/" + pname, "the profile selects no case");
  }
}

// reference.case_keys: each names a key every case defines, or cases
// that differ in it could never be told apart.
void check_reference_case_keys(const YamlDocument& doc, const GateSpec& gate) {
  if (!gate.reference_case_keys) return;
  for (std::size_t k = 0; k < gate.reference_case_keys->size(); ++k) {
    const std::string& key = (*gate.reference_case_keys)[k];
    for (const auto& c : gate.cases) {
      if (!c.values.contains(key)) {
        doc.fail(fmt::format("/reference/case_keys/{}", k),
                 fmt::format("case key '{}' is not defined by case '{}' (add it to cases.defaults)", key, c.label));
      }
    }
  }
}

// ranks: a positive integer in every case; not with sessions, which
// serve every case from one process per arm.
void check_ranks(const YamlDocument& doc, const Json& v, GateSpec& gate) {
  if (v.contains("ranks")) {
    if (gate.ranks.rfind("{case.", 0) == 0) {
      const std::string key = gate.ranks.substr(6, gate.ranks.size() - 7);
      for (const auto& c : gate.cases) {
        const auto it = c.values.find(key);
        if (it == c.values.end() || !it->is_number_integer() || it->get<long long>() < 1 || it->get<long long>() > 64) {
          doc.fail("/ranks", fmt::format("ranks is '{}', so case '{}' must give {} as an integer from 1 to 64; it gives {}",
                                         gate.ranks, c.label, key, it == c.values.end() ? "nothing" : it->dump()));
        }
      }
    }
    bool multi = false;
    for (const auto& c : gate.cases) multi = multi || case_ranks(gate, c.values) > 1;
    if (gate.sessions && multi) {
      doc.fail("/ranks", "multi-rank cases are not supported with protocol: session (a session serves every case from one "
                         "process per arm); use protocol: process for a gate with ranks");
    }
    if (multi && !v.contains("gpus")) gate.gpus = 1;
  }
  if (v.contains("rank_outputs") && !v.contains("ranks")) {
    doc.fail("/rank_outputs", "rank_outputs needs ranks: a one-process case has one output folder");
  }
}

// freezes: paths inside the project folder.
void read_freezes(const YamlDocument& doc, const Json& v, GateSpec& gate) {
  for (std::size_t i = 0; i < v["freezes"].size(); ++i) {
    const auto rel = v["freezes"][i].get<std::string>();
    const auto p = std::filesystem::path(rel);
    if (p.is_absolute() || rel.find("..") != std::string::npos) {
      doc.fail(fmt::format("/freezes/{}", i), "a frozen file must be a path inside the project folder (relative, without '..')");
    }
    // A missing frozen file is the lock check's to report (red), not a
    // defect of the gate file.
    gate.freezes.push_back(rel);
  }
}

// build: its commands and bin folder, with build placeholders only.
void read_build(const YamlDocument& doc, const Json& v, GateSpec& gate) {
  if (!v.contains("build")) return;
  BuildSpec b;
  const auto& bj = v["build"];
  for (std::size_t i = 0; i < bj["commands"].size(); ++i) {
    b.commands.push_back(bj["commands"][i].get<std::vector<std::string>>());
    check_command(doc, fmt::format("/build/commands/{}", i), b.commands.back(), gate);
  }
  b.bin = bj.value("bin", b.bin);
  check_command(doc, "/build/bin", {b.bin}, gate);
  b.timeout_s = bj.value("timeout_s", b.timeout_s);
  gate.build = b;
}

// bench.cases: each one of the gate's correctness cases, with one rank;
// bench.work: an expression every bench case can evaluate.
void read_bench_cases(const YamlDocument& doc, const Json& b, GateSpec& gate) {
  const auto& bench_cases = b["cases"];
  for (std::size_t i = 0; i < bench_cases.size(); ++i) {
    auto match = std::find_if(gate.cases.begin(), gate.cases.end(),
                              [&](const Case& c) { return case_matches(c, bench_cases[i]); });
    if (match == gate.cases.end()) {
      doc.fail(fmt::format("/bench/cases/{}", i),
               fmt::format("benchmark case {} is not one of the gate's correctness cases: every "
                           "benchmarked shape must be gated",
                           bench_cases[i].dump()));
    }
    // The bench stage runs one process per arm and round.
    if (case_ranks(gate, match->values) > 1) {
      doc.fail(fmt::format("/bench/cases/{}", i),
               fmt::format("benchmark case {} runs {} ranks; multi-rank benchmarks are not supported (the bench stage runs one "
                           "process per arm): bench only one-rank cases", bench_cases[i].dump(), case_ranks(gate, match->values)));
    }
    gate.bench.cases.push_back(*match);
  }
  gate.bench.max_speedup = b.value("max_speedup", gate.bench.max_speedup);
  if (b.contains("work")) {
    const auto& w = b["work"];
    gate.bench.work.bytes = w.value("bytes", "");
    gate.bench.work.flops = w.value("flops", "");
    for (const auto& [field, expr] : {std::pair{"bytes", gate.bench.work.bytes}, std::pair{"flops", gate.bench.work.flops}}) {
      if (expr.empty()) continue;
      for (const auto& c : gate.bench.cases) {
        try {
          (void)evaluate_work(expr, c.values);
        } catch (const std::invalid_argument& e) {
          doc.fail(fmt::format("/bench/work/{}", field), fmt::format("case {}: {}", c.label, e.what()));
        }
      }
    }
  }
}

// bench.driver: trusted code, so it takes no parameter, its library is a
// file name in the arm's bin folders, and its own files are frozen.
BenchDriver read_bench_driver(const YamlDocument& doc, const Json& d, const GateSpec& gate) {
  BenchDriver driver;
  driver.command = d["command"].get<std::vector<std::string>>();
  const auto& k = d["kernel"];
  driver.module = k.value("module", "");
  driver.function = k.value("function", "");
  driver.library = k.value("library", "");
  driver.symbol = k.value("symbol", "");
  driver.path = k.value("path", ".");
  if (!driver.library.empty()) {
    // A file name, looked up in the arm's bin folders (bench_runner.cpp):
    // never a path that could lead out of them.
    if (driver.library.find('/') != std::string::npos || driver.library.find("..") != std::string::npos) {
      doc.fail("/bench/driver/kernel/library",
               fmt::format("'{}': a library is a file name (without '/' or '..'), looked up in the arm's bin folders "
                           "(harness_path, a revision's build bin)", driver.library));
    }
    if (k.contains("path")) {
      doc.fail("/bench/driver/kernel/path", "a library is looked up in the arm's bin folders (harness_path, a revision's "
                                            "build bin); path is where a Python module is");
    }
  }
  check_command(doc, "/bench/driver/command", driver.command, gate);
  for (const auto& name : placeholders(driver.command)) {
    if (name.rfind("param.", 0) == 0) {
      doc.fail("/bench/driver/command", fmt::format("the driver is trusted code and may not take '{{{}}}': a manifest's "
                                                     "parameters reach the arm's kernel, not the timer", name));
    }
  }
  // Every file of the driver's own under the trusted tree must be frozen:
  // an unfrozen driver is the candidate's to change on the trusted ref.
  for (const auto& arg : driver.command) {
    if (arg.rfind("{project}/", 0) != 0) continue;
    const std::string rel = arg.substr(10);
    if (std::find(gate.freezes.begin(), gate.freezes.end(), rel) == gate.freezes.end()) {
      doc.fail("/bench/driver/command", fmt::format("the driver's file '{}' is not in the gate's freezes: a benchmark "
                                                     "driver is trusted code and must be frozen like the reference",
                                                     rel));
    }
  }
  return driver;
}

// bench: its rounds, cases, work and driver.
void read_bench(const YamlDocument& doc, const Json& v, GateSpec& gate) {
  if (!v.contains("bench")) return;
  const auto& b = v["bench"];
  gate.bench.warmup = b.value("warmup", 1);
  gate.bench.iters = b.value("iters", 5);
  gate.bench.max_seconds_per_case = b.value("max_seconds_per_case", gate.bench.max_seconds_per_case);
  gate.bench.max_warmup_seconds = b.value("max_warmup_seconds", gate.bench.max_warmup_seconds);
  gate.bench.looks = default_looks(b.value("max_rounds", 200));
  read_bench_cases(doc, b, gate);
  if (b.contains("driver")) gate.bench.driver = read_bench_driver(doc, b["driver"], gate);
}

// structure (gate_structure.h), checked against the cases, params and
// outputs; a partition key gets a default trend bound on every output
// (fitted over the partitioned cases only: trend_bound.h) unless the gate
// turns it off or bounds that key on the output itself.
void read_structure(const YamlDocument& doc, const Json& v, GateSpec& gate) {
  std::vector<std::string> keys, params, outputs;
  for (const auto& c : gate.cases) {
    for (const auto& [k, value] : c.values.items()) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  }
  for (const auto& p : gate.params) params.push_back(p.name);
  for (const auto& o : gate.outputs) outputs.push_back(o.name);
  gate.structure = read_gate_structure(doc, v, keys, params, outputs);
  const auto& part = gate.structure.partition;
  if (!part || part->key.empty()) return;
  for (const auto& c : gate.cases) {
    const auto it = c.values.find(part->key);
    if (it == c.values.end() || !it->is_number() || it->get<double>() < 1 || it->get<double>() > (1 << 20) ||
        it->get<double>() != std::floor(it->get<double>())) {
      doc.fail("/structure/partition/key", fmt::format("case {} has no whole number 1..2^20 for '{}', the number of parts it is cut into",
                                                       c.label, part->key));
    }
  }
  if (!gate.structure.default_trend) return;
  for (auto& o : gate.outputs) {
    const bool bounded = std::any_of(o.trends.begin(), o.trends.end(), [&](const TrendBound& b) { return b.along == part->key; });
    if (!bounded) o.trends.push_back(TrendBound{"rel_l2", part->key, gate.structure.trend_max_exponent, true});
  }
}

}  // namespace

int case_ranks(const GateSpec& gate, const nlohmann::ordered_json& case_values) {
  if (gate.ranks.rfind("{case.", 0) != 0) return std::stoi(gate.ranks);
  const std::string key = gate.ranks.substr(6, gate.ranks.size() - 7);
  const auto it = case_values.find(key);
  if (it == case_values.end() || !it->is_number_integer() || it->get<long long>() < 1 || it->get<long long>() > 64) {
    throw InputError(gate.file.string(), {}, "ranks",
                     fmt::format("'{}' needs the case's {} to be an integer from 1 to 64; the case gives {}", gate.ranks, key,
                                 it == case_values.end() ? "nothing" : it->dump()));
  }
  return static_cast<int>(it->get<long long>());
}

std::size_t partition_parts(const OutputSpec& out, const nlohmann::ordered_json& case_values) {
  if (out.partition_parts.empty()) return 0;
  return std::stoul(render_command({out.partition_parts}, {case_values, nlohmann::ordered_json::object(), 0, ""})[0]);
}

const ParamSpec* GateSpec::find_param(const std::string& param_name) const {
  for (const auto& p : params) {
    if (p.name == param_name) return &p;
  }
  return nullptr;
}

std::vector<Case> GateSpec::profile_cases(const std::string& profile) const {
  auto it = profiles.find(profile);
  if (it == profiles.end()) {
    std::vector<std::string> names;
    for (const auto& [n, f] : profiles) names.push_back(n);
    throw InputError(file.string(), {}, "profiles",
                     fmt::format("gate '{}' has no profile '{}' (available: {})", name, profile,
                                 fmt::join(names, ", ")));
  }
  return select_cases(cases, it->second);
}

std::vector<std::string> list_gates(const GateStore& store) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(store.gate_dir(), ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") names.push_back(entry.path().stem());
  }
  std::sort(names.begin(), names.end());
  return names;
}


namespace {
GateSpec load_gate_file(const GateStore& store, const std::string& name);
}  // namespace

std::string missing_gate_message(const GateStore& store, const std::string& name) {
  const auto names = list_gates(store);
  std::string text = fmt::format("no gate named '{}' in {} (available: {})", name, store.describe(),
                                 names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
  const auto draft = store.project_dir / store.gate_rel(name);
  if (!store.worktree && !store.project_dir.empty() && std::filesystem::is_regular_file(draft)) {
    text += fmt::format(". {} exists in the project folder but is not committed on {}: commit it there (git add {} && git "
                        "commit), then a person runs 'densefeed gate lock {}' and commits {}; 'densefeed --trust-worktree gate "
                        "show {}' checks the draft as it is now",
                        store.gate_rel(name), store.ref, store.gate_rel(name), name, store.lock_rel(), name);
  }
  return text;
}

GateSpec load_gate(const GateStore& store, const std::string& name) {
  try {
    return load_gate_file(store, name);
  } catch (const InputError& e) {
    store.rethrow_shown(e);
  }
}

namespace {
GateSpec load_gate_file(const GateStore& store, const std::string& name) {
  const auto path = store.path(store.gate_rel(name));
  YamlDocument doc = load_yaml_file(path);
  SchemaValidator(schema_path("gate.schema.json")).validate(doc);
  const auto& v = doc.value;

  GateSpec gate;
  gate.name = v["gate"].get<std::string>();
  if (gate.name != name) {
    doc.fail("/gate", fmt::format("the gate in {} must be named '{}' after its file", store.shown_path(store.gate_rel(name)).string(), name));
  }
  gate.file = std::filesystem::absolute(path);
  gate.description = trim_trailing_space(v.value("description", ""));
  read_harnesses(v, gate);
  read_params(doc, v, gate);
  TrendPointers trend_pointers;
  for (const auto& [oname, o] : v["outputs"].items()) gate.outputs.push_back(read_output(doc, oname, o, trend_pointers));
  read_cases(doc, v, trend_pointers, gate);
  read_profiles(doc, v, gate);
  check_reference_case_keys(doc, gate);
  check_ranks(doc, v, gate);
  check_command(doc, "/reference/command", gate.reference_command, gate);
  check_command(doc, "/candidate/command", gate.candidate_command, gate);
  for (const auto& out : gate.outputs) {
    std::vector<std::string> templated = out.shape;
    if (!out.partition_parts.empty()) templated.push_back(out.partition_parts);
    check_command(doc, "/outputs/" + out.name, templated, gate);
  }
  read_freezes(doc, v, gate);
  read_build(doc, v, gate);
  if (v.contains("report")) {
    gate.trend_rows = v["report"]["rows"].get<std::string>();
    gate.trend_columns = v["report"]["columns"].get<std::string>();
  }
  read_structure(doc, v, gate);
  read_bench(doc, v, gate);
  return gate;
}

}  // namespace
}  // namespace densefeed
