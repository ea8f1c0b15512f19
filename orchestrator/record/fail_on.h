// --fail-on (run, audit): the bench verdicts that make an experiment whose
// gate is green fail CI all the same, as pytest-benchmark's
// --benchmark-compare-fail fails a run that got slower. A green gate with a
// slower bench is not red (the candidate is correct), so without it CI
// passes a regression.
#pragma once

#include <string>
#include <vector>

#include "experiment_record.h"

namespace densefeed {

enum class FailOn {
  slower,        // a bench case's verdict is slower
  inconclusive,  // a bench case's verdict is inconclusive (noise too large to tell)
};

const char* to_string(FailOn f);

// The words of --fail-on (slower, inconclusive; a word may list several,
// comma-separated), duplicates dropped. Throws InputError naming --fail-on
// for any other word.
std::vector<FailOn> parse_fail_on(const std::vector<std::string>& words);

// What in `r` meets `fail_on`: one line per bench case of a green-gated
// experiment whose verdict is listed, e.g. "experiment 3: bench case T=4096
// is slower (speedup 0.812x [0.790, 0.834])". Empty: nothing (also for a
// gate that is not green: its exit code says so already).
std::vector<std::string> fail_on_findings(const ExperimentRecord& r, const std::vector<FailOn>& fail_on);

}  // namespace densefeed
