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

// Why `e` (Ledger::show) cannot be promoted; empty when it can.
std::vector<std::string> promotion_blockers(const nlohmann::ordered_json& e, const std::string& acceptance_stage, const PromotionAccepts& a) {
  const bool accept_candidate_timing = a.candidate_timing, accept_beyond_bound = a.beyond_bound, accept_agent_base = a.agent_base;
  std::vector<std::string> why;
  const auto& r = e["record"];
  if (r["verdict"] != "green") {
    why.push_back(fmt::format("its verdict is {}{}{}", r["verdict"].get<std::string>(),
                              r["verdict_stage"].get<std::string>().empty() ? "" : " (" + r["verdict_stage"].get<std::string>() + " stage)",
                              r["reason"].get<std::string>().empty() ? "" : ": " + r["reason"].get<std::string>()));
  }
  if (e["gate_run"].is_null()) why.push_back(fmt::format("it has no gate run (state {})", e["state"].get<std::string>()));
  else if (e["gate_run"]["verdict"] != "green") why.push_back("its gate is " + e["gate_run"]["verdict"].get<std::string>() + ": " + e["gate_run"]["reason"].get<std::string>());
  for (const auto& b : e["bench_cases"]) {
    if (b["verdict"] == "slower") {
      why.push_back(fmt::format("bench case {} is slower (speedup {:.3f}x [{:.3f}, {:.3f}])", b["case_label"].get<std::string>(),
                                b["speedup"].get<double>(), b["speedup_lo"].get<double>(), b["speedup_hi"].get<double>()));
    }
  }
  bool candidate_timed = false;
  for (const auto& b : e["bench_cases"]) {
    candidate_timed = candidate_timed || b.value("timing", "candidate") == "candidate";
    for (const auto& f : b.value("timing_flags", nlohmann::ordered_json::array())) {
      if (f.value("kind", "") == "beyond_bound" && !accept_beyond_bound) {
        why.push_back(fmt::format("bench case {}: {}", b["case_label"].get<std::string>(), f.value("reason", "")));
      }
    }
  }
  if (candidate_timed && !accept_candidate_timing) {
    why.push_back("its benchmark was timed by the candidate's own harness (the gate has no bench.driver), so its speedup is the "
                  "candidate's word; a person who accepts that promotes with --accept-candidate-timing");
  }
  const auto& origin = r["base_origin"];
  if (!e["bench_cases"].empty() && !accept_agent_base &&
      is_agent_base(base_origin_kind_from_string(origin.value("kind", std::string("unrecorded"))))) {
    why.push_back(fmt::format("its benchmark's base is one the agent wrote ({}: {}), so its speedup may be a slowed base; a person "
                              "who checked the base promotes with --accept-agent-base",
                              origin["kind"].get<std::string>(), origin.value("reason", std::string())));
  }
  for (const auto& [category, decision] : e["categories"].items()) {
    if (decision != "approve") {
      why.push_back(fmt::format("risk category '{}' is not approved (latest decision: {}); run: densefeed review approve {} --by NAME --category {}",
                                category, decision.get<std::string>(), e["id"].get<std::int64_t>(), category));
    }
  }
  // A promote killed during acceptance leaves the promotion with an
  // acceptance that never ended: that one may be run again.
  if (!e["promotion"].is_null() && acceptance_stage != "started" && acceptance_stage != "interrupted") {
    why.push_back("it is already promoted" + (acceptance_stage.empty() ? std::string() : " (acceptance: " + acceptance_stage + ")"));
  }
  if (!e["acceptance"].is_object() || !e["acceptance"].contains("criteria")) {
    why.push_back("its manifest pre-registered no acceptance criteria (acceptance.criteria), so there is nothing to accept it by; submit a new manifest with them");
  }
  return why;
}

// The candidate runs from its own build, as in the gate (a WORKTREE
// candidate from the project folder).
AcceptanceOptions acceptance_options(const nlohmann::ordered_json& e, const PromotionSetting& s) {
  AcceptanceOptions options;
  options.work_dir = s.workspace.runs() / std::to_string(e["id"].get<std::int64_t>()) / "acceptance";
  options.seed = std::stoull(e["gate_run"]["seed"].get<std::string>());
  const auto command = e["acceptance"]["command"].get<std::vector<std::string>>();
  const std::filesystem::path python = is_python_command(command) ? harness_python(s.project) : std::filesystem::path();
  options.candidate = worktree_context(s.project, s.store, python);
  if (e["candidate_revision"] != "WORKTREE") {
    const auto lock = read_lock(s.store);
    const auto gate_name = e["gate"].get<std::string>();
    auto problems = check_locked_file(s.store, lock, s.store.gate_rel(gate_name));
    if (!problems.empty()) throw InputError(problems.front(), {}, "", "the gate does not match its lock; not promoting");
    const auto gate = load_gate(s.store, gate_name);
    options.limits = gate.limits;
    options.gpus = gate.gpus;
    const auto b = build_revision(gate, s.project, e["candidate_sha"].get<std::string>(), s.workspace);
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

PromotionCheck check_promotion(const Ledger& ledger, std::int64_t id, const PromotionAccepts& accepts) {
  PromotionCheck c;
  c.experiment = ledger.show(id);
  c.blockers = promotion_blockers(c.experiment, ledger.acceptance_stage(id), accepts);
  return c;
}

AcceptanceRecord run_promotion(Ledger& ledger, const PromotionCheck& check, const std::string& by, const PromotionAccepts& accepts,
                               const PromotionSetting& setting) {
  const auto& e = check.experiment;
  const auto id = e["id"].get<std::int64_t>();
  AcceptanceOptions options = acceptance_options(e, setting);
  // Fail closed before the promotion is recorded: acceptance commands are
  // the manifest's, never run unconfined.
  require_sandbox(true);
  const auto hidden = workspace_hidden(setting.workspace);
  options.candidate.hidden.insert(options.candidate.hidden.end(), hidden.begin(), hidden.end());
  std::vector<std::string> accepted;
  if (accepts.candidate_timing) accepted.push_back("candidate_timing");
  if (accepts.beyond_bound) accepted.push_back("speedup_beyond_bound");
  if (accepts.agent_base) accepted.push_back("agent_base");
  const auto promotion = e["promotion"].is_null() ? ledger.record_promotion(id, by, accepted) : e["promotion"]["id"].get<std::int64_t>();
  // Recorded before it runs, and beaten while it runs: a killed acceptance
  // is seen as such (audit, the next promote).
  AcceptanceRecord record;
  {
    const Heartbeat heartbeat(setting.workspace.ledger, ledger.record_acceptance_start(id), ledger.heartbeat_interval_s());
    record = run_acceptance(e["acceptance"], e["candidate_params"], options);
    if (heartbeat.lost()) {
      throw InfraError(fmt::format("experiment {}: another promote took this acceptance run for dead and recorded it "
                                   "interrupted; its result ({}) is not recorded", id, record.verdict));
    }
  }
  ledger.record_acceptance(id, promotion, record);
  return record;
}

}  // namespace densefeed
