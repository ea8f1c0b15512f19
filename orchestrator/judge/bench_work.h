// The declared work of a bench case (gate file: bench.work.bytes / .flops):
// an arithmetic expression over the case's numeric keys, evaluated with
// muparser (Debian libmuparser-dev; syntax: + - * / ^, parentheses, the
// usual functions such as min, max, sqrt).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace densefeed {

// The value of `expression` with every numeric key of `case_values` (a JSON
// object: key -> number) defined as a variable. Returns a finite number > 0
// (bytes or operations). Throws std::invalid_argument naming the position and
// token of a syntax error, an unknown name, or a result that is not a finite
// positive number.
double evaluate_work(const std::string& expression, const nlohmann::ordered_json& case_values);

}  // namespace densefeed
