// Cases of a gate: a cartesian grid plus explicit extra cases, each completed
// by defaults, and profiles that select a subset of them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace densefeed {

// One point of a gate's grid, e.g. {regime: long-memory, T: 8192, shards: 2, H: 1, ...}.
// `values` keeps declaration order; `label` names only the keys the grid or
// the extra entry set ("regime=long-memory T=8192 shards=2"), which identify
// the case within its gate.
struct Case {
  nlohmann::ordered_json values;
  std::string label;
};

// A profile keeps the cases whose value of each named key is one of the listed
// values; an empty filter keeps every case.
using ProfileFilter = std::map<std::string, std::vector<nlohmann::ordered_json>>;

// Expands `grid` (a list of {key: [values...]} objects, each a cartesian
// product in key order) and `extra` (a list of {key: value} objects), filling
// keys from `defaults`. Duplicate cases are dropped, first one wins.
std::vector<Case> expand_cases(const nlohmann::ordered_json& defaults, const nlohmann::ordered_json& grid,
                               const nlohmann::ordered_json& extra);

// Cases of `all` kept by `filter`, in their order.
std::vector<Case> select_cases(const std::vector<Case>& all, const ProfileFilter& filter);

// True if every key of `partial` is in `c` with an equal value.
bool case_matches(const Case& c, const nlohmann::ordered_json& partial);

// Text form of a scalar case value: strings unquoted, numbers as JSON writes them.
std::string scalar_text(const nlohmann::ordered_json& v);

}  // namespace densefeed
