// The cases a run is narrowed to (run --case, issue 30): a filter names
// key=value pairs a case must all have, so that one red case of a gate can be
// replayed alone through the same gate, profile and seed.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "case_grid.h"

namespace densefeed {

// One --case: its text as given ("T=24576", or a whole label such as
// "regime=long-memory T=8192 shards=8": pairs apart by spaces; a part
// without '=' continues the value before it, as a value with a space does)
// and the pairs, key -> value text.
struct CaseFilter {
  std::string text;
  std::vector<std::pair<std::string, std::string>> pairs;
};

// Parses one --case. Throws InputError (file "--case", field the text) when
// it is empty, its first part is not KEY=VALUE, or a key is empty.
CaseFilter parse_case_filter(const std::string& text);

// Whether case `c` is the one `f` names by its whole label, or has every
// pair of `f`: the key present and its value's text (scalar_text) equal to
// the pair's, or both numbers that are equal ("1e-7" matches 1.0e-7).
bool case_filter_matches(const Case& c, const CaseFilter& f);

// The cases of `cases` that at least one of `filters` matches, in their
// order; all of them when `filters` is empty. `where` says whose cases they
// are ("profile quick of gate cp-affine-chain"). Throws InputError (file
// "--case", field the filter's text) naming the first filter that matches no
// case and up to 8 of the cases' labels.
std::vector<Case> filter_cases(const std::vector<Case>& cases, const std::vector<CaseFilter>& filters, const std::string& where);

}  // namespace densefeed
