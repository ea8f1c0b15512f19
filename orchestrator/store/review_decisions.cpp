#include "review_decisions.h"

#include <fmt/format.h>

#include "error.h"
#include "ledger.h"

namespace densefeed {

nlohmann::ordered_json record_review_decisions(Ledger& ledger, std::int64_t id, const std::string& decision, const std::string& by,
                                               const std::string& note, std::vector<std::string> categories) {
  const auto state = ledger.review_state(id);
  if (categories.empty()) {
    for (const auto& [k, v] : state["categories"].items()) categories.push_back(k);
  }
  if (categories.empty()) {
    ledger.show(id);  // no such experiment: InputError
    throw InputError("command line", {}, "ID", fmt::format("experiment {} declares no risk category, so there is nothing to review", id));
  }
  for (const auto& c : categories) ledger.record_review(id, c, decision, by, note);
  return ledger.review_state(id)["categories"];
}

}  // namespace densefeed
