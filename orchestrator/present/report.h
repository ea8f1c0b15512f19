// What `densefeed run` prints: an attributable verdict for people (text) and
// the same content as one JSON document for agents (--json).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "experiment_runner.h"
#include "ledger.h"

namespace densefeed {

std::string render_text_report(const ExperimentOutcome& outcome);

// The `next` list (next_steps_json) as indented lines for people ('' when empty).
std::string render_next_steps_text(const nlohmann::ordered_json& next);

// One comparison (an output of a case, or `densefeed compare`), for people and as JSON.
std::string render_comparison_text(const Comparison& comparison);
nlohmann::ordered_json comparison_json(const Comparison& comparison);

// `densefeed gate show`: what a gate runs, accepts, checks and freezes,
// whether it matches the lock, and (from the ledger's latest run of the gate)
// the cases that a simple wrong candidate would pass; `blind_spots` null
// when no ledger could be read (`blind_spots_note` says why).
nlohmann::ordered_json gate_json(const GateSpec& gate, const std::vector<std::string>& lock_problems,
                                 const BlindSpots* blind_spots = nullptr, const std::string& blind_spots_note = "");
std::string render_gate_text(const nlohmann::ordered_json& gate_doc);

// Keys: experiment_id, experiment, gate, profile, seed, verdict, stages
// {gate: {verdict, reason, lock_problems, cases[...], trend_tables[...]},
// bench: {status, reason, cases[...]}}, ledger, work_dir, next (next_steps.h).
nlohmann::ordered_json report_json(const ExperimentOutcome& outcome, const std::string& ledger_path);

}  // namespace densefeed
