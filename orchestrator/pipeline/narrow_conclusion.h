// The conclusion of densefeed narrow (narrow.h) from the records alone: the
// red experiment, the gate's structure and the steps' experiments. The gate
// structure comes first (partitioned against unpartitioned cases, the
// precision swap), then a commit, then an input key; numeric coincidence
// never names a layer.
#pragma once

#include <deque>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "experiment_record.h"
#include "narrow_result.h"

namespace densefeed {

struct GateSpec;

// One step as it ran: its kind (rerun | precision | bisect-commit |
// bisect-key), its experiment's record, the params and revision it set.
struct NarrowEvidence {
  std::string kind;
  ExperimentRecord record;
  nlohmann::ordered_json params = nlohmann::ordered_json::object();
  std::string revision;
  NarrowStep step;
};

// Fills result.layer, conclusion, commit_sha/subject (read from the git
// repository at `repo`), rerun_red/of and each evidence's step.shows.
// `out_of_budget`: the budget ended the narrowing; a layer a step not run
// could still have changed (anything but nondeterminism, precision and a
// commit) is then `undetermined`, saying what it was so far. Never throws
// for what the records hold.
void conclude_narrowing(const ExperimentRecord& parent, const GateSpec& gate, std::deque<NarrowEvidence>& evidence,
                        NarrowResult& result, const std::filesystem::path& repo, bool out_of_budget);

}  // namespace densefeed
