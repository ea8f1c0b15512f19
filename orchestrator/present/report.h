// What `densefeed run` prints: an attributable verdict for people (text) and
// the same content as one JSON document for agents (--json, report_json.h).
// Also includes the comparison printers (comparison_report.h) and
// `gate show`'s (gate_show.h), which the verbs that print a report use.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "comparison_report.h"
#include "experiment_runner.h"
#include "gate_show.h"
#include "ledger.h"
#include "report_json.h"

namespace densefeed {

// The experiment, its gate (lock, provenance, sandbox, sessions, caches,
// executor, a row per case output, what is not green), its benchmark and
// trace, `next`, and the verdict line; untrusted text on one line each.
// With `header` false, everything but the experiment's first lines (a
// terminal printed render_text_header as the run started).
std::string render_text_report(const ExperimentOutcome& outcome, bool header = true);

// The report's first lines: the experiment, gate, profile, seed, hypothesis
// and arms; known once the experiment is recorded (RunOptions::on_started).
std::string render_text_header(const ExperimentOutcome& outcome);

// The `next` list (next_steps_json) as indented lines for people ('' when empty).
std::string render_next_steps_text(const nlohmann::ordered_json& next);

}  // namespace densefeed
