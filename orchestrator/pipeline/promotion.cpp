#include "promotion.h"

#include <fmt/format.h>

#include "acceptance_runner.h"
#include "arms.h"
#include "base_origin.h"
#include "error.h"
#include "gate_lock.h"
#include "gate_spec.h"
#include "heartbeat.h"
#include "revision_build.h"
#include "untrusted_launch.h"

namespace densefeed {
namespace {

// Why `r` cannot be promoted; empty when it can.
std::vector<std::string> promotion_blockers(const ExperimentRecord& r, const std::string& acceptance_stage, const PromotionAccepts& a,
                                            const std::string& trusted_ref) {
  std::vector<std::string> why;
  const ExperimentSummary& s = r.summary;
  // A gate read from another ref (one that named itself trusted in its own
  // densefeed.yaml) judged nothing this promote trusts; --trust-worktree is
  // a person's choice on the command line, recorded in provenance (as audit
  // reads it: Ledger::green_results_not_from).
  if (r.gate_run && r.gate_run->provenance.is_object() && !r.gate_run->provenance.value("trust_worktree", false)) {
    const std::string ref = r.gate_run->provenance.value("trusted_ref", trusted_ref);
    if (ref != trusted_ref) {
      why.push_back(fmt::format("its gate ran with the gates of the ref '{}', not of the trusted ref '{}' that this promote reads; "
                                "run the experiment again with {}'s gates",
                                ref, trusted_ref, trusted_ref));
    }
  }
  if (s.verdict != "green") {
    why.push_back(fmt::format("its verdict is {}{}{}", s.verdict, s.verdict_stage.empty() ? "" : " (" + s.verdict_stage + " stage)",
                              s.reason.empty() ? "" : ": " + s.reason));
  }
  // A replay, a narrowing step or a --case run judged part of the gate
  // (its red cases, a precision swap's params): never a promotion.
  if (r.parent_id || !r.case_filter.empty()) {
    why.push_back(fmt::format("it ran {} of its gate's profile{}: promote an experiment that ran the whole profile",
                              r.case_filter.empty() ? "part" : "only the cases " + fmt::format("{}", fmt::join(r.case_filter, ", ")),
                              r.parent_id ? fmt::format(" as a step ({}) of experiment {}", r.step, *r.parent_id) : ""));
  }
  if (!r.gate_run) why.push_back(fmt::format("it has no gate run (state {})", to_string(s.state)));
  else if (r.gate_run->verdict != "green") why.push_back("its gate is " + r.gate_run->verdict + ": " + r.gate_run->reason);
  for (const auto& b : r.bench_cases) {
    if (b.verdict == "slower") {
      why.push_back(fmt::format("bench case {} is slower (speedup {:.3f}x [{:.3f}, {:.3f}])", b.label, b.speedup, b.lo, b.hi));
    }
  }
  bool candidate_timed = false;
  for (const auto& b : r.bench_cases) {
    candidate_timed = candidate_timed || b.timing == "candidate";
    for (const auto& f : b.timing_flags) {
      if (f.value("kind", "") == "beyond_bound" && !a.beyond_bound) why.push_back(fmt::format("bench case {}: {}", b.label, f.value("reason", "")));
    }
  }
  if (candidate_timed && !a.candidate_timing) {
    why.push_back("its benchmark was timed by the candidate's own harness (the gate has no bench.driver), so its speedup is the "
                  "candidate's word; a person who accepts that promotes with --accept-candidate-timing");
  }
  if (!r.bench_cases.empty() && !a.agent_base && is_agent_base(s.base_origin.kind)) {
    why.push_back(fmt::format("its benchmark's base is one the agent wrote ({}: {}), so its speedup may be a slowed base; a person "
                              "who checked the base promotes with --accept-agent-base",
                              to_string(s.base_origin.kind), s.base_origin.reason));
  }
  for (const auto& [category, decision] : r.categories.items()) {
    if (decision != "approve") {
      why.push_back(fmt::format("risk category '{}' is not approved (latest decision: {}); run: densefeed review approve {} --by NAME --category {}",
                                category, decision.get<std::string>(), r.id(), category));
    }
  }
  // A promote killed during acceptance leaves the promotion with an
  // acceptance that never ended: that one may be run again.
  if (!r.promotion.is_null() && acceptance_stage != "started" && acceptance_stage != "interrupted") {
    why.push_back("it is already promoted" + (acceptance_stage.empty() ? std::string() : " (acceptance: " + acceptance_stage + ")"));
  }
  if (!r.has_acceptance) {
    why.push_back("its manifest pre-registered no acceptance criteria (acceptance.criteria), so there is nothing to accept it by; submit a new manifest with them");
  }
  return why;
}

// The candidate runs from its own build, as in the gate (a WORKTREE
// candidate from the project folder).
AcceptanceOptions acceptance_options(const ExperimentRecord& r, const PromotionSetting& s) {
  AcceptanceOptions options;
  options.work_dir = s.workspace.runs() / std::to_string(r.id()) / "acceptance";
  options.seed = std::stoull(r.gate_run->seed);
  const auto command = r.acceptance.at("command").get<std::vector<std::string>>();
  const std::filesystem::path python = is_python_command(command) ? harness_python(s.project) : std::filesystem::path();
  options.candidate = worktree_context(s.project, s.store, python);
  if (r.candidate.revision != "WORKTREE") {
    const auto lock = read_lock(s.store);
    const auto& gate_name = r.summary.gate;
    auto problems = check_locked_file(s.store, lock, s.store.gate_rel(gate_name));
    if (!problems.empty()) throw InputError(problems.front(), {}, "", "the gate does not match its lock; not promoting");
    const auto gate = load_gate(s.store, gate_name);
    options.limits = gate.limits;
    options.gpus = gate.gpus;
    options.resources = layered(s.project.resources, gate.resources).for_stage("acceptance");
    const auto b = build_revision(gate, s.project, r.candidate.sha, s.workspace);
    if (!b.tampered.empty()) {
      Ledger tamper_ledger(s.workspace.ledger);
      for (const auto& t : b.tampered) tamper_ledger.record_tamper(t);
    }
    if (!b.ok) throw InfraError("the candidate's build failed: " + b.failure);
    options.candidate = revision_context(s.project, s.store, b, python);
  }
  return options;
}

}  // namespace

PromotionCheck check_promotion(const Ledger& ledger, std::int64_t id, const PromotionAccepts& accepts, const std::string& trusted_ref) {
  PromotionCheck c;
  c.record = ledger.record(id);
  c.blockers = promotion_blockers(c.record, ledger.acceptance_stage(id), accepts, trusted_ref);
  return c;
}

AcceptanceRecord run_promotion(Ledger& ledger, const PromotionCheck& check, const std::string& by, const PromotionAccepts& accepts,
                               const PromotionSetting& setting) {
  const ExperimentRecord& r = check.record;
  const auto id = r.id();
  AcceptanceOptions options = acceptance_options(r, setting);
  // Fail closed before the promotion is recorded: acceptance commands are
  // the manifest's, never run unconfined.
  require_sandbox(true);
  const auto hidden = workspace_hidden(setting.workspace);
  options.candidate.hidden.insert(options.candidate.hidden.end(), hidden.begin(), hidden.end());
  std::vector<std::string> accepted;
  if (accepts.candidate_timing) accepted.push_back("candidate_timing");
  if (accepts.beyond_bound) accepted.push_back("speedup_beyond_bound");
  if (accepts.agent_base) accepted.push_back("agent_base");
  const auto promotion = r.promotion.is_null() ? ledger.record_promotion(id, by, accepted) : r.promotion["id"].get<std::int64_t>();
  // Recorded before it runs, and beaten while it runs: a killed acceptance
  // is seen as such (audit, the next promote).
  AcceptanceRecord record;
  {
    const Heartbeat heartbeat(setting.workspace.ledger, ledger.record_acceptance_start(id), ledger.heartbeat_interval_s());
    record = run_acceptance(r.acceptance, r.candidate.params, options);
    if (heartbeat.lost()) {
      throw InfraError(fmt::format("experiment {}: another promote took this acceptance run for dead and recorded it "
                                   "interrupted; its result ({}) is not recorded", id, record.verdict));
    }
  }
  ledger.record_acceptance(id, promotion, record);
  return record;
}

}  // namespace densefeed
