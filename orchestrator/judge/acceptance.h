// Pre-registered acceptance criteria (the manifest's `acceptance.criteria`)
// and their evaluation against an acceptance run's metrics.json.
//
// Grammar of one criterion (whitespace free):
//   criterion := term OP rhs          OP: <= < >= >
//   rhs       := NUMBER | term | NUMBER '*' term
//   term      := NAME | STAT '(' NAME ')'
//   STAT      := median mean min max p10 p50 p90 p95 p99
// NAME is a key of metrics.json ([A-Za-z_][A-Za-z0-9_.-]*). A metric given as
// samples is reduced with the term's STAT, else with the section's default
// statistic (median); a metric given as one number is that number.
// Quantiles interpolate linearly between order statistics (numpy's default,
// statistics.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace densefeed {

struct Term {
  std::string metric;
  std::string statistic;  // '' = the default
};

struct Criterion {
  std::string text;           // as written
  Term lhs;
  std::string op;             // <= < >= >
  double factor = 1;          // rhs = factor * term, or the constant when rhs_term is absent
  std::optional<Term> rhs_term;
};

// Parses one criterion. Throws std::invalid_argument naming the position and
// what was expected.
Criterion parse_criterion(const std::string& text);

struct CriterionResult {
  std::string text;
  std::string statistic;  // as applied to the left side
  std::optional<double> lhs, rhs;  // absent when the metric is missing or not a number
  bool passed = false;
  std::string problem;    // why it could not be evaluated ('' when evaluated)
};

// Evaluates each criterion against metrics ({NAME: number | [numbers]}).
// A missing or malformed metric fails its criterion with a problem saying so.
std::vector<CriterionResult> evaluate_criteria(const std::vector<Criterion>& criteria, const nlohmann::json& metrics,
                                               const std::string& default_statistic);

}  // namespace densefeed
