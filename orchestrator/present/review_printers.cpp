#include "review_printers.h"

#include <fmt/format.h>

#include "printable.h"

namespace densefeed {

void print_review_state(std::ostream& out, std::int64_t id, const nlohmann::ordered_json& categories, bool json) {
  if (json) {
    out << nlohmann::ordered_json{{"experiment_id", id}, {"categories", categories}}.dump(2) << "\n";
    return;
  }
  for (const auto& [k, v] : categories.items()) out << fmt::format("experiment {} {}: {}\n", id, k, v.get<std::string>());
}

void print_promotion_refused(std::ostream& out, std::int64_t id, const std::vector<std::string>& reasons, bool json) {
  if (json) {
    out << nlohmann::ordered_json{{"experiment_id", id}, {"promoted", false}, {"reasons", reasons}}.dump(2) << "\n";
    return;
  }
  out << fmt::format("experiment {} cannot be promoted:\n", id);
  for (const auto& b : reasons) out << "  - " << one_line(b) << "\n";
}

void print_promotion(std::ostream& out, std::int64_t id, const std::string& by, const AcceptanceRecord& record, bool json) {
  if (json) {
    nlohmann::ordered_json doc = {{"experiment_id", id}, {"promoted", true}, {"acceptance", record.verdict},
                                  {"reason", record.reason}, {"criteria", nlohmann::ordered_json::array()}};
    for (const auto& c : record.criteria) {
      doc["criteria"].push_back({{"criterion", c.criterion}, {"statistic", c.statistic},
                                 {"lhs", c.lhs ? nlohmann::ordered_json(*c.lhs) : nlohmann::ordered_json()},
                                 {"rhs", c.rhs ? nlohmann::ordered_json(*c.rhs) : nlohmann::ordered_json()}, {"passed", c.passed}});
    }
    out << doc.dump(2) << "\n";
    return;
  }
  out << fmt::format("experiment {} promoted by {}; acceptance: {}{}\n", id, one_line(by), record.verdict,
                     record.reason.empty() ? "" : " — " + one_line(record.reason));
  for (const auto& c : record.criteria) {
    out << fmt::format("  {:<6} {:<48} {}: {} vs {}\n", c.passed ? "pass" : "FAIL", one_line(c.criterion), one_line(c.statistic),
                       c.lhs ? fmt::format("{:.6g}", *c.lhs) : "?", c.rhs ? fmt::format("{:.6g}", *c.rhs) : "?");
  }
}

}  // namespace densefeed
