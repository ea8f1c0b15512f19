#include "command_table.h"

#include "densefeed_version.h"

namespace densefeed {

std::vector<CliVerb> add_command_table(CLI::App& app, CliContext& ctx) {
  app.require_subcommand(1);
  app.set_version_flag("--version", "densefeed " DENSEFEED_VERSION " (commit " DENSEFEED_COMMIT ")");
  app.add_option("--project", ctx.project_text,
                 "the project folder holding densefeed.yaml (default: the first folder from here upwards that has one)");
  add_ledger_key_option(&app, ctx);
  app.add_flag("--trust-worktree", ctx.trust_worktree,
               "read gates, gates.lock and frozen files from the project folder as it is instead of the trusted ref "
               "(recorded in provenance)");
  app.add_option("--service", ctx.service_text,
                 "send the verb to the densefeed service listening on this unix socket (default: densefeed.yaml's service:)");
  // What a densefeed service's children get: they end with the service.
  app.add_flag("--die-with-parent", ctx.die_with_parent)->group("");
  // Set by a densefeed service on its children: whom it runs the verb for
  // (SO_PEERCRED), recorded with a submission. A peer's own global options
  // never reach the child (service_call.h).
  app.add_option("--peer", ctx.peer)->group("");
  std::vector<CliVerb> verbs;
  for (auto&& family : {add_ledger_verbs(app, ctx), add_review_verbs(app, ctx), add_queue_verbs(app, ctx), add_report_verbs(app, ctx),
                        add_machine_verbs(app, ctx), add_mcp_verbs(app, ctx), add_run_verbs(app, ctx), add_init_verbs(app, ctx),
                        add_gate_verbs(app, ctx), add_bench_verbs(app, ctx), add_compare_verbs(app, ctx), add_trace_verbs(app, ctx),
                        add_serve_verbs(app, ctx), add_repro_verbs(app, ctx), add_narrow_verbs(app, ctx)}) {
    verbs.insert(verbs.end(), family.begin(), family.end());
  }
  return verbs;
}

}  // namespace densefeed
