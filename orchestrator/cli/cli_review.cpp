// review approve|reject and promote: the human decisions the ledger records.
// The database refuses a promotion that its invariants forbid; promotion.h
// says why in words first and runs the acceptance.
#include <cstdlib>
#include <iostream>

#include "cli.h"
#include "error.h"
#include "ledger.h"
#include "promotion.h"
#include "review_decisions.h"
#include "review_printers.h"

namespace densefeed {
namespace {

std::string default_user() {
  const char* u = std::getenv("USER");
  return u && *u ? u : "";
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
                       // Through a service the reviewer is the peer the kernel named,
                       // "LOGIN (uid N)" (its policy made --by that login).
                       const std::string by = ctx.peer.empty() ? args->by : ctx.peer;
                       print_review_state(std::cout, id, record_review_decisions(ledger, id, d, by, args->note, args->categories), ctx.json);
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
                     if (!ctx.peer.empty()) pa->by = ctx.peer;  // through a service: "LOGIN (uid N)", the peer the kernel named
                     Ledger ledger(ctx.ledger_path());
                     require_intact_chain(ledger);
                     const PromotionAccepts accepts{pa->accept_candidate_timing, pa->accept_beyond_bound, pa->accept_agent_base};
                     const PromotionCheck check = check_promotion(ledger, id, accepts, ctx.store().ref);
                     if (!check.blockers.empty()) {
                       print_promotion_refused(std::cout, id, check.blockers, ctx.json);
                       return 1;
                     }
                     PromotionSetting setting;
                     setting.workspace = ctx.workspace();
                     setting.store = ctx.store();
                     setting.project = ctx.project();
                     const AcceptanceRecord record = run_promotion(ledger, check, pa->by, accepts, setting);
                     print_promotion(std::cout, id, pa->by, record, ctx.json);
                     return record.verdict == "pass" ? 0 : 1;
                   }, StoreUse::always});
  return verbs;
}

}  // namespace densefeed
