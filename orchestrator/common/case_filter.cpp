#include "case_filter.h"

#include <cstdlib>

#include <fmt/format.h>

#include "error.h"

namespace densefeed {

namespace {

// The number `s` spells, when it is one in full.
bool as_number(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end && *end == '\0';
}

}  // namespace

CaseFilter parse_case_filter(const std::string& text) {
  CaseFilter f;
  f.text = text;
  std::string part;
  const auto take = [&] {
    if (part.empty()) return;
    const auto eq = part.find('=');
    if (eq == 0 || (eq == std::string::npos && f.pairs.empty())) {
      throw InputError("--case", {}, text,
                       fmt::format("'{}' is not KEY=VALUE: a case filter is key=value pairs apart by spaces, e.g. 'T=24576' or "
                                   "'T=8192 shards=8' (a case's label)", part));
    }
    if (eq == std::string::npos) f.pairs.back().second += " " + part;  // a value with a space in it
    else f.pairs.emplace_back(part.substr(0, eq), part.substr(eq + 1));
    part.clear();
  };
  for (const char ch : text) {
    if (ch == ' ' || ch == '\t') take();
    else part += ch;
  }
  take();
  if (f.pairs.empty()) throw InputError("--case", {}, text, "an empty case filter: give key=value pairs, e.g. 'T=24576'");
  return f;
}

bool case_filter_matches(const Case& c, const CaseFilter& f) {
  if (c.label == f.text) return true;
  for (const auto& [key, value] : f.pairs) {
    if (!c.values.is_object() || !c.values.contains(key)) return false;
    const auto& v = c.values[key];
    if (scalar_text(v) == value) continue;
    double want = 0;
    if (v.is_number() && as_number(value, want) && v.get<double>() == want) continue;
    return false;
  }
  return true;
}

std::vector<Case> filter_cases(const std::vector<Case>& cases, const std::vector<CaseFilter>& filters, const std::string& where) {
  if (filters.empty()) return cases;
  for (const auto& f : filters) {
    bool any = false;
    for (const auto& c : cases) any = any || case_filter_matches(c, f);
    if (any) continue;
    std::string labels;
    for (std::size_t i = 0; i < cases.size() && i < 8; ++i) labels += (i ? "; " : "") + cases[i].label;
    if (cases.size() > 8) labels += fmt::format("; and {} more", cases.size() - 8);
    throw InputError("--case", {}, f.text,
                     fmt::format("no case of {} has {}: its cases are {}", where, f.text, labels.empty() ? "none" : labels));
  }
  std::vector<Case> out;
  for (const auto& c : cases) {
    for (const auto& f : filters) {
      if (case_filter_matches(c, f)) {
        out.push_back(c);
        break;
      }
    }
  }
  return out;
}

}  // namespace densefeed
