// What `densefeed run --json` prints: the record's document
// (experiment_document.h) with the run's own view added.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "experiment_runner.h"

namespace densefeed {

// Keys: experiment_id, experiment, gate, profile, seed, verdict, stages
// {gate: {verdict, reason, lock_problems, cases[...], trend_tables[...]},
// bench: {status, reason, cases[...]}}, ledger, work_dir, next (next_steps.h).
nlohmann::ordered_json report_json(const ExperimentOutcome& outcome, const std::string& ledger_path);

}  // namespace densefeed
