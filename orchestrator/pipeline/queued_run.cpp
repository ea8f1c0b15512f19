#include "queued_run.h"

#include "error.h"
#include "ledger.h"

namespace densefeed {

ExperimentOutcome run_queued_experiment(std::int64_t id, const RunOptions& options) {
  Ledger ledger(options.workspace.ledger);
  const auto e = ledger.show(id);
  ExperimentOutcome out;
  try {
    out = prepare_experiment(parse_manifest(e["manifest_text"].get<std::string>(), e["manifest_path"].get<std::string>(), options.store,
                                            options.project),
                             options);
  } catch (const InputError& err) {
    ledger.record_event(id, ExperimentEvent::rejected, "worker", err.what());
    throw;
  }
  out.experiment_id = id;
  execute_experiment(out, ledger, options);
  ledger.record_finished(id, "worker");
  return out;
}

}  // namespace densefeed
