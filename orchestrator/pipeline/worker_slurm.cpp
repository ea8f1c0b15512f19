#include "worker_slurm.h"

#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "error.h"
#include "ledger.h"
#include "slurm_executor.h"
#include "worker_log.h"

namespace densefeed {

void cancel_experiment_slurm_jobs(const std::filesystem::path& ledger_path, std::int64_t id, const char* why, WorkerLog& log) {
  try {
    for (const auto& j : slurm_cancel_prefix(slurm_experiment_prefix(ledger_path, id))) {
      log.print(fmt::format("experiment {}: cancelled its Slurm job {} ({}, {}): {}\n", id, j.id, j.name, j.state, why));
    }
  } catch (const InfraError& e) {
    log.print(fmt::format("experiment {}: its Slurm jobs could not be cancelled: {}\n", id, e.what()));
  }
}

void cancel_orphaned_slurm_jobs(const Ledger& ledger, const std::filesystem::path& ledger_path, WorkerLog& log) {
  std::set<std::int64_t> ids;
  const auto prefix = slurm_ledger_prefix(ledger_path);
  for (const auto& j : slurm_jobs_with_prefix(prefix)) {
    const auto rest = j.name.substr(prefix.size());
    if (rest.size() > 1 && rest[0] == 'e') ids.insert(std::atoll(rest.c_str() + 1));
  }
  for (const auto id : ids) {
    if (const auto s = ledger.state(id); s != ExperimentState::started && s != ExperimentState::cancel_requested) {
      cancel_experiment_slurm_jobs(ledger_path, id, "no process runs its experiment", log);
    }
  }
}

}  // namespace densefeed
