#include "report_parts.h"

#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "printable.h"

namespace densefeed::report_parts {

std::string printable(const std::string& text) { return one_line(text); }

std::string sci(double v) { return std::isnan(v) ? "nan" : fmt::format("{:.2e}", v); }

nlohmann::ordered_json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
}

std::string worst_text(const Comparison& c) {
  if (c.worst_index.empty()) return "";
  return fmt::format("worst element [{}]: candidate {:.6g}, reference {:.6g}", fmt::join(c.worst_index, ","),
                     c.worst_candidate, c.worst_reference);
}

nlohmann::ordered_json caches_json(const ExperimentOutcome& o) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  std::set<std::string> seen;
  for (const auto& [arm, ctx] : {std::pair{"reference", &o.reference_arm}, std::pair{"candidate", &o.candidate_arm},
                                 std::pair{"base", &o.base_arm}}) {
    if (ctx->cache_dir.empty() || !seen.insert(ctx->cache_dir.string()).second) continue;
    out.push_back({{"arm", arm}, {"path", ctx->cache_dir.string()}, {"bytes", folder_bytes(ctx->cache_dir)}});
  }
  return out;
}

}  // namespace densefeed::report_parts
