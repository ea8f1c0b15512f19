// `densefeed report`: one self-contained HTML page (every script and style
// inlined, no network when viewed) for an experiment, a gate's history or the
// whole ledger. Each page is a pure function of documents the ledger already
// gives (Ledger::show, Ledger::list, the gate_speedups and red_gates_by_reason
// views) plus ledger-wide facts; it never reads SQL itself. Charts are Vega
// specifications (vega_specs.h) rendered in the browser by Debian's
// libjs-vega (vega_bundle.h) with Vega's SVG renderer; every number a chart
// shows is also in a table on the page.
//
// When the scripts have run, the page's <body> carries
//   data-charts="N"           charts on the page,
//   data-charts-rendered="N"  charts Vega rendered,
//   data-chart-errors="..."   (only when one failed) what Vega reported,
// so a headless browser's dumped DOM tells whether the charts were drawn.
#pragma once

#include "gate_spec.h"
#include "next_steps.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiment_record.h"
#include "ledger.h"
#include "report_frame.h"

namespace densefeed {

// The case keys of the gate's error table (GateSpec::trend_rows/columns,
// e.g. T x shards); empty: the first two numeric case keys that vary.
struct ReportAxes {
  std::string rows, columns;
};


// The page of one experiment: a function of its record (Ledger::record),
// the gate's axes and its next steps (next_steps.h, the same `run`, `status`
// and MCP give), nothing else read from the ledger. The page lists the
// experiments that replay or narrow it and what densefeed narrow concluded.
// It states the gate run's provenance (a WARNING where the checkout or the
// gate store was not clean, as the text report does) and the environment
// the benchmark ran on, and links (`links`) the index, its gate, its parent
// and children, the compare pages it is part of and its harness logs.
ReportPage experiment_report(const ExperimentRecord& record, const LedgerFacts& facts, const ReportAxes& axes,
                             const std::string& vega_scripts, const std::vector<NextStep>& next = {}, const ReportLinks& links = {});

// The next steps of each experiment (next_steps.h), by id.
using NextStepsOf = std::map<std::int64_t, std::vector<NextStep>>;

// `experiments`: Ledger::list filtered by gate and since; `speedups`: the
// gate_speedups view's rows of that gate; `red_reasons`: red_gates_by_reason's
// rows; `records`: the same experiments' records (Ledger::record), in id
// order, for the error-headroom trend (value / bound per case, output and
// metric, per experiment: report_trends.h), the bench medians' trend, each
// experiment's provenance and the latest environment; `next`: the latest
// experiment's next steps are shown.
ReportPage gate_report(const std::string& gate, const std::string& since, const nlohmann::ordered_json& experiments,
                       const nlohmann::ordered_json& speedups, const nlohmann::ordered_json& red_reasons, const LedgerFacts& facts,
                       const std::string& vega_scripts, const std::vector<ExperimentRecord>& records = {}, const NextStepsOf& next = {},
                       const ReportLinks& links = {});

// `experiments`: Ledger::list (all); `records` as for gate_report (their
// provenance, environments and first next step per experiment, linked).
// As a report folder's index.html it links every page the folder holds.
ReportPage ledger_report(const nlohmann::ordered_json& experiments, const LedgerFacts& facts, const std::string& vega_scripts,
                         const std::vector<ExperimentRecord>& records = {}, const NextStepsOf& next = {}, const ReportLinks& links = {});

// `densefeed report`: which page, from which ledger, to which file.
struct ReportRequest {
  std::filesystem::path ledger;
  std::filesystem::path out;
  std::optional<std::int64_t> experiment_id;  // the experiment page
  std::string gate;                           // else the gate's page ('' = the whole ledger)
  std::string since;                          // gate and ledger pages: experiments submitted at or after (ISO 8601 prefix)
  std::filesystem::path vega_dir;             // libjs-vega's files (default_vega_dir())
  // The gate's report keys by gate name (from the gate store when there is
  // one); none given or none known: inferred from the cases.
  std::function<ReportAxes(const std::string& gate)> axes_for;
  // The gate as the store has it, for the experiment page's next steps
  // (its params, structure and candidate command); nullopt: not known here
  // (the steps are then the record's alone).
  std::function<std::optional<GateSpec>(const std::string& gate)> gate_for;
  // Two experiments side by side (report --compare A B): the compare page.
  std::optional<std::pair<std::int64_t, std::int64_t>> compare;
  // `out` is a folder: index.html (the ledger page), a page per gate, per
  // experiment and per compare (each experiment with the one before it on
  // its gate), and logs/ with each experiment's harness logs, linked.
  bool folder = false;
  // html (default) | md: a GitHub-flavoured markdown summary of one
  // experiment (experiment_id, or the latest) for a pull-request comment or
  // $GITHUB_STEP_SUMMARY (report_markdown.h); `out` '' = into ReportWritten::text.
  std::string format = "html";
};

struct ReportWritten {
  std::string kind;
  std::filesystem::path path;
  std::uintmax_t bytes = 0;
  int charts = 0;
  std::vector<std::string> notices;
  ChainCheck chain;
  std::vector<std::filesystem::path> pages;  // a folder's pages (absolute), index first
  int logs = 0;                              // harness logs copied into a folder
  std::string text;                          // format md with no `out`: the markdown
};

// Reads the ledger read-only, builds the page and writes it (to a temporary
// file renamed over `out`; a folder's pages each so). Throws InputError for
// a missing ledger or experiment, an empty ledger for md without an id, or
// a format other than html|md; InfraError when libjs-vega is missing or a
// file cannot be written.
ReportWritten write_report(const ReportRequest& request);
nlohmann::ordered_json report_written_json(const ReportWritten& written);

}  // namespace densefeed
