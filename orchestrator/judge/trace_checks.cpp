#include "trace_checks.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "error.h"
#include "trace_loader.h"

namespace densefeed {

std::string_view to_string(TraceCheck::Kind kind) {
  switch (kind) {
    case TraceCheck::Kind::overlap: return "overlap";
    case TraceCheck::Kind::exposed: return "exposed";
    case TraceCheck::Kind::share: return "share";
  }
  return "overlap";
}

namespace {

SliceSelector selector_at(const YamlDocument& doc, const std::string& pointer) {
  try {
    return SliceSelector::from_json(doc.value.at(nlohmann::ordered_json::json_pointer(pointer)), pointer_to_field(pointer));
  } catch (const InputError& e) {
    doc.fail(pointer, e.field().empty() ? e.message() : fmt::format("'{}': {}", e.field(), e.message()));
  }
}

double bound_at(const YamlDocument& doc, const std::string& pointer, bool fraction) {
  const auto& v = doc.value.at(nlohmann::ordered_json::json_pointer(pointer));
  if (!v.is_number()) doc.fail(pointer, "expected a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0 || (fraction && x > 1)) {
    doc.fail(pointer, fraction ? "expected a fraction from 0 to 1" : "expected a finite number of ms >= 0");
  }
  return x;
}

}  // namespace

std::vector<TraceCheck> parse_trace_checks(const YamlDocument& doc, const std::string& pointer) {
  const nlohmann::ordered_json::json_pointer where(pointer);
  if (!doc.value.contains(where)) doc.fail(pointer.substr(0, pointer.rfind('/')), "expected a 'checks' list here");
  const auto& list = doc.value.at(where);
  if (!list.is_array()) doc.fail(pointer, "expected a list of checks (overlap, exposed, share)");
  std::vector<TraceCheck> checks;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string item = fmt::format("{}/{}", pointer, i);
    const auto& entry = list[i];
    if (!entry.is_object() || entry.size() != 1) doc.fail(item, "expected one of overlap: {...}, exposed: {...}, share: {...}");
    const std::string kind = entry.begin().key();
    const std::string body = item + "/" + pointer_token(kind);
    const auto& b = entry.begin().value();
    if (!b.is_object()) doc.fail(body, "expected a mapping");
    TraceCheck c;
    c.field = pointer_to_field(body);
    const auto allowed = [&](std::initializer_list<const char*> keys, std::initializer_list<const char*> required) {
      for (const auto& [k, v] : b.items()) {
        if (std::none_of(keys.begin(), keys.end(), [&](const char* x) { return k == x; })) {
          doc.fail_at_key(body + "/" + pointer_token(k), fmt::format("unknown key for a {} check", kind));
        }
      }
      for (const char* r : required) {
        if (!b.contains(r)) doc.fail(body, fmt::format("a {} check needs '{}'", kind, r));
      }
    };
    if (kind == "overlap") {
      allowed({"a", "b", "min_fraction", "window"}, {"a", "b", "min_fraction"});
      c.kind = TraceCheck::Kind::overlap;
      c.a = selector_at(doc, body + "/a");
      c.b = selector_at(doc, body + "/b");
      c.bound = bound_at(doc, body + "/min_fraction", true);
    } else if (kind == "exposed") {
      allowed({"a", "b", "max_ms", "window"}, {"a", "max_ms"});
      c.kind = TraceCheck::Kind::exposed;
      c.a = selector_at(doc, body + "/a");
      c.b = b.contains("b") ? selector_at(doc, body + "/b") : SliceSelector::parse("class=compute", c.field);
      c.bound = bound_at(doc, body + "/max_ms", false);
    } else if (kind == "share") {
      allowed({"name", "max_fraction", "window"}, {"name", "max_fraction"});
      c.kind = TraceCheck::Kind::share;
      c.a = selector_at(doc, body + "/name");
      c.bound = bound_at(doc, body + "/max_fraction", true);
    } else {
      doc.fail_at_key(body, fmt::format("unknown check '{}': expected overlap, exposed or share", kind));
    }
    if (b.contains("window")) {
      if (!b["window"].is_string() || b["window"].get<std::string>().empty()) doc.fail(body + "/window", "expected a slice name");
      c.window = b["window"].get<std::string>();
    }
    checks.push_back(std::move(c));
  }
  return checks;
}

