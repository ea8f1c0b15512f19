#include "fail_on.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "error.h"

namespace densefeed {

const char* to_string(FailOn f) {
  switch (f) {
    case FailOn::slower: return "slower";
    case FailOn::inconclusive: return "inconclusive";
  }
  return "slower";
}

std::vector<FailOn> parse_fail_on(const std::vector<std::string>& words) {
  std::vector<FailOn> out;
  for (const auto& text : words) {
    std::stringstream items(text);
    std::string word;
    while (std::getline(items, word, ',')) {
      FailOn f;
      if (word == "slower") f = FailOn::slower;
      else if (word == "inconclusive") f = FailOn::inconclusive;
      else throw InputError("command line", {}, "--fail-on", fmt::format("'{}' is not a bench verdict to fail on: expected slower or inconclusive", word));
      if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
    }
  }
  return out;
}

std::vector<std::string> fail_on_findings(const ExperimentRecord& r, const std::vector<FailOn>& fail_on) {
  std::vector<std::string> out;
  if (r.gate_verdict() != "green") return out;
  for (const auto& b : r.bench_cases) {
    for (const FailOn f : fail_on) {
      if (b.verdict != to_string(f)) continue;
      out.push_back(fmt::format("experiment {}: bench case {} is {} (speedup {:.3f}x [{:.3f}, {:.3f}])", r.id(), b.label, b.verdict,
                                b.speedup, b.lo, b.hi));
    }
  }
  return out;
}

}  // namespace densefeed
