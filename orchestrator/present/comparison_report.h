// One comparison (an output of a case, or `densefeed compare`), for people
// and as JSON.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tensor_compare.h"

namespace densefeed {

// Text: the verdict and reason, a line per metric (value, bound, ok/OVER,
// elements beyond), the worst element and the note.
std::string render_comparison_text(const Comparison& comparison);

// Keys: verdict, reason, metrics[{metric, value, bound, passed, violations}],
// elements, reference_max_abs, judged_relative, note, worst_index,
// worst_candidate, worst_reference, candidate_nonfinite, reference_nonfinite,
// first_failing_slice, slices[...]; a non-finite figure as "nan"/"inf"/"-inf".
nlohmann::ordered_json comparison_json(const Comparison& comparison);

}  // namespace densefeed
