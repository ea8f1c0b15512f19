// `densefeed report --format md`: one experiment as GitHub-flavoured markdown,
// short enough for a pull-request comment or a CI step summary
// ($GITHUB_STEP_SUMMARY; GitHub caps a comment at 65536 characters, so long
// lists are cut and say how many were left out). A pure function of the typed
// record (experiment_record.h) and its next steps, as every other printer.
#pragma once

#include <string>
#include <vector>

#include "experiment_record.h"
#include "next_steps.h"

namespace densefeed {

// At most this many red cases are listed (the rest are counted).
inline constexpr std::size_t kMarkdownRedCases = 20;

// In order: the verdict line (a heading), a provenance WARNING (a GitHub
// alert block) when the checkout or gate store was not clean, the gate table
// (counts; each red case's failing metrics, error against tolerance), the
// bench table (base and candidate median in the case's unit, speedup, its
// interval at its confidence, verdict), the next steps with their commands,
// and the environment on one line. Untrusted text (names, reasons, case
// labels) is on one line with markdown and HTML characters escaped.
std::string experiment_markdown(const ExperimentRecord& record, const std::vector<NextStep>& next);

// Text for markdown: one line (printable.h one_line), then \ ` * _ [ ] < > | # ~ escaped, so
// that it renders as written and cannot open a link, an HTML tag or a table cell.
std::string markdown_escape(const std::string& text);

}  // namespace densefeed
