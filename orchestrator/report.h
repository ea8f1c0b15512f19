// What `densefeed run` prints: an attributable verdict for people (text) and
// the same content as one JSON document for agents (--json).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "experiment_runner.h"

namespace densefeed {

std::string render_text_report(const ExperimentOutcome& outcome);

// Keys: experiment_id, experiment, gate, profile, seed, verdict, stages
// {gate: {verdict, reason, lock_problems, cases[...], trend_tables[...]},
// bench: {status, reason, cases[...]}}, ledger, work_dir.
nlohmann::ordered_json report_json(const ExperimentOutcome& outcome, const std::string& ledger_path);

}  // namespace densefeed
