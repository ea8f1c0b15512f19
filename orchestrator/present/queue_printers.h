// How submit, status and cancel print what they did: text for people, or one
// JSON document with --json. Each is a function of the verb's result.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "cancellation.h"
#include "experiment_record.h"
#include "submission.h"

namespace densefeed {

// "experiment ID queued (NAME); follow it with: ..." as each is queued.
void print_queued_text(std::ostream& out, const QueuedExperiment& q);
// One manifest: one object {experiment_id, experiment, manifest, state,
// ledger}; several: {queued: [those objects without ledger], ledger}.
void print_submission_json(std::ostream& out, const Submission& s);

// status: `document` is the record's experiment_document (its "next" is
// printed after the record's lines); --json prints the document.
void print_status(std::ostream& out, const ExperimentRecord& e, const nlohmann::ordered_json& document, bool json);

// cancel: {experiment_id, state, slurm_jobs_cancelled}, or one line.
void print_cancellation(std::ostream& out, const Cancellation& c, bool json);

}  // namespace densefeed
