#include "case_repro.h"

#include <fmt/format.h>

#include "arm_context.h"
#include "arm_replay.h"
#include "case_filter.h"
#include "error.h"
#include "gate_runner.h"
#include "harness_protocol.h"
#include "process_runner.h"

namespace densefeed {

namespace {

using J = nlohmann::ordered_json;

// The side's command as densefeed rendered it, from `arm` (its recorded replay context).
// It runs from `cwd` with its outputs in cwd/out, named relative ("out") so
// that the script works wherever it is run.
ReproCommand side(const char* name, const std::vector<std::string>& argv_template, const J& case_values, const J& params,
                  const std::string& seed, const std::filesystem::path& cwd, const ArmContext& arm) {
  ReproCommand c;
  c.arm = name;
  c.cwd = cwd.string();
  c.out = (cwd / "out").string();
  const std::filesystem::path out = "out";
  const TemplateValues values{case_values, params, std::stoull(seed), out.string()};
  c.argv = arm_command(argv_template, values, arm);
  if (const auto exe = resolve_executable(c.argv[0], arm.exe_dirs); !exe.empty()) c.argv[0] = exe.string();
  c.env = protocol_environment(ProtocolMode::gate, case_values, seed, out);
  for (const auto& [k, v] : arm.env) c.env[k] = v;
  return c;
}

std::string fmt_bound(double v) { return fmt::format("{:g}", v); }

std::string quoted(const std::string& word) {
  std::string q = "'";
  for (const char ch : word) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

}  // namespace

CaseRepro case_repro(const ExperimentRecord& record, const GateSpec& gate, const std::string& case_filter,
                     const std::filesystem::path& dir) {
  const std::string where = fmt::format("experiment {}", record.id());
  if (!record.gate_run) throw InputError(where, {}, "CASE", "it has no gate run: no case ran");
  const CaseFilter f = parse_case_filter(case_filter);
  std::vector<const GateCaseRow*> hits;
  for (const auto& c : record.gate_run->cases) {
    if (case_filter_matches(Case{c.values, c.label}, f)) hits.push_back(&c);
  }
  if (hits.size() != 1) {
    std::string labels;
    for (std::size_t i = 0; i < hits.size() && i < 8; ++i) labels += (i ? "; " : "") + hits[i]->label;
    if (hits.empty()) {
      for (std::size_t i = 0; i < record.gate_run->cases.size() && i < 8; ++i) {
        labels += (i ? "; " : "") + record.gate_run->cases[i].label;
      }
    }
    throw InputError(where, {}, "CASE",
                     hits.empty() ? fmt::format("no case of its gate run has {}: its cases are {}", case_filter, labels)
                                  : fmt::format("{} cases have {} ({}): name one, e.g. by its whole label", hits.size(),
                                                case_filter, labels));
  }
  const GateCaseRow& c = *hits.front();
  const J& prov = record.gate_run->provenance;
  const auto arm_of = [&](const char* key) {
    std::optional<ArmContext> arm;
    if (prov.is_object() && prov.contains(key)) arm = arm_from_replay_json(prov[key]);
    if (!arm) {
      throw InputError(where, {}, "CASE",
                       fmt::format("its gate run did not record where the {} ran from (provenance.{}: recorded by densefeed "
                                   "from issue 30 on for the reference); rerun it (densefeed run --failing-of {}) and repro "
                                   "that experiment", key == std::string("reference_arm") ? "reference" : "candidate", key,
                                   record.id()));
    }
    return *arm;
  };
  const ArmContext reference = arm_of("reference_arm"), candidate = arm_of("candidate_arm");
  CaseRepro r;
  r.experiment_id = record.id();
  r.case_label = c.label;
  r.case_values = c.values;
  r.seed = record.gate_run->seed;
  r.profile = record.gate_run->profile;
  r.verdict = c.verdict;
  const Case gate_case{c.values, c.label};
  r.commands.push_back(side("reference", gate.reference_command, reference_case(gate, gate_case), J::object(), r.seed,
                            dir / "reference", reference));
  r.commands.push_back(side("candidate", gate.candidate_command, c.values,
                            record.candidate.params.is_object() ? record.candidate.params : J::object(), r.seed,
                            dir / "candidate", candidate));
  for (const auto& o : gate.outputs) {
    std::vector<std::string> cmp = {"densefeed", "compare", (dir / "reference" / "out" / (o.name + ".npy")).string(),
                                    (dir / "candidate" / "out" / (o.name + ".npy")).string(), "--dtype", o.dtype};
    const Tolerance& t = o.tolerance;
    if (t.rel_l2) cmp.insert(cmp.end(), {"--rel-l2", fmt_bound(*t.rel_l2)});
    if (t.max_abs) cmp.insert(cmp.end(), {"--max-abs", fmt_bound(*t.max_abs)});
    if (t.atol) cmp.insert(cmp.end(), {"--atol", fmt_bound(*t.atol)});
    if (t.rtol) cmp.insert(cmp.end(), {"--rtol", fmt_bound(*t.rtol)});
    if (t.max_violation_fraction > 0) cmp.insert(cmp.end(), {"--max-violation-fraction", fmt_bound(t.max_violation_fraction)});
    r.compare.push_back(cmp);
  }
  r.notes.push_back("sandbox off: these commands run as you, outside bwrap, with nothing hidden and the network as you have "
                    "it; densefeed ran them in its sandbox");
  r.notes.push_back(fmt::format("seed {} is the one the gate run used (DENSEFEED_SEED and the {{seed}} argument): the same inputs",
                                r.seed));
  if (gate.sessions) {
    r.notes.push_back("the gate's harnesses serve sessions (protocol: session): densefeed sent this case as a request; run "
                      "as shown, a harness that reads DENSEFEED_CASE computes the case once");
  }
  if (record.candidate.revision != "WORKTREE") {
    r.notes.push_back(fmt::format("the candidate is revision {} ({}): its commands run from that revision's build as recorded",
                                  record.candidate.revision, record.candidate.sha.substr(0, 12)));
  }
  return r;
}

nlohmann::ordered_json case_repro_json(const CaseRepro& r) {
  J commands = J::array();
  for (const auto& c : r.commands) commands.push_back({{"arm", c.arm}, {"cwd", c.cwd}, {"env", c.env}, {"argv", c.argv}, {"out", c.out}});
  return {{"experiment_id", r.experiment_id}, {"case", r.case_label}, {"case_values", r.case_values}, {"seed", r.seed},
          {"profile", r.profile}, {"verdict", r.verdict}, {"sandbox", "off"}, {"commands", commands}, {"compare", r.compare},
          {"notes", r.notes}};
}

std::string render_case_repro(const CaseRepro& r) {
  std::string s = fmt::format("# densefeed repro {} {}: case {} of experiment {} ({} when recorded), profile {}, seed {}\n",
                              r.experiment_id, quoted(r.case_label), r.case_label, r.experiment_id, r.verdict, r.profile, r.seed);
  for (const auto& n : r.notes) s += "# " + n + "\n";
  s += "set -e\n";
  for (const auto& c : r.commands) {
    s += fmt::format("\n# the {}{}; its outputs in {}\nmkdir -p {}\n(cd {} && env", c.arm,
                     c.arm == "reference" ? " (the gate's, from the trusted ref's export)" : " (as it ran)", c.out, quoted(c.out),
                     quoted(c.cwd));
    for (const auto& [k, v] : c.env) s += " " + quoted(k + "=" + v);
    for (const auto& a : c.argv) s += " " + quoted(a);
    s += ")\n";
  }
  s += "\n# the gate's comparison of each output (its tolerance as the gate declares it)\n";
  for (const auto& cmp : r.compare) {
    std::string line;
    for (const auto& a : cmp) line += (line.empty() ? "" : " ") + quoted(a);
    s += line + "\n";
  }
  return s;
}

}  // namespace densefeed
