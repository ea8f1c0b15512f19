// gate lock|verify|list|show: frozen correctness gates (gate_relock.h,
// gate_verify.h, gate_overview.h).
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "gate_overview.h"
#include "gate_relock.h"
#include "gate_verify.h"
#include "report.h"

namespace densefeed {
namespace {

void print_relock(const GateRelock& r) {
  if (r.changes.empty()) std::cout << r.lock_rel << ": unchanged\n";
  for (const auto& c : r.changes) std::cout << c << "\n";
  if (!r.changes.empty() && !r.commit_on.empty()) {
    std::cout << fmt::format("commit {} on {} so that runs use it\n", r.lock_rel, r.commit_on);
  }
}

void print_verification(const GateVerification& v, bool json) {
  if (json) {
    nlohmann::ordered_json report = nlohmann::ordered_json::object();
    for (const auto& g : v.gates) report[g.name] = g.problems;
    if (!v.tampered.empty()) {
      std::vector<std::string> tampered;
      for (const auto& e : v.tampered) {
        tampered.push_back(fmt::format("{}: {}: {} (commit {})", to_string(e.kind), e.path, e.detail, e.commit.substr(0, 12)));
      }
      report["trusted ref export"] = tampered;  // no gate has a space in its name
    }
    std::cout << report.dump(2) << "\n";
    return;
  }
  for (const auto& g : v.gates) {
    std::cout << fmt::format("{}: {}\n", g.name, g.problems.empty() ? "ok" : "NOT OK");
    for (const auto& p : g.problems) std::cout << "  " << p << "\n";
    if (!g.problems.empty()) {
      std::cout << fmt::format("  to fix: a person reviews the change and runs `densefeed gate lock {}`, then commits gates.lock; "
                               "or restore the files named above (git checkout -- FILE)\n",
                               g.name);
    }
  }
  for (const auto& e : v.tampered) {
    std::cout << fmt::format("export of {}: TAMPERED ({}): {}: {}\n", v.trusted, to_string(e.kind), e.path, e.detail);
  }
}

void print_overview(const GateOverview& o, bool json) {
  const auto doc = gate_json(o.gate, o.lock_problems, o.blind_spots ? &*o.blind_spots : nullptr, o.blind_spots_note);
  std::cout << (json ? doc.dump(2) + "\n" : render_gate_text(doc));
}

}  // namespace

std::vector<CliVerb> add_gate_verbs(CLI::App& app, CliContext& ctx) {
  auto* gate_cmd = app.add_subcommand("gate", "frozen correctness gates");
  gate_cmd->require_subcommand(1);
  auto* gate_lock = gate_cmd->add_subcommand(
      "lock", "re-lock gates (a person runs this, after committing them on the trusted ref): write gates.lock and print what changed");
  auto lock_names = std::make_shared<std::vector<std::string>>();
  gate_lock->add_option("NAME", *lock_names, "gates to re-lock (default: all)");
  auto* gate_verify = gate_cmd->add_subcommand("verify", "check every gate of the project folder against its gates.lock (for CI)");
  auto* gate_list = gate_cmd->add_subcommand("list", "list gates");
  auto* gate_show = gate_cmd->add_subcommand("show", "what a gate runs, accepts, checks and freezes");
  auto show_gate = std::make_shared<std::string>();
  gate_show->add_option("NAME", *show_gate, "gate name")->required();
  for (auto* sub : {gate_verify, gate_list, gate_show}) sub->add_flag("--json", ctx.json, "print JSON");

  std::vector<CliVerb> verbs;
  verbs.push_back({gate_lock,
                   [&ctx, lock_names] {
                     const GateStore worktree = ctx.worktree();
                     // Only what is committed on the trusted ref is locked; --trust-worktree locks the folder as it is.
                     const GateStore* trusted = ctx.trust_worktree ? nullptr : &ctx.store();
                     print_relock(relock_gates(ctx.project(), worktree, trusted, *lock_names));
                     return 0;
                   },
                   StoreUse::always});
  verbs.push_back({gate_list,
                   [&ctx] {
                     const auto names = list_gates(ctx.store());
                     if (ctx.json) std::cout << nlohmann::json(names).dump(2) << "\n";
                     else for (const auto& n : names) std::cout << n << "\n";
                     return 0;
                   },
                   StoreUse::always});
  verbs.push_back({gate_show,
                   [&ctx, show_gate] {
                     const GateStore& store = ctx.store();
                     print_overview(gate_overview(store, *show_gate, ctx.ledger_path()), ctx.json);
                     return 0;
                   },
                   StoreUse::always});
  verbs.push_back({gate_verify,
                   [&ctx] {
                     GateVerification v = verify_gates(ctx.project(), ctx.worktree());
                     // The trusted ref's export that runs use, when there is one:
                     // verified against its commit (the context replaced an altered
                     // one and recorded what differed).
                     if (ctx.store_opened()) v.add_export(ctx.store());
                     print_verification(v, ctx.json);
                     return v.ok() ? 0 : 1;
                   },
                   StoreUse::if_exported});
  return verbs;
}

}  // namespace densefeed
