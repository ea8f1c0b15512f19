#include "comparison_report.h"

#include <fmt/format.h>

#include "report_parts.h"

namespace densefeed {

using report_parts::number_or_null;
using report_parts::printable;
using report_parts::sci;
using report_parts::worst_text;

nlohmann::ordered_json comparison_json(const Comparison& c) {
  using J = nlohmann::ordered_json;
  J checks = J::array();
  for (const auto& chk : c.checks) {
    checks.push_back({{"metric", chk.metric},
                      {"value", number_or_null(chk.value)},
                      {"bound", chk.bound},
                      {"passed", chk.passed},
                      {"violations", chk.violations}});
  }
  J slices = J::array();
  for (const auto& sl : c.slices) {
    slices.push_back({{"index", sl.index}, {"begin", sl.begin}, {"end", sl.end}, {"rel_l2", number_or_null(sl.rel_l2)},
                      {"max_abs", number_or_null(sl.max_abs)}, {"violations", sl.violations}, {"passed", sl.passed}});
  }
  return {{"verdict", to_string(c.verdict)},
          {"reason", c.reason},
          {"metrics", checks},
          {"elements", c.elements},
          {"reference_max_abs", number_or_null(c.reference_max_abs)},
          {"judged_relative", c.judged_relative},
          {"note", c.note},
          {"worst_index", c.worst_index},
          {"worst_candidate", number_or_null(c.worst_candidate)},
          {"worst_reference", number_or_null(c.worst_reference)},
          {"candidate_nonfinite", c.candidate_nonfinite},
          {"reference_nonfinite", c.reference_nonfinite},
          {"first_failing_slice", c.first_failing_slice ? J(*c.first_failing_slice) : J(nullptr)},
          {"slices", slices}};
}

std::string render_comparison_text(const Comparison& c) {
  std::string s = fmt::format("{}{}\n", to_string(c.verdict), c.reason.empty() ? "" : " — " + c.reason);
  for (const auto& m : c.checks) {
    s += fmt::format("  {:<12} {:>10} bound {:.1e}  {}{}\n", m.metric, sci(m.value), m.bound, m.passed ? "ok" : "OVER",
                     m.violations ? fmt::format(" ({} of {} element(s) beyond)", m.violations, c.elements) : "");
  }
  if (!c.worst_index.empty()) s += "  " + worst_text(c) + "\n";
  if (!c.note.empty()) s += "  " + printable(c.note) + "\n";
  return s;
}

}  // namespace densefeed
