#include "help_text.h"

#include <fmt/format.h>

namespace densefeed {

const std::vector<HelpExample>& help_examples() {
  static const std::vector<HelpExample> examples = {
      {"densefeed init", "make the current git repository a project: densefeed.yaml, a sample gate, harnesses and experiments"},
      {"densefeed run experiments/scan-merge-float32.yaml", "gate the experiment's candidate, then (green only) benchmark it against its base"},
      {"densefeed submit experiments/scan-merge-float32.yaml --json", "queue it for a worker; prints its id at once"},
      {"densefeed status 7 --wait", "wait for experiment 7 and print its verdict"},
      {"densefeed ledger list --verdict red", "the red experiments of the project's ledger"},
      {"densefeed report 7 -o report.html", "one HTML page of experiment 7 (charts and tables, viewable offline)"},
      {"densefeed narrow 7 --budget 10m", "rerun, swap precision and bisect until the layer that makes 7 red is named"},
      {"densefeed help ledger list", "the help of one verb"},
  };
  return examples;
}

const std::vector<std::pair<std::string, std::string>>& help_exit_codes() {
  static const std::vector<std::pair<std::string, std::string>> codes = {
      {"0", "green (or the verb did what it was asked)"},
      {"1", "red: the candidate is wrong, crashed, timed out or wrote no output"},
      {"2", "bad input: an unknown command or option, a bad manifest, gate or densefeed.yaml (nothing is written to the ledger)"},
      {"3", "infrastructure error, or an `error` verdict (the reference failed)"},
      {"4", "densefeed status: the experiment has not ended"},
      {"5", "run --fail-on: the gate is green but a bench case's verdict is one --fail-on names (slower, inconclusive)"},
  };
  return codes;
}

std::string help_description() {
  return "densefeed answers an experiment (a YAML manifest stating a hypothesis about a kernel change) with feedback in a "
         "fixed order: the frozen correctness gate first (the candidate against a trusted reference, within frozen "
         "tolerances), then, only when the gate is green, a benchmark of the candidate against its base, a trace check "
         "and an append-only SQLite ledger that engineers review. It runs inside a git repository holding a "
         "densefeed.yaml (see densefeed init).";
}

std::string help_footer() {
  std::string text = "EXAMPLES:\n";
  for (const auto& e : help_examples()) text += fmt::format("  {}\n      {}\n", e.command, e.what);
  text += "\nEXIT STATUS:";
  for (const auto& [code, what] : help_exit_codes()) text += fmt::format("\n  {}  {}", code, what);
  text += "\n\n`densefeed help VERB` prints a verb's help; man densefeed; the guides are in share/doc/densefeed/.";
  return text;
}

}  // namespace densefeed
