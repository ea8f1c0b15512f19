#include "narrow_result.h"

namespace densefeed {

std::string to_string(NarrowLayer layer) {
  switch (layer) {
    case NarrowLayer::precision_of_partitioning: return "precision-of-partitioning";
    case NarrowLayer::precision: return "precision";
    case NarrowLayer::partitioned_algorithm: return "partitioned-algorithm";
    case NarrowLayer::commit: return "commit";
    case NarrowLayer::input_regime: return "input-regime";
    case NarrowLayer::nondeterminism: return "nondeterminism";
    case NarrowLayer::algorithm_or_inputs: return "algorithm-or-inputs";
    case NarrowLayer::undetermined: return "undetermined";
  }
  return "undetermined";
}

}  // namespace densefeed
