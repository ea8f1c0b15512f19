// The ledger's rows of one experiment as its typed record (experiment_record.h):
// the one place where a row's columns become values. Ledger::record(id) reads
// the rows (Ledger::show) and the summary (Ledger::summary) and calls this.
#pragma once

#include <nlohmann/json.hpp>

#include "experiment_record.h"

namespace densefeed {

// `rows` is Ledger::show(id): the experiments row with its gate_run (cases,
// metrics), bench_cases, trace_findings, events, categories, promotion and
// acceptance_runs. Missing keys and NULL columns give the defaults of the
// record's fields (NaN for a NULL double). `summary` is left with id, name,
// gate and state only: Ledger::record fills the rest from stage_outcomes.
// Never throws on a row of an older ledger version.
ExperimentRecord experiment_record_from_rows(const nlohmann::ordered_json& rows);

}  // namespace densefeed
