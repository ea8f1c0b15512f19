// What frames every report page (report_html.h's, the compare page's): the
// facts about the ledger it states, the page as written, and the links a
// report folder gives it to its other pages and to the harness logs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ledger.h"

namespace densefeed {

// What every page states about the ledger it was made from.
struct LedgerFacts {
  std::string ledger_file;
  ChainCheck chain;        // Ledger::verify(); chain.head is the head hash when ok
  std::string written_at;  // ISO 8601 UTC
};

struct ReportPage {
  std::string kind;   // experiment | gate | ledger
  std::string title;
  std::string html;
  int charts = 0;
  std::vector<std::string> notices;  // what the page says instead of a figure (queued, red without bench, ...)
};

// A harness process's log as the report folder holds a copy of it (the run
// folder LEDGER-runs/ID/PROCESS/STREAM.log; runs are not part of the ledger
// file, so a report that is handed over carries its own copy).
struct HarnessLog {
  std::string process;  // the run folder's subfolder: candidate-003, reference-000, session-candidate-0-1, ...
  std::string stream;   // stdout | stderr
  std::string href;     // relative to the pages (logs/ID/PROCESS/STREAM.log)
  std::uintmax_t bytes = 0;  // of the copy
  std::uintmax_t original_bytes = 0;
  bool truncated = false;    // only the last kLogCopyBytes were copied
};
// At most this much of each log's end is copied into a report folder (bytes).
inline constexpr std::uintmax_t kLogCopyBytes = 256 * 1024;

// Where a report folder's other pages are, relative to each page (one
// folder); a key that is absent was not written and is not linked.
struct ReportLinks {
  std::string index;                                 // index.html ('' = a single page: no links)
  std::map<std::int64_t, std::string> experiments;  // id -> experiment-ID.html
  std::map<std::string, std::string> gates;          // gate -> gate-NAME.html
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> compares;  // (a, b) -> compare-A-B.html
  std::map<std::int64_t, std::vector<HarnessLog>> logs;                   // id -> its copied logs
};

// Text on one line (printable.h's one_line(): control characters, bidi
// marks and bytes that are not UTF-8 escaped, a line feed as "\n"), then
// &, <, >, " and ' as entities: what a manifest or a harness wrote reads on
// the page as it does in `ledger show`.
std::string html_escape(const std::string& text);

}  // namespace densefeed
