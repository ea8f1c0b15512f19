// What the text report, the JSON report, the comparison and `gate show`
// printers share: how untrusted text, a figure and a comparison's worst
// element are written. Internal to present/'s printers (report_*.cpp).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "experiment_runner.h"

namespace densefeed::report_parts {

// Untrusted text (a manifest's hypothesis, a harness's reason) on one line
// of a terminal: printable.h's one_line(), line breaks as "\n".
std::string printable(const std::string& text);

// A figure in scientific notation with 3 significant digits, "nan" for NaN.
std::string sci(double v);

// A finite number as itself; NaN and the infinities as the strings "nan",
// "inf", "-inf" (JSON has no such numbers).
nlohmann::ordered_json number_or_null(double v);

// "worst element [i,j]: candidate x, reference y" ('' without a worst element).
std::string worst_text(const Comparison& c);

// The compile caches the arms were given (arm_context.h), each once, with
// their size now: [{arm, path, bytes}].
nlohmann::ordered_json caches_json(const ExperimentOutcome& o);

}  // namespace densefeed::report_parts
