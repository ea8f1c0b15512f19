// submit: validated manifests recorded as queued in the ledger, for workers
// (worker.h) to run in submission order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace densefeed {

struct RunOptions;

struct QueuedExperiment {
  std::int64_t id = 0;
  std::string name;      // the manifest's experiment name
  std::string manifest;  // its path as given
};

struct Submission {
  std::vector<QueuedExperiment> queued;  // in the order given
  std::filesystem::path ledger;
};

// Loads and prepares every manifest before the ledger is opened (one bad
// manifest and nothing is queued: InputError naming it), then records each
// as queued by `owner` (the queued event's owner: "submit", or through a
// densefeed service "submit by LOGIN (uid N)", the peer the kernel named),
// calling `on_queued` as each is recorded (so that what was queued before a
// failing write is told). Throws InputError / InfraError as load_manifest,
// prepare_experiment and the ledger do.
Submission submit_experiments(const std::vector<std::string>& manifests, const RunOptions& options,
                              const std::function<void(const QueuedExperiment&)>& on_queued = {}, const std::string& owner = "submit");

}  // namespace densefeed
