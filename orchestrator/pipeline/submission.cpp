#include "submission.h"

#include "experiment_runner.h"
#include "ledger.h"

namespace densefeed {

Submission submit_experiments(const std::vector<std::string>& manifests, const RunOptions& options,
                              const std::function<void(const QueuedExperiment&)>& on_queued, const std::string& owner) {
  std::vector<ExperimentOutcome> prepared;
  for (const auto& m : manifests) prepared.push_back(prepare_experiment(load_manifest(m, options.store, options.project), options));
  Submission s;
  s.ledger = options.workspace.ledger;
  Ledger ledger(options.workspace.ledger);
  for (auto& p : prepared) {
    const auto id = record_prepared(ledger, p, ExperimentEvent::queued, owner);
    s.queued.push_back({id, p.manifest.name, p.manifest.doc.path});
    if (on_queued) on_queued(s.queued.back());
  }
  return s;
}

}  // namespace densefeed
