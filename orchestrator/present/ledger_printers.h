// How ledger list, show, compare and export print what they read: text for
// people, one JSON document with --json, CSV for a table. Every string a
// manifest or a harness wrote is printed as one line (printable.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiment_comparison.h"
#include "experiment_record.h"

namespace densefeed {

// One line per experiment of Ledger::list: id, name, gate, state, verdict,
// profile, submitted, then its bench speedups (or its reason).
void print_ledger_list(std::ostream& out, const nlohmann::ordered_json& rows);
// Everything recorded for one experiment (Ledger::record), stage by stage:
// the text of `ledger show`.
void print_ledger_show(std::ostream& out, const ExperimentRecord& e);
// ledger show --json: the rows as recorded, and beside them the keys of the
// verdict document (experiment_document.h) the rows lack: where the two share
// a key they say the same (OneRecord test).
void print_ledger_show_json(std::ostream& out, nlohmann::ordered_json rows, const nlohmann::ordered_json& document);
// A table of only what differs, with deltas (ratio as "(xR)"), or {a, b, differences}.
void print_comparison(std::ostream& out, const ExperimentComparison& c, bool json);
// RFC 4180 CSV (CRLF line ends): a header of `columns`, then each row's values.
void print_csv(std::ostream& out, const std::vector<std::string>& columns, const nlohmann::ordered_json& rows);

}  // namespace densefeed
