#include "cancellation.h"

#include "ledger.h"
#include "slurm_executor.h"

namespace densefeed {

Cancellation cancel_experiment(const std::filesystem::path& ledger_path, std::int64_t id) {
  Ledger ledger(ledger_path);
  Cancellation c;
  c.id = id;
  c.state = ledger.cancel(id);
  if (c.state == ExperimentState::cancel_requested && slurm_available()) {
    for (const auto& j : slurm_cancel_prefix(slurm_experiment_prefix(ledger_path, id))) c.slurm_jobs_cancelled.push_back(j.id);
  }
  return c;
}

}  // namespace densefeed
