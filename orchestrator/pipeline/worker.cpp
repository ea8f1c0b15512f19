#include "worker.h"

#include <csignal>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error.h"
#include "gate_spec.h"
#include "gate_store.h"
#include "process_runner.h"
#include "worker_log.h"
#include "worker_slot.h"
#include "worker_slurm.h"

namespace densefeed {
namespace {

// Set by SIGTERM and SIGINT once a worker runs with stop_on_signals; never
// reset: the process is ending.
std::atomic<bool> g_signalled{false};

void record_recovered(const RecoveredExperiment& r, WorkerShared& shared) {
  shared.log.print(fmt::format("experiment {}: its owner died; {} ({})\n", r.id, to_string(r.event), r.detail));
  if (shared.options.executor == "slurm") cancel_experiment_slurm_jobs(shared.options.ledger, r.id, "its owner died", shared.log);
  const std::lock_guard lock(shared.report_mutex);
  shared.report.recovered.push_back(r);
}

// Any live worker requeues a dead one's experiment, also while every slot is
// busy or idle: one of this host within kReapEvery (2 s) of its death (its
// pid is gone); one of another host within kStaleHeartbeats heartbeat
// intervals plus two rounds of its last beat (Ledger::recover_dead_owners).
// `watch` goes on with what the start-up look saw of other hosts' heartbeats.
void reap(HeartbeatWatch& watch, const std::atomic<bool>& done, WorkerShared& shared) {
  constexpr auto kReapEvery = std::chrono::seconds(2);
  Ledger ledger(shared.options.ledger);
  auto next = std::chrono::steady_clock::now() + kReapEvery;
  while (!shared.stopping() && !done) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (std::chrono::steady_clock::now() < next) continue;
    next = std::chrono::steady_clock::now() + kReapEvery;
    try {
      for (const auto& r : ledger.recover_dead_owners(&watch)) record_recovered(r, shared);
    } catch (const LedgerBusy&) {
      // Another writer holds the lock: the next round tries again.
    }
  }
}

// Slot `slot`'s GPUs: a share of the list, round robin (one of them when
// there are more slots than GPUs).
std::vector<std::string> slot_gpus(int slot, int slots, const std::vector<std::string>& gpus) {
  std::vector<std::string> mine;
  for (std::size_t g = static_cast<std::size_t>(slot); g < gpus.size(); g += static_cast<std::size_t>(slots)) mine.push_back(gpus[g]);
  if (!gpus.empty() && mine.empty()) mine.push_back(gpus[static_cast<std::size_t>(slot) % gpus.size()]);
  return mine;
}

}  // namespace

WorkerReport run_worker(const WorkerOptions& options) {
  WorkerReport report;
  WorkerLog log(*options.log);
  const std::atomic<bool>* stop = options.stop;
  WorkerShared shared{options, log, [stop] { return g_signalled || (stop && *stop); }, report, {}};
  HeartbeatWatch watch;
  {
    Ledger ledger(options.ledger);
    for (const auto& r : ledger.recover_dead_owners(&watch)) record_recovered(r, shared);
    if (options.executor == "slurm") cancel_orphaned_slurm_jobs(ledger, options.ledger, log);
  }
  if (options.gpus.empty()) log.print(fmt::format("worker: {} CPU slot(s)\n", options.slots));
  else log.print(fmt::format("worker: {} slot(s) over GPU(s) {}\n", options.slots, fmt::join(options.gpus, ",")));
  if (options.stop_on_signals) {
    std::signal(SIGTERM, [](int) { g_signalled = true; });
    std::signal(SIGINT, [](int) { g_signalled = true; });
  }
  std::atomic<bool> reaper_done{false};
  std::thread reaper([&] { reap(watch, reaper_done, shared); });
  std::vector<std::thread> threads;
  for (int slot = 0; slot < options.slots; ++slot) {
    threads.emplace_back([&shared, slot, mine = slot_gpus(slot, options.slots, options.gpus)] { run_worker_slot(slot, mine, shared); });
  }
  for (auto& t : threads) t.join();
  reaper_done = true;
  reaper.join();
  report.end = shared.stopping() ? WorkerEnd::stopped : WorkerEnd::queue_empty;
  return report;
}

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

void require_gate_profile(const GateStore& store, const std::string& profile) {
  for (const auto& name : list_gates(store)) {
    try {
      load_gate(store, name).profile_cases(profile);
      return;
    } catch (const std::exception&) {
    }
  }
  throw InputError("command line", {}, "--profile", fmt::format("no gate in {} has a profile named '{}'", store.describe(), profile));
}

}  // namespace densefeed
