// review approve|reject and promote: the human decisions the ledger records.
// The database refuses a promotion that its invariants forbid; the checks
// here only say why in words first.
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "acceptance_runner.h"
#include "cli.h"
#include "error.h"
#include "gate_lock.h"
#include "gate_spec.h"
#include "heartbeat.h"
#include "ledger.h"
#include "printable.h"
#include "revision_build.h"
#include "untrusted_launch.h"
#include "arms.h"

namespace densefeed {
namespace {

std::string default_user() {
  const char* u = std::getenv("USER");
  return u && *u ? u : "";
}

// Why `e` (Ledger::show) cannot be promoted; empty when it can.
std::vector<std::string> promotion_blockers(const nlohmann::ordered_json& e, const std::string& acceptance_stage,
                                            bool accept_candidate_timing, bool accept_beyond_bound, bool accept_agent_base) {
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

}  // namespace

std::vector<CliVerb> add_review_verbs(CLI::App& app, CliContext& ctx) {
  std::vector<CliVerb> verbs;
  auto* review = app.add_subcommand("review", "record a human decision on an experiment's risk categories");
  review->require_subcommand(1);
  for (const char* decision : {"approve", "reject"}) {
    auto* verb = review->add_subcommand(decision, std::string(decision) + " the experiment's risk categories (all it declares, or --category)");
    struct Args {
      std::string id, by, note;
      std::vector<std::string> categories;
    };
    auto args = std::make_shared<Args>();
    verb->add_option("ID", args->id, "experiment id")->required();
    verb->add_option("--by", args->by, "who decides (a person)")->required();
    verb->add_option("--note", args->note, "why");
    verb->add_option("--category", args->categories, "numerics, concurrency, architecture or production (default: every category the manifest declares)");
    add_ledger_and_json(verb, ctx);
    const std::string d = decision;
    verbs.push_back({verb, [&ctx, args, d] {
                       const auto id = parse_experiment_id(args->id);
                       if (args->by.find_first_not_of(" \t") == std::string::npos) {
                         throw InputError("command line", {}, "--by", "expected the reviewer's name");
                       }
                       Ledger ledger(ctx.ledger_path());
                       auto categories = args->categories;
                       const auto state = ledger.review_state(id);
                       if (categories.empty()) {
                         for (const auto& [k, v] : state["categories"].items()) categories.push_back(k);
                       }
                       if (categories.empty()) {
                         ledger.show(id);  // no such experiment: InputError
                         throw InputError("command line", {}, "ID", fmt::format("experiment {} declares no risk category, so there is nothing to review", id));
                       }
                       for (const auto& c : categories) ledger.record_review(id, c, d, args->by, args->note);
                       const auto after = ledger.review_state(id);
                       if (ctx.json) std::cout << nlohmann::ordered_json{{"experiment_id", id}, {"categories", after["categories"]}}.dump(2) << "\n";
                       else {
                         for (const auto& [k, v] : after["categories"].items()) std::cout << fmt::format("experiment {} {}: {}\n", id, k, v.get<std::string>());
                       }
                       return 0;
                     }});
  }

  auto* promote = app.add_subcommand("promote", "move a green, approved experiment with no slower bench case to its pre-registered acceptance run");
  struct PromoteArgs {
    std::string id, by = default_user();
    bool accept_candidate_timing = false, accept_beyond_bound = false, accept_agent_base = false;
  };
  auto pa = std::make_shared<PromoteArgs>();
  promote->add_option("ID", pa->id, "experiment id")->required();
  promote->add_option("--by", pa->by, "who promotes (default: $USER)")->capture_default_str();
  promote->add_flag("--accept-candidate-timing", pa->accept_candidate_timing,
                    "accept a benchmark the candidate's own harness timed (its gate has no trusted bench.driver); recorded");
  promote->add_flag("--accept-speedup-beyond-bound", pa->accept_beyond_bound,
                    "accept a speedup above the gate's bench.max_speedup after a person checked it; recorded");
  promote->add_flag("--accept-agent-base", pa->accept_agent_base,
                    "accept a benchmark against a base the agent wrote (WORKTREE, or a commit whose files differ from the "
                    "trusted ref's) after a person checked the base; recorded");
  add_ledger_and_json(promote, ctx);
  verbs.push_back({promote, [&ctx, pa] {
                     const auto id = parse_experiment_id(pa->id);
                     if (pa->by.empty()) throw InputError("command line", {}, "--by", "expected who promotes ($USER is not set)");
                     Ledger ledger(ctx.ledger_path());
                     require_intact_chain(ledger);
                     const auto e = ledger.show(id);
                     const auto acceptance_stage = ledger.acceptance_stage(id);
                     const auto blockers = promotion_blockers(e, acceptance_stage, pa->accept_candidate_timing, pa->accept_beyond_bound,
                                                                         pa->accept_agent_base);
                     if (!blockers.empty()) {
                       if (ctx.json) {
                         std::cout << nlohmann::ordered_json{{"experiment_id", id}, {"promoted", false}, {"reasons", blockers}}.dump(2) << "\n";
                       } else {
                         std::cout << fmt::format("experiment {} cannot be promoted:\n", id);
                         for (const auto& b : blockers) std::cout << "  - " << one_line(b) << "\n";
                       }
                       return 1;
                     }
                     // The candidate runs from its own build, as in the gate.
                     AcceptanceOptions options;
                     options.work_dir = ctx.workspace().runs() / std::to_string(id) / "acceptance";
                     options.seed = std::stoull(e["gate_run"]["seed"].get<std::string>());
                     const GateStore& store = ctx.store();  // first: it puts the trusted ref's configuration in force
                     const Project& project = ctx.project();
                     const auto command = e["acceptance"]["command"].get<std::vector<std::string>>();
                     const std::filesystem::path python = is_python_command(command) ? harness_python(project) : std::filesystem::path();
                     options.candidate = worktree_context(project, store, python);
                     if (e["candidate_revision"] != "WORKTREE") {
                       const auto lock = read_lock(store);
                       const auto gate_name = e["gate"].get<std::string>();
                       auto problems = check_locked_file(store, lock, store.gate_rel(gate_name));
                       if (!problems.empty()) throw InputError(problems.front(), {}, "", "the gate does not match its lock; not promoting");
                       const auto gate = load_gate(store, gate_name);
                       options.limits = gate.limits;
                       options.gpus = gate.gpus;
                       const auto b = build_revision(gate, project, e["candidate_sha"].get<std::string>(), ctx.workspace());
                       if (!b.tampered.empty()) {
                         Ledger tamper_ledger(ctx.ledger_path());
                         for (const auto& t : b.tampered) tamper_ledger.record_tamper(t);
                       }
                       if (!b.ok) throw InfraError("the candidate's build failed: " + b.failure);
                       options.candidate = revision_context(project, store, b, python);
                     }
                     // Fail closed before the promotion is recorded: acceptance
                     // commands are the manifest's, never run unconfined.
                     require_sandbox(true);
                     const auto hidden = workspace_hidden(ctx.workspace());
                     options.candidate.hidden.insert(options.candidate.hidden.end(), hidden.begin(), hidden.end());
                     std::vector<std::string> accepted;
                     if (pa->accept_candidate_timing) accepted.push_back("candidate_timing");
                     if (pa->accept_beyond_bound) accepted.push_back("speedup_beyond_bound");
                     if (pa->accept_agent_base) accepted.push_back("agent_base");
                     const auto promotion = e["promotion"].is_null() ? ledger.record_promotion(id, pa->by, accepted)
                                                                     : e["promotion"]["id"].get<std::int64_t>();
                     // Recorded before it runs, and beaten while it runs: a killed
                     // acceptance is seen as such (audit, the next promote).
                     AcceptanceRecord record;
                     {
                       const Heartbeat heartbeat(ctx.ledger_path(), ledger.record_acceptance_start(id), ledger.heartbeat_interval_s());
                       record = run_acceptance(e["acceptance"], e["candidate_params"], options);
                       if (heartbeat.lost()) {
                         throw InfraError(fmt::format("experiment {}: another promote took this acceptance run for dead and recorded it "
                                                      "interrupted; its result ({}) is not recorded", id, record.verdict));
                       }
                     }
                     ledger.record_acceptance(id, promotion, record);
                     if (ctx.json) {
                       nlohmann::ordered_json doc = {{"experiment_id", id}, {"promoted", true}, {"acceptance", record.verdict},
                                                     {"reason", record.reason}, {"criteria", nlohmann::ordered_json::array()}};
                       for (const auto& c : record.criteria) {
                         doc["criteria"].push_back({{"criterion", c.criterion}, {"statistic", c.statistic}, {"lhs", c.lhs ? nlohmann::ordered_json(*c.lhs) : nlohmann::ordered_json()},
                                                    {"rhs", c.rhs ? nlohmann::ordered_json(*c.rhs) : nlohmann::ordered_json()}, {"passed", c.passed}});
                       }
                       std::cout << doc.dump(2) << "\n";
                     } else {
                       std::cout << fmt::format("experiment {} promoted by {}; acceptance: {}{}\n", id, one_line(pa->by), record.verdict,
                                                record.reason.empty() ? "" : " — " + one_line(record.reason));
                       for (const auto& c : record.criteria) {
                         std::cout << fmt::format("  {:<6} {:<48} {}: {} vs {}\n", c.passed ? "pass" : "FAIL", one_line(c.criterion), one_line(c.statistic),
                                                  c.lhs ? fmt::format("{:.6g}", *c.lhs) : "?", c.rhs ? fmt::format("{:.6g}", *c.rhs) : "?");
                       }
                     }
                     return record.verdict == "pass" ? 0 : 1;
                   }});
  return verbs;
}

}  // namespace densefeed
