// submit, worker, status and cancel: the queue agents submit to. The queue is
// the ledger itself (experiment_events): `submit` records a validated
// manifest as queued and returns at once; workers take experiments in
// submission order, each in a child `densefeed` process, so that a crash in
// one experiment never takes the worker down and a cancel can end it.
#include <sys/prctl.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <iostream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "cancellation.h"
#include "cli.h"
#include "error.h"
#include "experiment_document.h"
#include "experiment_runner.h"
#include "ledger.h"
#include "process_runner.h"
#include "queue_printers.h"
#include "queued_run.h"
#include "rank_group.h"
#include "report.h"
#include "slurm_serve.h"
#include "status_wait.h"
#include "submission.h"
#include "worker.h"

namespace densefeed {

namespace {

void add_submit_verb(CLI::App& app, CliContext& ctx, std::vector<CliVerb>& verbs) {
  auto* submit = app.add_subcommand("submit", "validate manifests and queue them (returns their ids at once; workers run them)");
  auto manifests = std::make_shared<std::vector<std::string>>();
  submit->add_option("MANIFEST", *manifests, "experiment manifest(s) (YAML)")->required();
  add_ledger_and_json(submit, ctx);
  verbs.push_back({submit, [&ctx, manifests] {
                     const bool json = ctx.json;
                     const auto s = submit_experiments(*manifests, run_options(ctx), [json](const QueuedExperiment& q) {
                       if (!json) print_queued_text(std::cout, q);
                     }, ctx.peer.empty() ? "submit" : "submit by " + ctx.peer);
                     if (json) print_submission_json(std::cout, s);
                     return 0;
                   }, StoreUse::always});

}

// worker, and worker-run: what a worker's child runs for one experiment.
void add_worker_verbs(CLI::App& app, CliContext& ctx, std::vector<CliVerb>& verbs) {
  auto* worker = app.add_subcommand("worker", "run queued experiments in submission order (several workers may share a ledger)");
  struct WorkerArgs {
    int slots = 1;
    std::string gpus = "auto";
    bool once = false;
    bool no_sandbox = false;
    std::string profile = "quick";
    int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::string executor = "local";
  };
  auto wa = std::make_shared<WorkerArgs>();
  add_executor_option(worker, wa->executor);
  worker->add_option("--slots", wa->slots, "experiments at once")->check(CLI::Range(1, 64))->capture_default_str();
  worker->add_option("--gpus", wa->gpus, "auto (nvidia-smi), none, or a list such as 0,1")->capture_default_str();
  worker->add_flag("--once", wa->once, "exit when the queue is empty instead of waiting for more");
  worker->add_flag("--no-sandbox", wa->no_sandbox, "run candidate and base commands without bwrap (recorded with each gate run)");
  worker->add_option("--profile", wa->profile, "gate profile")->capture_default_str();
  worker->add_option("--jobs", wa->jobs, "harness processes at once per experiment (CPU slots)")->check(CLI::Range(1, 256))->capture_default_str();
  worker->add_option("--ledger", ctx.ledger_text, "SQLite ledger (default: the project's)");
  verbs.push_back({worker, [&ctx, wa] {
                     WorkerOptions o;
                     // Under Slurm the scheduler assigns GPUs, not this host's list.
                     if (!is_slurm_executor(wa->executor)) o.gpus = find_gpus(wa->gpus);
                     require_gate_profile(ctx.store(), wa->profile);
                     o.child_args = context_args(ctx);
                     o.ledger = ctx.ledger_path();
                     o.densefeed = self_dir() / "densefeed";
                     o.slots = wa->slots;
                     o.once = wa->once;
                     o.no_sandbox = wa->no_sandbox;
                     o.profile = wa->profile;
                     o.jobs = wa->jobs;
                     o.executor = wa->executor;
                     if (is_slurm_executor(o.executor)) make_executor(o.executor);  // fails now when Slurm's commands are missing
                     run_worker(o);
                     return 0;
                   }, StoreUse::always});

  // What a worker runs for one experiment (hidden: workers call it).
  auto* worker_run = app.add_subcommand("worker-run", "");
  worker_run->group("");
  struct WorkerRunArgs {
    std::string id, profile = "quick", gpus;
    int jobs = 1;
    bool no_sandbox = false;
    std::string executor = "local";
  };
  auto wr = std::make_shared<WorkerRunArgs>();
  add_executor_option(worker_run, wr->executor);
  worker_run->add_option("ID", wr->id)->required();
  worker_run->add_option("--profile", wr->profile);
  worker_run->add_option("--jobs", wr->jobs)->check(CLI::Range(1, 256));
  worker_run->add_option("--gpus", wr->gpus);
  worker_run->add_flag("--no-sandbox", wr->no_sandbox);
  worker_run->add_option("--ledger", ctx.ledger_text);
  verbs.push_back({worker_run, [&ctx, wr] {
                     // Dies with its worker, so a killed worker leaves no experiment running.
                     prctl(PR_SET_PDEATHSIG, SIGTERM);
                     const auto id = parse_experiment_id(wr->id);
                     RunOptions options = run_options(ctx);
                     options.profile = wr->profile;
                     options.jobs = wr->jobs;
                     options.sandbox = !wr->no_sandbox;
                     options.executor = make_executor(wr->executor);
                     if (!wr->gpus.empty()) {
                       std::istringstream in(wr->gpus);
                       for (std::string g; std::getline(in, g, ',');) options.gpus.push_back(g);
                     }
                     const auto out = run_queued_experiment(id, options);
                     std::cout << render_text_report(out);
                     return out.verdict == Verdict::green ? 0 : out.verdict == Verdict::red ? 1 : 3;
                   }, StoreUse::always});

}

void add_status_verbs(CLI::App& app, CliContext& ctx, std::vector<CliVerb>& verbs) {
  auto* status = app.add_subcommand("status", "an experiment's state and verdicts");
  struct StatusArgs {
    std::string id;
    bool wait = false;
    double timeout_s = 0;
  };
  auto sa = std::make_shared<StatusArgs>();
  status->add_option("ID", sa->id, "experiment id")->required();
  auto* wait = status->add_flag("--wait", sa->wait, "wait until it has ended (finished, interrupted, cancelled or rejected)");
  // A finite number of seconds, at most a day (MCP's get_status wait_s has the
  // same maximum, schemas in mcp_tools.cpp): CLI::NonNegativeNumber lets nan
  // through (every comparison with it is false) and 1e308 waits for ever.
  const CLI::Validator seconds(
      [](std::string& text) -> std::string {
        double v = 0;
        try {
          std::size_t used = 0;
          v = std::stod(text, &used);
          if (used != text.size()) return "--timeout: expected a number of seconds, got '" + text + "'";
        } catch (const std::exception&) {
          return "--timeout: expected a number of seconds, got '" + text + "'";
        }
        if (!std::isfinite(v) || v < 0 || v > kMaxStatusWaitS)
          return fmt::format("--timeout: expected seconds from 0 to {} (a day), got '{}'", kMaxStatusWaitS, text);
        return "";
      },
      "SECONDS");
  status->add_option("--timeout", sa->timeout_s,
                     "with --wait: stop waiting after this many seconds (0 to 86400) and print the status as it is then (exit 4: not ended "
                     "yet); 0 = never")
      ->check(seconds)
      ->needs(wait);
  add_ledger_and_json(status, ctx);
  verbs.push_back({status, [&ctx, sa] {
                     const auto id = parse_experiment_id(sa->id);
                     const auto start = std::chrono::steady_clock::now();
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     require_intact_chain(ledger);
                     const auto s = read_status(ledger, id, sa->wait, sa->timeout_s, start);
                     if (s.timed_out) {
                       // Not an error: the status as it is now is the answer, and
                       // its exit (4, not ended yet) says so.
                       std::cerr << fmt::format("densefeed: experiment {} is still {} after {} s\n", id, to_string(s.record.summary.state), sa->timeout_s);
                     }
                     const auto gate = locked_gate_for_next(ctx, s.record.summary.gate);
                     print_status(std::cout, s.record, experiment_document(s.record, gate ? &*gate : nullptr, ctx.ledger_path()), ctx.json);
                     // README: 0 green, 1 red, 2 rejected, 3 error/unknown/interrupted/cancelled, 4 not ended yet.
                     return exit_code_of(ledger.summary(id));
                   }});

  auto* cancel = app.add_subcommand("cancel", "cancel a queued experiment, or stop a running one");
  auto cancel_id = std::make_shared<std::string>();
  cancel->add_option("ID", *cancel_id, "experiment id")->required();
  add_ledger_and_json(cancel, ctx);
  verbs.push_back({cancel, [&ctx, cancel_id] {
                     const auto id = parse_experiment_id(*cancel_id);
                     print_cancellation(std::cout, cancel_experiment(ctx.ledger_path(), id), ctx.json);
                     return 0;
                   }});
}

}  // namespace

std::vector<CliVerb> add_queue_verbs(CLI::App& app, CliContext& ctx) {
  std::vector<CliVerb> verbs;
  add_submit_verb(app, ctx, verbs);
  add_worker_verbs(app, ctx, verbs);
  add_status_verbs(app, ctx, verbs);
  // What a Slurm job runs (hidden: slurm_executor.h writes its script).
  auto* serve = app.add_subcommand("slurm-serve", "");
  serve->group("");
  auto serve_dir = std::make_shared<std::string>();
  serve->add_option("DIR", *serve_dir)->required();
  auto serve_array = std::make_shared<bool>(false);
  serve->add_flag("--array", *serve_array);
  verbs.push_back({serve, [serve_dir, serve_array] { return slurm_serve(*serve_dir, *serve_array); }});
  // What a multi-rank command runs in its sandbox (hidden: rank_group.h).
  auto* group = app.add_subcommand("rank-group", "");
  group->group("");
  auto group_spec = std::make_shared<std::string>();
  group->add_option("SPEC", *group_spec)->required();
  verbs.push_back({group, [group_spec] { return rank_group_main(*group_spec); }});
  return verbs;
}

}  // namespace densefeed