std::vector<TraceCheckResult> run_trace_checks(const Timeline& t, const std::vector<TraceCheck>& checks, std::size_t list_limit) {
  const std::vector<SliceClass> classes = classify_slices(t);
  std::vector<TraceCheckResult> results;
  for (const auto& c : checks) {
    TraceCheckResult r;
    r.check = c;
    r.unit = c.kind == TraceCheck::Kind::exposed ? "ms" : "fraction";
    try {
      r.window = resolve_window(t, c.window);
    } catch (const InputError& e) {
      // The trace lacks the slice the check is about: the candidate's trace
      // is what is wrong, so the check is red, not the manifest bad input.
      r.window.name = c.window.value_or("");
      r.reason = fmt::format("window: {}", e.message());
      results.push_back(std::move(r));
      continue;
    }
    if (c.kind == TraceCheck::Kind::share) {
      const ShareResult s = compute_share(t, classes, c.a, r.window, list_limit);
      const double w = static_cast<double>(r.window.length());
      for (const auto& [rank, ns] : s.ranks) {
        const double v = w > 0 ? static_cast<double>(ns) / w : 0.0;
        r.ranks.emplace_back(rank, v);
        if (!r.value || v > *r.value) {
          r.value = v;
          r.rank = rank;
        }
      }
      if (r.rank) {
        // Attribute the result to the worst rank's slices.
        const ShareResult worst = compute_share(t, classes, c.a, r.window, list_limit, r.rank);
        r.intervals = worst.largest;
        r.intervals_total = worst.total;
      }
      if (!r.value) {
        r.reason = fmt::format("'{}' matched no slice with a duration in the window; a share of nothing is not checked", c.a.text);
      } else {
        r.passed = *r.value <= c.bound;
        r.reason = r.passed ? "" : fmt::format("rank {}: {:.4f} of the window > {:.4f}", *r.rank, *r.value, c.bound);
      }
      results.push_back(std::move(r));
      continue;
    }
    const OverlapResult o = compute_overlap(t, classes, c.a, *c.b, r.window, 0);
    const bool overlap = c.kind == TraceCheck::Kind::overlap;
    for (const auto& ro : o.ranks) {
      if (ro.a_ns == 0) continue;
      const double v = overlap ? *ro.fraction : static_cast<double>(ro.exposed_ns) / 1e6;
      r.ranks.emplace_back(ro.rank, v);
      if (!r.value || (overlap ? v < *r.value : v > *r.value)) {
        r.value = v;
        r.rank = ro.rank;
      }
    }
    if (!r.value) {
      r.reason = fmt::format("A ({}) matched no slice with a duration in the window: nothing to check", c.a.text);
    } else {
      r.passed = overlap ? *r.value >= c.bound : *r.value <= c.bound;
      if (!r.passed) {
        r.reason = overlap ? fmt::format("rank {}: {:.4f} of A overlaps B, below {:.4f}", *r.rank, *r.value, c.bound)
                           : fmt::format("rank {}: A is exposed for {:.6g} ms, above {:.6g} ms", *r.rank, *r.value, c.bound);
      }
      if (o.b_slices == 0) r.reason += (r.reason.empty() ? "" : "; ") + o.notes.back();
      // A's slices not hidden, on the worst rank.
      const OverlapResult worst = compute_overlap(t, classes, c.a, *c.b, r.window, list_limit, r.rank);
      r.intervals = worst.exposed;
      r.intervals_total = worst.exposed_count;
      r.involved_a = worst.involved_a;
      r.involved_b = worst.involved_b;
      r.overlaps = worst.overlaps;
      r.involved_total = worst.involved_total;
      r.overlaps_total = worst.overlaps_total;
    }
    results.push_back(std::move(r));
  }
  return results;
}

TraceCheckReport check_trace(const std::vector<std::filesystem::path>& files, const std::vector<TraceCheck>& checks,
                             std::size_t list_limit) {
  const Timeline t = load_trace(files);
  TraceCheckReport report;
  report.files = t.files;
  report.warnings = t.warnings;
  report.results = run_trace_checks(t, checks, list_limit);
  report.passed = std::all_of(report.results.begin(), report.results.end(), [](const TraceCheckResult& r) { return r.passed; });
  return report;
}

}  // namespace densefeed
