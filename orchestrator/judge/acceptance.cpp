#include "acceptance.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "statistics.h"

namespace densefeed {
namespace {

constexpr const char* kStatistics[] = {"median", "mean", "min", "max", "p10", "p50", "p90", "p95", "p99"};

bool is_statistic(const std::string& s) {
  for (const char* k : kStatistics) {
    if (s == k) return true;
  }
  return false;
}

class Parser {
 public:
  explicit Parser(const std::string& text) : t_(text) {}

  Criterion criterion() {
    Criterion c;
    c.text = t_;
    c.lhs = term();
    c.op = op();
    skip();
    if (at_number_start()) {
      c.factor = number();
      skip();
      if (i_ < t_.size() && t_[i_] == '*') {
        ++i_;
        c.rhs_term = term();
      }
    } else {
      c.rhs_term = term();
    }
    skip();
    if (i_ != t_.size()) fail("the end of the criterion");
    return c;
  }

 private:
  [[noreturn]] void fail(const std::string& expected) const {
    throw std::invalid_argument(fmt::format("'{}': at character {}: expected {}", t_, i_ + 1, expected));
  }
  void skip() {
    while (i_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[i_]))) ++i_;
  }
  bool at_number_start() const {
    return i_ < t_.size() && (std::isdigit(static_cast<unsigned char>(t_[i_])) || t_[i_] == '.' || t_[i_] == '-' || t_[i_] == '+');
  }
  std::string name() {
    skip();
    const std::size_t start = i_;
    if (i_ < t_.size() && (std::isalpha(static_cast<unsigned char>(t_[i_])) || t_[i_] == '_')) {
      ++i_;
      while (i_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[i_])) || t_[i_] == '_' || t_[i_] == '.' || t_[i_] == '-')) ++i_;
    }
    if (i_ == start) fail("a metric name");
    return t_.substr(start, i_ - start);
  }
  Term term() {
    std::string n = name();
    skip();
    if (i_ < t_.size() && t_[i_] == '(') {
      if (!is_statistic(n)) fail("a statistic (median, mean, min, max, p10, p50, p90, p95, p99) before '('");
      ++i_;
      Term t{name(), n};
      skip();
      if (i_ >= t_.size() || t_[i_] != ')') fail("')'");
      ++i_;
      return t;
    }
    return {n, ""};
  }
  std::string op() {
    skip();
    for (const char* o : {"<=", ">=", "<", ">"}) {
      if (t_.compare(i_, std::string(o).size(), o) == 0) {
        i_ += std::string(o).size();
        return o;
      }
    }
    fail("a comparison (<=, <, >=, >)");
  }
  double number() {
    const char* begin = t_.c_str() + i_;
    char* end = nullptr;
    const double v = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(v)) fail("a finite number");
    i_ += static_cast<std::size_t>(end - begin);
    return v;
  }

  const std::string& t_;
  std::size_t i_ = 0;
};

// The term's value and the statistic applied, or a problem.
std::optional<double> value_of(const Term& t, const nlohmann::json& metrics, const std::string& default_statistic,
                               std::string& statistic, std::string& problem) {
  statistic = t.statistic.empty() ? default_statistic : t.statistic;
  if (!metrics.is_object() || !metrics.contains(t.metric)) {
    problem = fmt::format("metrics.json has no metric '{}'", t.metric);
    return std::nullopt;
  }
  const auto& v = metrics[t.metric];
  if (v.is_number()) {
    statistic = "value";
    return v.get<double>();
  }
  if (!v.is_array() || v.empty()) {
    problem = fmt::format("metric '{}' is neither a number nor a non-empty list of numbers", t.metric);
    return std::nullopt;
  }
  std::vector<double> samples;
  for (const auto& x : v) {
    if (!x.is_number()) {
      problem = fmt::format("metric '{}' holds a non-number sample", t.metric);
      return std::nullopt;
    }
    samples.push_back(x.get<double>());
  }
  if (statistic == "mean") {
    double sum = 0;
    for (double x : samples) sum += x;
    return sum / static_cast<double>(samples.size());
  }
  if (statistic == "min") return quantile(samples, 0);
  if (statistic == "max") return quantile(samples, 1);
  if (statistic == "median") return median(samples);
  return quantile(samples, std::stod(statistic.substr(1)) / 100.0);  // pNN
}

}  // namespace

Criterion parse_criterion(const std::string& text) { return Parser(text).criterion(); }

std::vector<CriterionResult> evaluate_criteria(const std::vector<Criterion>& criteria, const nlohmann::json& metrics,
                                               const std::string& default_statistic) {
  std::vector<CriterionResult> out;
  for (const auto& c : criteria) {
    CriterionResult r;
    r.text = c.text;
    r.lhs = value_of(c.lhs, metrics, default_statistic, r.statistic, r.problem);
    if (c.rhs_term) {
      std::string rhs_statistic;
      const auto t = value_of(*c.rhs_term, metrics, default_statistic, rhs_statistic, r.problem);
      if (t) r.rhs = c.factor * *t;
    } else {
      r.rhs = c.factor;
    }
    if (r.lhs && r.rhs && r.problem.empty()) {
      const double a = *r.lhs, b = *r.rhs;
      r.passed = c.op == "<=" ? a <= b : c.op == "<" ? a < b : c.op == ">=" ? a >= b : a > b;
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace densefeed
