#include "worker_slot.h"

#include "executor_factory.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "heartbeat.h"
#include "ledger.h"
#include "printable.h"
#include "process_runner.h"
#include "worker_log.h"
#include "worker_slurm.h"
#include "workspace.h"

namespace densefeed {
namespace {

// The child that runs experiment `claimed` (the worker-run verb), logging into its run folder.
ProcessSpec worker_run_spec(const ClaimedExperiment& claimed, const std::vector<std::string>& gpus, const WorkerOptions& o) {
  const auto dir = Workspace{o.ledger}.runs() / std::to_string(claimed.id);
  std::filesystem::create_directories(dir);
  ProcessSpec spec;
  spec.argv = {o.densefeed.string()};
  spec.argv.insert(spec.argv.end(), o.child_args.begin(), o.child_args.end());
  const std::vector<std::string> run_args = {"worker-run", std::to_string(claimed.id), "--ledger", o.ledger.string(), "--profile", o.profile,
                                             "--jobs", std::to_string(gpus.empty() ? o.jobs : static_cast<int>(gpus.size()))};
  spec.argv.insert(spec.argv.end(), run_args.begin(), run_args.end());
  if (o.no_sandbox) spec.argv.push_back("--no-sandbox");
  if (is_slurm_executor(o.executor)) spec.argv.insert(spec.argv.end(), {"--executor", o.executor});
  if (!gpus.empty()) {
    spec.argv.push_back("--gpus");
    spec.argv.push_back(fmt::format("{}", fmt::join(gpus, ",")));
  }
  spec.cwd = dir;
  spec.stdout_path = dir / "worker-run.stdout.log";
  spec.stderr_path = dir / "worker-run.stderr.log";
  spec.timeout = std::chrono::hours(24 * 7);
  return spec;
}

struct ChildEnd {
  ProcessResult process;
  bool lost = false;  // another worker judged this one dead and took the experiment over
};

// Runs the child, beaten while it runs; it is stopped when the worker stops,
// the experiment's cancel is requested, or a worker that finds its
// experiment taken over (judged dead by a worker of another host).
ChildEnd run_beaten(ProcessSpec spec, const ClaimedExperiment& claimed, const Ledger& ledger, WorkerShared& shared) {
  const auto& ledger_path = shared.options.ledger;
  std::atomic<bool> cancel{false}, done{false};
  ChildEnd end;
  const Heartbeat heartbeat(ledger_path, claimed.heartbeat_id, ledger.heartbeat_interval_s());
  std::thread watcher([&] {
    const Ledger reader(ledger_path, Ledger::Mode::read_only);
    while (!done) {
      if (shared.stopping() || heartbeat.lost() || reader.state(claimed.id) == ExperimentState::cancel_requested) cancel = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
  spec.cancel = &cancel;
  end.process = run_process(spec);
  done = true;
  watcher.join();
  end.lost = heartbeat.lost();
  return end;
}

// Records what ended experiment `id` when its child could not, and says it in one line.
std::string record_end(std::int64_t id, const ChildEnd& end, const ProcessSpec& spec, Ledger& ledger, WorkerShared& shared) {
  const ProcessResult& p = end.process;
  const auto state = ledger.state(id);
  if (end.lost) {
    // Another worker recorded what happens to it; nothing more here.
    return fmt::format("taken over: another worker judged this one dead and recorded it {}", to_string(state));
  }
  if (p.cancelled && !shared.stopping()) {
    ledger.record_event(id, ExperimentEvent::cancelled, "worker", "cancelled while running");
    return "cancelled";
  }
  if (shared.stopping() && state == ExperimentState::started) {
    // The worker was asked to stop: the experiment goes back to the queue once.
    ledger.record_event(id, ExperimentEvent::requeued, "worker", "the worker stopped");
    return "requeued (worker stopping)";
  }
  if (state == ExperimentState::started || state == ExperimentState::cancel_requested) {
    ledger.record_event(id, ExperimentEvent::interrupted, "worker",
                        "its densefeed process " + p.describe() + "; see " + spec.stderr_path.string());
    return "interrupted: " + p.describe();
  }
  return to_string(state) + std::string(p.exit_code == 0 ? " (green)" : p.exit_code == 1 ? " (red)" : fmt::format(" (exit {})", p.exit_code));
}

}  // namespace

void run_worker_slot(int slot, const std::vector<std::string>& gpus, WorkerShared& shared) {
  const WorkerOptions& o = shared.options;
  Ledger ledger(o.ledger);
  while (!shared.stopping()) {
    std::optional<ClaimedExperiment> claimed;
    try {
      claimed = ledger.claim_next("worker");
    } catch (const LedgerBusy&) {
      // Another process holds the write lock past the wait: an idle worker
      // waits on, it does not abort.
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    if (!claimed) {
      if (o.once) return;
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    const ProcessSpec spec = worker_run_spec(*claimed, gpus, o);
    const ChildEnd end = run_beaten(spec, *claimed, ledger, shared);
    // Whatever ended it, none of its jobs runs on.
    if (!end.lost && o.executor == "slurm") cancel_experiment_slurm_jobs(o.ledger, claimed->id, "its run ended", shared.log);
    WorkerRun run{slot, claimed->id, claimed->manifest_path, record_end(claimed->id, end, spec, ledger, shared)};
    shared.log.print(fmt::format("slot {}: experiment {} ({}): {}\n", slot, run.experiment_id, one_line(run.manifest_path), one_line(run.outcome)));
    const std::lock_guard lock(shared.report_mutex);
    shared.report.runs.push_back(std::move(run));
  }
}

}  // namespace densefeed
