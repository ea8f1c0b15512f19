// narrow ID [--budget 10m] (issue 30): densefeed runs the experiments that
// tell apart why ID is red, each recorded linked to it, within the budget,
// and names the layer at fault (pipeline/narrow.h); the conclusion is
// recorded in the ledger (narrowings) and printed.
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <iostream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "cli.h"
#include "progress_display.h"
#include "error.h"
#include "executor.h"
#include "ledger.h"
#include "narrow.h"
#include "narrow_printers.h"
#include "service_client.h"

namespace densefeed {
namespace {

void stop_narrow_on_signal(int signal_number) {
  request_interrupt(signal_number);
  std::signal(signal_number, SIG_DFL);
}

// "10m", "90s", "1h", "600" (seconds): seconds > 0. Throws InputError naming --budget.
double parse_budget(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = used > 0 ? text.substr(used) : "";
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" || unit == "min" ? 60 : unit == "h" ? 3600 : -1;
  if (used == 0 || scale < 0 || !(v > 0) || v * scale > 7 * 86400.0) {
    throw InputError("--budget", {}, text, "expected a duration such as 10m, 90s, 1h or 600 (seconds), more than 0 and at most a week");
  }
  return v * scale;
}

}  // namespace

std::vector<CliVerb> add_narrow_verbs(CLI::App& app, CliContext& ctx) {
  auto* narrow = app.add_subcommand("narrow", "narrow down why experiment ID is red: densefeed reruns its red cases, swaps precision, "
                                              "bisects the partition and the commits, each a recorded experiment, within a budget, "
                                              "and names the layer at fault");
  struct Args {
    std::string id, budget = "10m", manifest;
    bool no_sandbox = false;
    std::string executor_name = "local";
    int jobs = static_cast<int>(std::max(1u, std::min(256u, std::thread::hardware_concurrency())));
  };
  auto a = std::make_shared<Args>();
  narrow->add_option("ID", a->id, "the red experiment")->required();
  narrow->add_option("--budget", a->budget, "the most wall time it may take, e.g. 10m, 90s, 600 (seconds)")->capture_default_str();
  narrow->add_option("--manifest", a->manifest, "the manifest to rerun it with (default: the one it recorded, when unchanged)");
  narrow->add_option("--jobs", a->jobs, "harness processes at once (default: the machine's cores)")->check(CLI::Range(1, 256));
  narrow->add_flag("--no-sandbox", a->no_sandbox, "run candidate and base commands without bwrap (recorded in each step)");
  add_executor_option(narrow, a->executor_name);
  add_ledger_and_json(narrow, ctx);
  return {{narrow, [&ctx, a] {
             NarrowOptions options;
             options.budget_s = parse_budget(a->budget);
             const auto id = parse_experiment_id(a->id);
             options.run = run_options(ctx);
             options.run.jobs = a->jobs;
             options.run.sandbox = !a->no_sandbox;
             options.run.executor = make_executor(a->executor_name);
             options.manifest = a->manifest;
             if (::isatty(STDERR_FILENO)) {
               // Each step's progress in place, then the step's line.
               auto display = std::make_shared<ProgressDisplay>(STDERR_FILENO, true);
               options.run.on_progress = [display](const RunProgress& p) { display->show(p); };
               options.run.on_bench_progress = [display](const BenchProgress& p) { display->show(p); };
               options.on_step = [display](const NarrowStep& s) {
                 display->finish();
                 std::cerr << narrow_step_line(s) << std::endl;
               };
             }
             if (const auto service = configured_service(ctx); !service.empty() && ctx.peer.empty()) {
               std::cerr << fmt::format("densefeed: note: this project names a densefeed service ({}); `narrow` runs its steps here, "
                                        "as your user, into the local ledger (as `run` does)\n", service.string());
             }
             std::signal(SIGTERM, stop_narrow_on_signal);
             std::signal(SIGINT, stop_narrow_on_signal);
             const NarrowResult result = narrow_experiment(id, options);
             const auto doc = narrow_json(result);
             Ledger(options.run.workspace.ledger).record_narrowing(id, to_string(result.layer), result.conclusion, doc);
             if (ctx.json) std::cout << doc.dump(2) << "\n";
             else std::cout << render_narrow_text(result);
             return 0;
           },
           StoreUse::always}};
}

}  // namespace densefeed
