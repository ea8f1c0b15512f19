// review approve|reject: a person's decision on an experiment's risk
// categories, recorded per category.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace densefeed {

class Ledger;

// Records `decision` ("approve" | "reject") by `by` with `note` for each of
// `categories` of experiment `id` (empty: every category its manifest
// declares); returns {CATEGORY: latest decision} after. Throws InputError
// (ID) for an unknown experiment or one that declares no risk category.
nlohmann::ordered_json record_review_decisions(Ledger& ledger, std::int64_t id, const std::string& decision, const std::string& by,
                                               const std::string& note, std::vector<std::string> categories);

}  // namespace densefeed
