#include "case_grid.h"

#include <algorithm>

namespace densefeed {
namespace {

bool same_scalar(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

Case make_case(const nlohmann::ordered_json& defaults, const nlohmann::ordered_json& chosen) {
  Case c;
  std::string label;
  for (const auto& [k, v] : chosen.items()) {
    c.values[k] = v;
    label += (label.empty() ? "" : " ") + k + "=" + scalar_text(v);
  }
  for (const auto& [k, v] : defaults.items()) {
    if (!c.values.contains(k)) c.values[k] = v;
  }
  c.label = label;
  return c;
}

void product(const nlohmann::ordered_json& axes, std::size_t axis, nlohmann::ordered_json& chosen,
             const nlohmann::ordered_json& defaults, std::vector<Case>& out) {
  if (axis == axes.size()) {
    out.push_back(make_case(defaults, chosen));
    return;
  }
  auto it = axes.begin();
  std::advance(it, static_cast<long>(axis));
  const auto& values = it.value();
  if (values.is_array()) {
    for (const auto& v : values) {
      chosen[it.key()] = v;
      product(axes, axis + 1, chosen, defaults, out);
    }
  } else {
    chosen[it.key()] = values;
    product(axes, axis + 1, chosen, defaults, out);
  }
  chosen.erase(it.key());
}

}  // namespace

std::string scalar_text(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

bool case_matches(const Case& c, const nlohmann::ordered_json& partial) {
  for (const auto& [k, v] : partial.items()) {
    if (!c.values.contains(k) || !same_scalar(c.values[k], v)) return false;
  }
  return true;
}

std::vector<Case> expand_cases(const nlohmann::ordered_json& defaults, const nlohmann::ordered_json& grid,
                               const nlohmann::ordered_json& extra) {
  std::vector<Case> all;
  for (const auto& axes : grid) {
    nlohmann::ordered_json chosen = nlohmann::ordered_json::object();
    product(axes, 0, chosen, defaults, all);
  }
  for (const auto& e : extra) all.push_back(make_case(defaults, e));
  std::vector<Case> unique;
  for (auto& c : all) {
    bool dup = std::any_of(unique.begin(), unique.end(),
                           [&](const Case& u) { return case_matches(u, c.values) && case_matches(c, u.values); });
    if (!dup) unique.push_back(std::move(c));
  }
  return unique;
}

std::vector<Case> select_cases(const std::vector<Case>& all, const ProfileFilter& filter) {
  std::vector<Case> out;
  for (const auto& c : all) {
    bool keep = true;
    for (const auto& [key, allowed] : filter) {
      if (!c.values.contains(key)) {
        keep = false;
        break;
      }
      keep = std::any_of(allowed.begin(), allowed.end(),
                         [&](const nlohmann::ordered_json& a) { return same_scalar(a, c.values[key]); });
      if (!keep) break;
    }
    if (keep) out.push_back(c);
  }
  return out;
}

}  // namespace densefeed
