// submit, worker, status and cancel: the queue agents submit to. The queue is
// the ledger itself (experiment_events): `submit` records a validated
// manifest as queued and returns at once; workers take experiments in
// submission order, each in a child `densefeed` process, so that a crash in
// one experiment never takes the worker down and a cancel can end it.
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli.h"
#include "error.h"
#include "experiment_runner.h"
#include "gate_spec.h"
#include "gate_lock.h"
#include "heartbeat.h"
#include "ledger.h"
#include "printable.h"
#include "process_runner.h"
#include "slurm_executor.h"
#include "rank_group.h"
#include "slurm_serve.h"
#include "report.h"
#include "experiment_document.h"

namespace densefeed {
namespace {

// GPU indices for --gpus: "auto" asks nvidia-smi (none without it), "none"
// is none, else a comma-separated list of indices or UUIDs.
std::vector<std::string> find_gpus(const std::string& spec) {
  std::vector<std::string> gpus;
  if (spec == "none") return gpus;
  if (spec == "auto") {
    const auto out = capture_output({"nvidia-smi", "--query-gpu=index", "--format=csv,noheader"}, std::filesystem::current_path(),
                                    std::chrono::seconds(20));
    if (!out) return gpus;
    std::istringstream in(*out);
    for (std::string line; std::getline(in, line);) {
      line.erase(0, line.find_first_not_of(" \t"));
      line.erase(line.find_last_not_of(" \t\r") + 1);
      if (!line.empty()) gpus.push_back(line);
    }
    return gpus;
  }
  std::istringstream in(spec);
  for (std::string g; std::getline(in, g, ',');) {
    if (g.empty() || g.find_first_not_of("0123456789abcdefABCDEF-GPUgpu") != std::string::npos) {
      throw InputError("command line", {}, "--gpus", "expected auto, none or a comma-separated list of GPU indices or UUIDs, got '" + spec + "'");
    }
    gpus.push_back(g);
  }
  return gpus;
}

std::atomic<bool> g_stop{false};

}  // namespace

std::vector<CliVerb> add_queue_verbs(CLI::App& app, CliContext& ctx) {
  std::vector<CliVerb> verbs;

  auto* submit = app.add_subcommand("submit", "validate manifests and queue them (returns their ids at once; workers run them)");
  auto manifests = std::make_shared<std::vector<std::string>>();
  submit->add_option("MANIFEST", *manifests, "experiment manifest(s) (YAML)")->required();
  add_ledger_and_json(submit, ctx);
  verbs.push_back({submit, [&ctx, manifests] {
                     RunOptions options = run_options(ctx);
                     // Every manifest is checked before the ledger is opened: one bad
                     // manifest and nothing is queued.
                     std::vector<ExperimentOutcome> prepared;
                     for (const auto& m : *manifests) {
                       prepared.push_back(prepare_experiment(load_manifest(m, options.store, options.project), options));
                     }
                     Ledger ledger(options.workspace.ledger);
                     nlohmann::ordered_json queued = nlohmann::ordered_json::array();
                     for (auto& p : prepared) {
                       const auto id = record_prepared(ledger, p, ExperimentEvent::queued, "submit");
                       queued.push_back({{"experiment_id", id}, {"experiment", p.manifest.name}, {"manifest", p.manifest.doc.path}, {"state", "queued"}});
                       if (!ctx.json) {
                         std::cout << fmt::format("experiment {} queued ({}); follow it with: densefeed status {} --wait\n", id,
                                                  one_line(p.manifest.name), id);
                       }
                     }
                     if (ctx.json) {
                       // One manifest: one object; several: an array of them.
                       auto doc = queued.size() == 1 ? queued[0] : nlohmann::ordered_json{{"queued", queued}};
                       doc["ledger"] = options.workspace.ledger.string();
                       std::cout << doc.dump(2) << "\n";
                     }
                     return 0;
                   }});

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
                     // Under Slurm the scheduler assigns GPUs, not this host's list.
                     const auto gpus = wa->executor == "slurm" ? std::vector<std::string>{} : find_gpus(wa->gpus);
                     // An operator's typo must not reject every queued experiment: a
                     // profile no gate knows is refused before anything is taken.
                     bool known = false;
                     const GateStore& store = ctx.store();
                     for (const auto& name : list_gates(store)) {
                       try {
                         load_gate(store, name).profile_cases(wa->profile);
                         known = true;
                       } catch (const std::exception&) {
                       }
                     }
                     if (!known) {
                       throw InputError("command line", {}, "--profile",
                                        fmt::format("no gate in {} has a profile named '{}'", store.describe(), wa->profile));
                     }
                     const auto child_args = context_args(ctx);
                     const auto ledger_path = ctx.ledger_path();
                     const bool slurm = wa->executor == "slurm";
                     if (slurm) make_executor("slurm");  // fails now when Slurm's commands are missing
                     // The Slurm jobs of an experiment no live process owns any more are
                     // cancelled (found by name: slurm_executor.h).
                     const auto cancel_jobs = [&](std::int64_t id, const char* why) {
                       if (!slurm) return;
                       try {
                         for (const auto& j : slurm_cancel_prefix(slurm_experiment_prefix(ledger_path, id))) {
                           std::cout << fmt::format("experiment {}: cancelled its Slurm job {} ({}, {}): {}\n", id, j.id, j.name, j.state, why)
                                     << std::flush;
                         }
                       } catch (const InfraError& e) {
                         std::cout << fmt::format("experiment {}: its Slurm jobs could not be cancelled: {}\n", id, e.what()) << std::flush;
                       }
                     };
                     const auto print_recovered = [&](const RecoveredExperiment& r) {
                       std::cout << fmt::format("experiment {}: its owner died; {} ({})\n", r.id, to_string(r.event), r.detail) << std::flush;
                       cancel_jobs(r.id, "its owner died");
                     };
                     // What this worker has seen of other hosts' heartbeats: the start-up
                     // look begins the watch, the reaper goes on with it.
                     HeartbeatWatch watch;
                     {
                       Ledger ledger(ledger_path);
                       for (const auto& r : ledger.recover_dead_owners(&watch)) print_recovered(r);
                       // Jobs of this ledger whose experiment is not running under a live
                       // owner (a worker killed before it could cancel them) end now.
                       if (slurm) {
                         std::set<std::int64_t> ids;
                         for (const auto& j : slurm_jobs_with_prefix(slurm_ledger_prefix(ledger_path))) {
                           const auto rest = j.name.substr(slurm_ledger_prefix(ledger_path).size());
                           if (rest.size() > 1 && rest[0] == 'e') ids.insert(std::atoll(rest.c_str() + 1));
                         }
                         for (const auto id : ids) {
                           if (const auto s = ledger.state(id); s != ExperimentState::started && s != ExperimentState::cancel_requested) cancel_jobs(id, "no process runs its experiment");
                         }
                       }
                     }
                     if (gpus.empty()) std::cout << fmt::format("worker: {} CPU slot(s)\n", wa->slots) << std::flush;
                     else std::cout << fmt::format("worker: {} slot(s) over GPU(s) {}\n", wa->slots, fmt::join(gpus, ",")) << std::flush;
                     std::signal(SIGTERM, [](int) { g_stop = true; });
                     std::signal(SIGINT, [](int) { g_stop = true; });
                     std::mutex print;
                     // Any live worker requeues a dead one's experiment, also while every
                     // slot is busy or idle: one of this host within kReapEvery (2 s) of
                     // its death (its pid is gone); one of another host within
                     // kStaleHeartbeats heartbeat intervals plus two rounds of its last
                     // beat (Ledger::recover_dead_owners).
                     std::atomic<bool> reaper_done{false};
                     std::thread reaper([&] {
                       constexpr auto kReapEvery = std::chrono::seconds(2);
                       Ledger ledger(ledger_path);
                       auto next = std::chrono::steady_clock::now() + kReapEvery;
                       while (!g_stop && !reaper_done) {
                         std::this_thread::sleep_for(std::chrono::milliseconds(100));
                         if (std::chrono::steady_clock::now() < next) continue;
                         next = std::chrono::steady_clock::now() + kReapEvery;
                         try {
                           for (const auto& r : ledger.recover_dead_owners(&watch)) {
                             const std::lock_guard lock(print);
                             print_recovered(r);
                           }
                         } catch (const LedgerBusy&) {
                           // Another writer holds the lock: the next round tries again.
                         }
                       }
                     });
                     std::vector<std::thread> threads;
                     for (int slot = 0; slot < wa->slots; ++slot) {
                       // Each slot's GPUs: a share of the list, round robin.
                       std::vector<std::string> mine;
                       for (std::size_t g = static_cast<std::size_t>(slot); g < gpus.size(); g += static_cast<std::size_t>(wa->slots)) mine.push_back(gpus[g]);
                       if (!gpus.empty() && mine.empty()) mine.push_back(gpus[static_cast<std::size_t>(slot) % gpus.size()]);
                       threads.emplace_back([&, slot, mine] {
                         Ledger ledger(ledger_path);
                         while (!g_stop) {
                           std::optional<ClaimedExperiment> claimed;
                           try {
                             claimed = ledger.claim_next("worker");
                           } catch (const LedgerBusy&) {
                             // Another process holds the write lock past the wait: an idle
                             // worker waits on, it does not abort.
                             std::this_thread::sleep_for(std::chrono::seconds(1));
                             continue;
                           }
                           if (!claimed) {
                             if (wa->once) return;
                             std::this_thread::sleep_for(std::chrono::seconds(1));
                             continue;
                           }
                           const auto dir = Workspace{ledger_path}.runs() / std::to_string(claimed->id);
                           std::filesystem::create_directories(dir);
                           ProcessSpec spec;
                           spec.argv = {(self_dir() / "densefeed").string()};
                           spec.argv.insert(spec.argv.end(), child_args.begin(), child_args.end());
                           const std::vector<std::string> run_args = {
                               "worker-run", std::to_string(claimed->id), "--ledger", ledger_path.string(), "--profile", wa->profile,
                               "--jobs", std::to_string(mine.empty() ? wa->jobs : static_cast<int>(mine.size()))};
                           spec.argv.insert(spec.argv.end(), run_args.begin(), run_args.end());
                           if (wa->no_sandbox) spec.argv.push_back("--no-sandbox");
                           if (slurm) spec.argv.insert(spec.argv.end(), {"--executor", "slurm"});
                           if (!mine.empty()) {
                             spec.argv.push_back("--gpus");
                             spec.argv.push_back(fmt::format("{}", fmt::join(mine, ",")));
                           }
                           spec.cwd = dir;
                           spec.stdout_path = dir / "worker-run.stdout.log";
                           spec.stderr_path = dir / "worker-run.stderr.log";
                           spec.timeout = std::chrono::hours(24 * 7);
                           std::atomic<bool> cancel{false}, done{false};
                           bool lost = false;
                           ProcessResult p;
                           {
                             // Beaten while it runs; a worker that finds its experiment
                             // taken over (judged dead by a worker of another host) stops it.
                             const Heartbeat heartbeat(ledger_path, claimed->heartbeat_id, ledger.heartbeat_interval_s());
                             std::thread watcher([&] {
                               const Ledger reader(ledger_path, Ledger::Mode::read_only);
                               while (!done) {
                                 if (g_stop || heartbeat.lost() || reader.state(claimed->id) == ExperimentState::cancel_requested) cancel = true;
                                 std::this_thread::sleep_for(std::chrono::milliseconds(250));
                               }
                             });
                             spec.cancel = &cancel;
                             p = run_process(spec);
                             done = true;
                             watcher.join();
                             lost = heartbeat.lost();
                           }
                           // Whatever ended it, none of its jobs runs on.
                           if (!lost) cancel_jobs(claimed->id, "its run ended");
                           const auto state = ledger.state(claimed->id);
                           std::string line;
                           if (lost) {
                             // Another worker recorded what happens to it; nothing more here.
                             line = fmt::format("taken over: another worker judged this one dead and recorded it {}", to_string(state));
                           } else if (p.cancelled && !g_stop) {
                             ledger.record_event(claimed->id, ExperimentEvent::cancelled, "worker", "cancelled while running");
                             line = "cancelled";
                           } else if (g_stop && state == ExperimentState::started) {
                             // The worker was asked to stop: the experiment goes back to the queue once.
                             ledger.record_event(claimed->id, ExperimentEvent::requeued, "worker", "the worker stopped");
                             line = "requeued (worker stopping)";
                           } else if (state == ExperimentState::started || state == ExperimentState::cancel_requested) {
                             ledger.record_event(claimed->id, ExperimentEvent::interrupted, "worker",
                                                 "its densefeed process " + p.describe() + "; see " + spec.stderr_path.string());
                             line = "interrupted: " + p.describe();
                           } else {
                             line = to_string(state) + std::string(p.exit_code == 0 ? " (green)" : p.exit_code == 1 ? " (red)" : fmt::format(" (exit {})", p.exit_code));
                           }
                           const std::lock_guard lock(print);
                           std::cout << fmt::format("slot {}: experiment {} ({}): {}\n", slot, claimed->id, one_line(claimed->manifest_path), one_line(line))
                                     << std::flush;
                         }
                       });
                     }
                     for (auto& t : threads) t.join();
                     reaper_done = true;
                     reaper.join();
                     return 0;
                   }});

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
                     Ledger ledger(options.workspace.ledger);
                     const auto e = ledger.show(id);
                     ExperimentOutcome out;
                     try {
                       out = prepare_experiment(parse_manifest(e["manifest_text"].get<std::string>(), e["manifest_path"].get<std::string>(),
                                                               options.store, options.project),
                                                options);
                     } catch (const InputError& err) {
                       ledger.record_event(id, ExperimentEvent::rejected, "worker", err.what());
                       throw;
                     }
                     out.experiment_id = id;
                     execute_experiment(out, ledger, options);
                     ledger.record_finished(id, "worker");
                     std::cout << render_text_report(out);
                     return out.verdict == Verdict::green ? 0 : out.verdict == Verdict::red ? 1 : 3;
                   }});

  auto* status = app.add_subcommand("status", "an experiment's state and verdicts");
  struct StatusArgs {
    std::string id;
    bool wait = false;
    double timeout_s = 0;
  };
  auto sa = std::make_shared<StatusArgs>();
  status->add_option("ID", sa->id, "experiment id")->required();
  status->add_flag("--wait", sa->wait, "wait until it has ended (finished, interrupted, cancelled or rejected)");
  status->add_option("--timeout", sa->timeout_s,
                     "with --wait: stop waiting after this many seconds and print the status as it is then (exit 4: not ended yet); 0 = never")
      ->check(CLI::NonNegativeNumber);
  add_ledger_and_json(status, ctx);
  verbs.push_back({status, [&ctx, sa] {
                     const auto id = parse_experiment_id(sa->id);
                     const auto start = std::chrono::steady_clock::now();
                     // One connection for the whole wait: opening runs an integrity
                     // check of the file, which a 200 ms poll must not repeat. Each
                     // record() reads the latest committed state (WAL).
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     require_intact_chain(ledger);
                     ExperimentRecord e;
                     while (true) {
                       e = ledger.record(id);
                       if (!sa->wait || has_ended(e.summary.state)) break;
                       if (sa->timeout_s > 0 && std::chrono::steady_clock::now() - start > std::chrono::duration<double>(sa->timeout_s)) {
                         // Not an error: the status as it is now is the answer,
                         // and its exit (4, not ended yet) says so.
                         std::cerr << fmt::format("densefeed: experiment {} is still {} after {} s\n", id, to_string(e.summary.state), sa->timeout_s);
                         break;
                       }
                       std::this_thread::sleep_for(std::chrono::milliseconds(200));
                     }
                     const auto gate = locked_gate_for_next(ctx, e.summary.gate);
                     const auto s = experiment_document(e, gate ? &*gate : nullptr, ctx.ledger_path());
                     if (ctx.json) {
                       std::cout << s.dump(2) << "\n";
                     } else {
                       const ExperimentSummary& r = e.summary;
                       std::cout << fmt::format("experiment {} ({}): {}; verdict {}{}{}\n", id, one_line(r.name), to_string(r.state), one_line(r.verdict),
                                                r.verdict_stage.empty() ? "" : " (" + one_line(r.verdict_stage) + ")",
                                                r.reason.empty() ? "" : " — " + one_line(r.reason));
                       for (const auto& b : e.bench_cases) {
                         std::cout << fmt::format("  bench {}: {} {:.3f}x [{:.3f}, {:.3f}]\n", one_line(b.label), one_line(b.verdict), b.speedup, b.lo, b.hi);
                       }
                       if (!e.events.empty() && !e.events.back().detail.empty()) std::cout << "  " << one_line(e.events.back().detail) << "\n";
                       std::cout << render_next_steps_text(s["next"]);
                     }
                     // README: 0 green, 1 red, 2 rejected, 3 error/unknown/interrupted/cancelled, 4 not ended yet.
                     return exit_code_of(ledger.summary(id));
                   }});

  auto* cancel = app.add_subcommand("cancel", "cancel a queued experiment, or stop a running one");
  auto cancel_id = std::make_shared<std::string>();
  cancel->add_option("ID", *cancel_id, "experiment id")->required();
  add_ledger_and_json(cancel, ctx);
  verbs.push_back({cancel, [&ctx, cancel_id] {
                     const auto id = parse_experiment_id(*cancel_id);
                     Ledger ledger(ctx.ledger_path());
                     const auto state = ledger.cancel(id);
                     // Its Slurm jobs, where there is a Slurm (the worker running it
                     // ends them too, as it stops the run).
                     nlohmann::ordered_json cancelled_jobs = nlohmann::ordered_json::array();
                     if (state == ExperimentState::cancel_requested && slurm_available()) {
                       for (const auto& j : slurm_cancel_prefix(slurm_experiment_prefix(ctx.ledger_path(), id))) cancelled_jobs.push_back(j.id);
                     }
                     if (ctx.json) std::cout << nlohmann::ordered_json{{"experiment_id", id}, {"state", to_string(state)}, {"slurm_jobs_cancelled", cancelled_jobs}}.dump(2) << "\n";
                     else std::cout << fmt::format("experiment {}: {}{}\n", id, to_string(state),
                                                   cancelled_jobs.empty() ? "" : fmt::format("; scancelled its Slurm job(s) {}",
                                                                                             fmt::join(cancelled_jobs, ", ")));
                     return 0;
                   }});
  // What a Slurm job runs (hidden: slurm_executor.h writes its script).
  auto* serve = app.add_subcommand("slurm-serve", "");
  serve->group("");
  auto serve_dir = std::make_shared<std::string>();
  serve->add_option("DIR", *serve_dir)->required();
  verbs.push_back({serve, [serve_dir] { return slurm_serve(*serve_dir); }});
  // What a multi-rank command runs in its sandbox (hidden: rank_group.h).
  auto* group = app.add_subcommand("rank-group", "");
  group->group("");
  auto group_spec = std::make_shared<std::string>();
  group->add_option("SPEC", *group_spec)->required();
  verbs.push_back({group, [group_spec] { return rank_group_main(*group_spec); }});
  return verbs;
}

}  // namespace densefeed
