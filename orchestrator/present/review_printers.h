// How review and promote print what was recorded: text for people, or one
// JSON document with --json.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ledger.h"

namespace densefeed {

// {experiment_id, categories: {CATEGORY: decision}}, or one line per category.
void print_review_state(std::ostream& out, std::int64_t id, const nlohmann::ordered_json& categories, bool json);
// {experiment_id, promoted: false, reasons}, or the reasons as a list.
void print_promotion_refused(std::ostream& out, std::int64_t id, const std::vector<std::string>& reasons, bool json);
// {experiment_id, promoted: true, acceptance, reason, criteria: [{criterion,
// statistic, lhs, rhs, passed}]}, or a line and one per criterion.
void print_promotion(std::ostream& out, std::int64_t id, const std::string& by, const AcceptanceRecord& record, bool json);

}  // namespace densefeed
