// ledger compare: two experiments side by side, only what differs.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace densefeed {

class Ledger;

struct ExperimentComparison {
  std::int64_t a = 0, b = 0;
  // [{field, a, b, delta?, ratio?}] in field order: "experiment.*", "gate.*",
  // "gate.cases.LABEL.OUTPUT.METRIC", "bench.LABEL.*", "trace.ARM[I].*",
  // "acceptance.*" flattened with "."; delta = b - a and ratio = b / a
  // (a != 0) where both are numbers.
  nlohmann::ordered_json differences = nlohmann::ordered_json::array();
};

// Compares what experiments `a` and `b` recorded (Ledger::show). Throws
// InputError for an unknown id.
ExperimentComparison compare_experiments(const Ledger& ledger, std::int64_t a, std::int64_t b);

}  // namespace densefeed
