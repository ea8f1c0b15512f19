#include "bench_work.h"

#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <muParser.h>

namespace densefeed {

double evaluate_work(const std::string& expression, const nlohmann::ordered_json& case_values) {
  mu::Parser parser;
  std::map<std::string, double> values;  // stable addresses for DefineVar
  try {
    for (const auto& [key, v] : case_values.items()) {
      if (!v.is_number()) continue;
      values[key] = v.get<double>();
      parser.DefineVar(key, &values[key]);
    }
    parser.SetExpr(expression);
    const double w = parser.Eval();
    if (!std::isfinite(w) || w <= 0) {
      throw std::invalid_argument(fmt::format("'{}' is {}: the work must be a finite number > 0", expression, w));
    }
    return w;
  } catch (const mu::Parser::exception_type& e) {
    throw std::invalid_argument(fmt::format("'{}': {} (the case's numeric keys are its variables)", expression, e.GetMsg()));
  }
}

}  // namespace densefeed
