// run: one experiment, now, in this process (experiment_runner.h), printed
// as report.h renders it.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "cli.h"
#include "bench_progress.h"
#include "executor.h"
#include "fail_on.h"
#include "exit_code.h"
#include "experiment_runner.h"
#include "experiment_summary.h"
#include "error.h"
#include "ledger.h"
#include "replay_plan.h"
#include "progress_display.h"
#include "report.h"
#include "sha256.h"
#include "service_client.h"

namespace densefeed {
namespace {

// `header`: the text report's first lines are still to print (no terminal
// header was printed as the run started).
void print_run(const ExperimentOutcome& outcome, const RunOptions& options, bool json, bool header) {
  if (json) std::cout << report_json(outcome, options.workspace.ledger.string()).dump(2) << "\n";
  else std::cout << render_text_report(outcome, header);
}

// SIGTERM or SIGINT (a `timeout`, a Ctrl-C) while `run` runs: every launch
// ends, the experiment is recorded interrupted with what it had
// (experiment_runner.h); a second one ends densefeed at once.
void stop_on_signal(int signal_number) {
  request_interrupt(signal_number);
  std::signal(signal_number, SIG_DFL);
}

// Seen while it runs: the header at once (text only; `header_printed` says
// it was), then one progress line on stderr (updated in place on a
// terminal, plain lines elsewhere) unless `quiet`. The display, or null.
std::shared_ptr<ProgressDisplay> watch_run(RunOptions& options, bool quiet, bool json, const std::shared_ptr<bool>& header_printed) {
  auto display = quiet ? nullptr : std::make_shared<ProgressDisplay>(STDERR_FILENO, ::isatty(STDERR_FILENO) == 1);
  if (display) {
    options.on_progress = [display](const RunProgress& p) { display->show(p); };
    options.on_bench_progress = [display](const BenchProgress& p) { display->show(p); };
  }
  if (!json) {
    options.on_started = [display, header_printed](const ExperimentOutcome& o) {
      if (display) display->finish();
      std::cout << render_text_header(o) << std::flush;
      *header_printed = true;
    };
  }
  return display;
}

}  // namespace

std::vector<CliVerb> add_run_verbs(CLI::App& app, CliContext& ctx) {
  auto* run = app.add_subcommand("run", "validate a manifest, run its gate, then (green only) its benchmark; record all in the ledger");
  struct Args {
    std::string manifest;
    RunOptions options;
    std::string seed_text;
    CLI::Option* seed = nullptr;
    bool no_bench = false;
    bool no_sandbox = false;
    bool quiet = false;
    std::string executor_name = "local";
    std::vector<std::string> cases;
    std::int64_t failing_of = 0;
    std::vector<std::string> candidate_params;
    CLI::Option* profile = nullptr;
    std::vector<std::string> fail_on;
  };
  auto a = std::make_shared<Args>();
  run->add_option("MANIFEST", a->manifest, "experiment manifest (YAML); with --failing-of, default: the one that experiment recorded");
  run->add_option("--ledger", ctx.ledger_text, "SQLite ledger (default: the project's, .densefeed/ledger.db)");
  add_ledger_key_option(run, ctx);
  a->profile = run->add_option("--profile", a->options.profile, "gate profile (quick, full, or one the gate names)")->capture_default_str();
  run->add_option("--case", a->cases,
                  "run only the cases with these key=value pairs, e.g. 'T=24576' or a case's whole label (repeatable: any of them)")
      ->allow_extra_args(false);  // one value each: `--case C MANIFEST` keeps MANIFEST
  run->add_option("--failing-of", a->failing_of,
                  "replay experiment ID's red cases (or those --case names) with its seed and profile, recorded as a new "
                  "experiment linked to it")
      ->check(CLI::Range(std::int64_t{1}, INT64_MAX));
  run->add_option("--candidate-param", a->candidate_params,
                  "with --failing-of: set a candidate param for the replay, KEY=VALUE (e.g. precision=ieee; repeatable); "
                  "checked against the gate's params")
      ->allow_extra_args(false);
  a->seed = run->add_option("--seed", a->seed_text, "input seed, 0..2^64-1 (default: drawn fresh and recorded)");
  a->options.jobs = static_cast<int>(std::max(1u, std::min(256u, std::thread::hardware_concurrency())));
  run->add_option("--jobs", a->options.jobs, "harness processes at once (default: the machine's cores)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  run->add_flag("--no-bench", a->no_bench, "stop after the gate");
  run->add_flag("--no-sandbox", a->no_sandbox, "run candidate and base commands without bwrap (recorded in the report)");
  run->add_flag("--json", ctx.json, "print one JSON document");
  run->add_flag("--quiet,-q", a->quiet, "no progress lines on stderr while it runs (stage, case k of N, time, estimate)");
  auto budget = std::make_shared<double>(0);
  run->add_option("--bench-seconds", *budget,
                  "the bench's measurement budget per case, seconds of timed rounds (default: the gate's bench.max_seconds_per_case; "
                  "what an inconclusive case's next step asks for)")
      ->check(CLI::Range(1.0, 86400.0));
  run->add_option("--fail-on", a->fail_on,
                  "exit 5 when the gate is green but a bench case's verdict is one of these (slower, inconclusive; "
                  "comma-separated or repeated): CI fails on a regression")
      ->allow_extra_args(false)
      ->delimiter(',')
      ->check(CLI::IsMember({"slower", "inconclusive"}));
  add_executor_option(run, a->executor_name);
  return {{run,
           [&ctx, a, budget] {
             RunOptions options = run_options(ctx);
             if (*budget > 0) options.bench_budget_s = *budget;
             auto header_printed = std::make_shared<bool>(false);
             const auto display = watch_run(options, a->quiet, ctx.json, header_printed);
             std::signal(SIGTERM, stop_on_signal);
             std::signal(SIGINT, stop_on_signal);
             options.profile = a->options.profile;
             options.jobs = a->options.jobs;
             if (a->seed->count() > 0) options.seed = parse_unsigned("--seed", a->seed_text, UINT64_MAX);
             for (const auto& c : a->cases) options.cases.push_back(parse_case_filter(c));
             std::string manifest = a->manifest;
             for (const auto& kv : a->candidate_params) {
               const auto eq = kv.find('=');
               if (a->failing_of <= 0) {
                 throw InputError("--candidate-param", {}, kv, "only with --failing-of ID: a first experiment's params are its manifest's");
               }
               if (eq == std::string::npos || eq == 0) throw InputError("--candidate-param", {}, kv, "not KEY=VALUE (e.g. precision=ieee)");
               // A JSON scalar (12, 1.5, true) when it is one, else the text itself.
               auto v = nlohmann::ordered_json::parse(kv.substr(eq + 1), nullptr, false);
               if (v.is_discarded() || v.is_structured() || v.is_null()) v = kv.substr(eq + 1);
               options.candidate_param_overrides[kv.substr(0, eq)] = v;
             }
             if (a->failing_of > 0) {
               // run --failing-of ID (issue 30): ID's manifest (or MANIFEST), red cases, seed, profile and link.
               const ExperimentRecord e = Ledger(options.workspace.ledger, Ledger::Mode::read_only).record(a->failing_of);
               manifest = replay_manifest(e, options, manifest);
               plan_replay(e, options.workspace.ledger, options, a->seed->count() > 0, a->profile->count() > 0);
             } else if (manifest.empty()) {
               throw InputError("run", {}, "MANIFEST", "no manifest given: densefeed run MANIFEST (or --failing-of ID to replay one)");
             }
             options.bench = !a->no_bench;
             options.sandbox = !a->no_sandbox;
             options.executor = make_executor(a->executor_name);
             if (const auto service = configured_service(ctx); !service.empty() && ctx.peer.empty()) {
               // Said before it runs: a fresh-user trial ran here and never saw the service's ledger.
               std::cerr << fmt::format("densefeed: note: this project names a densefeed service ({}); `run` records into a "
                                        "local ledger as your user (audit labels it same-user): `densefeed submit` goes to the service\n",
                                        service.string());
             }
             const ExperimentOutcome outcome = run_experiment(manifest, options);
             if (display) display->finish();
             if (const int sig = interrupt_signal()) {
               std::cerr << fmt::format("densefeed: {} received: experiment {} stopped and recorded as interrupted, with the results "
                                        "it had\n", strsignal(sig), outcome.experiment_id);
             }
             print_run(outcome, options, ctx.json, !*header_printed);
             const int code = outcome.record ? exit_code_of(outcome.record->summary) : exit_code_of(outcome.verdict);
             if (code == kExitGreen && outcome.record) {
               const auto findings = fail_on_findings(*outcome.record, parse_fail_on(a->fail_on));
               for (const auto& f : findings) std::cerr << "densefeed: --fail-on: " << f << "\n";
               if (!findings.empty()) return kExitFailOn;
             }
             return code;
           },
           StoreUse::always}};
}

}  // namespace densefeed
