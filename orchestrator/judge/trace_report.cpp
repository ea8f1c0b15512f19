#include "trace_report.h"

#include <algorithm>

#include <fmt/format.h>

namespace densefeed {
namespace {

using json = nlohmann::ordered_json;

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::string ms(std::int64_t ns) { return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6); }

// A duration in the unit that shows it: launch delays are us, steps are ms.
std::string dur(std::int64_t ns) {
  const auto mag = ns < 0 ? -ns : ns;
  if (mag >= 1'000'000) return ms(ns);
  if (mag >= 1'000) return fmt::format("{:.3f} us", static_cast<double>(ns) / 1e3);
  return fmt::format("{} ns", ns);
}

std::string percent(const std::optional<double>& f) { return f ? fmt::format("{:.2f} %", 100 * *f) : std::string("n/a"); }

json window_json(const AnalysisWindow& w) {
  return {{"name", w.name.empty() ? json(nullptr) : json(w.name)},
          {"start_ns", w.start},
          {"end_ns", w.end},
          {"duration_ns", w.length()},
          {"slices", w.slices}};
}

std::string slice_line(const AttributedSlice& s, const char* what) {
  return fmt::format("      {} {} — {} [{} .. {}] on {}{}\n", dur(s.ns), what, s.name, ms(s.start), ms(s.end), s.lane,
                     s.event ? fmt::format(", event {}", s.event) : std::string());
}

std::string overlap_text(const char* title, const OverlapResult& o) {
  std::string out = fmt::format("{}: A = {} ({} slices), B = {} ({} slices)\n", title, o.a.text, o.a_slices, o.b.text, o.b_slices);
  out += fmt::format("  overlap {} of A ({} of {}), exposed {}\n", percent(o.fraction), ms(o.overlap_ns), ms(o.a_ns), ms(o.exposed_ns));
  if (o.ranks.size() > 1) {
    for (const auto& r : o.ranks) {
      out += fmt::format("    rank {}: {} ({} of {}), exposed {}\n", r.rank, percent(r.fraction), ms(r.overlap_ns), ms(r.a_ns),
                         ms(r.exposed_ns));
    }
  }
  for (const auto& n : o.notes) out += "  note: " + n + "\n";
  if (!o.exposed.empty()) {
    out += fmt::format("  A's slices not hidden by B ({} of {} listed):\n", o.exposed.size(), o.exposed_count);
    for (const auto& s : o.exposed) out += slice_line(s, "exposed");
  }
  return out;
}

}  // namespace

json attributed_slice_json(const AttributedSlice& s) {
  return {{"name", s.name}, {"lane", s.lane}, {"rank", s.rank},     {"file", s.file},
          {"event", s.event}, {"start_ns", s.start}, {"end_ns", s.end}, {"ns", s.ns}};
}

json overlap_json(const OverlapResult& o) {
  json ranks = json::array();
  for (const auto& r : o.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"a_slices", r.a_slices},
                     {"a_ns", r.a_ns},
                     {"b_ns", r.b_ns},
                     {"overlap_ns", r.overlap_ns},
                     {"exposed_ns", r.exposed_ns},
                     {"fraction", optional_number(r.fraction)}});
  }
  json exposed = json::array();
  for (const auto& s : o.exposed) exposed.push_back(attributed_slice_json(s));
  return {{"a", o.a.text},         {"b", o.b.text},
          {"a_slices", o.a_slices}, {"b_slices", o.b_slices},
          {"a_ns", o.a_ns},         {"b_ns", o.b_ns},
          {"overlap_ns", o.overlap_ns}, {"exposed_ns", o.exposed_ns},
          {"fraction", optional_number(o.fraction)}, {"ranks", ranks},
          {"exposed", exposed},     {"exposed_count", o.exposed_count},
          {"notes", o.notes}};
}

json trace_warning_json(const TraceWarning& w) {
  return {{"kind", w.kind}, {"file", w.file}, {"count", w.count}, {"first", w.first}, {"message", w.message}};
}

json trace_file_json(const TraceFileInfo& f) {
  return {{"path", f.path},
          {"format", f.format},
          {"rank", f.rank},
          {"rank_source", f.rank_source},
          {"bytes", f.bytes},
          {"events", f.events},
          {"display_time_unit", f.display_time_unit.empty() ? json(nullptr) : json(f.display_time_unit)}};
}

json trace_check_json(const TraceCheckResult& r) {
  json ranks = json::array();
  for (const auto& [rank, v] : r.ranks) ranks.push_back({{"rank", rank}, {"value", v}});
  json intervals = json::array();
  for (const auto& s : r.intervals) intervals.push_back(attributed_slice_json(s));
  json involved = json::array(), overlaps = json::array();
  for (const auto* side : {&r.involved_a, &r.involved_b}) {
    for (const auto& s : *side) {
      json j = attributed_slice_json(s);
      j["role"] = side == &r.involved_a ? "a" : "b";
      involved.push_back(std::move(j));
    }
  }
  for (const auto& [start, end] : r.overlaps) overlaps.push_back({{"start_ns", start}, {"end_ns", end}});
  return {{"check", std::string(to_string(r.check.kind))},
          {"field", r.check.field},
          {"a", r.check.a.text},
          {"b", r.check.b ? json(r.check.b->text) : json(nullptr)},
          {"bound", r.check.bound},
          {"unit", r.unit},
          {"verdict", r.passed ? "green" : "red"},
          {"value", optional_number(r.value)},
          {"rank", r.rank ? json(*r.rank) : json(nullptr)},
          {"ranks", ranks},
          {"reason", r.reason},
          {"window", window_json(r.window)},
          {"intervals", intervals},
          {"intervals_total", r.intervals_total},
          {"involved", involved},
          {"involved_total", r.involved_total},
          {"overlaps", overlaps},
          {"overlaps_total", r.overlaps_total}};
}

json trace_check_report_json(const TraceCheckReport& report) {
  json files = json::array(), warnings = json::array(), checks = json::array();
  for (const auto& f : report.files) files.push_back(trace_file_json(f));
  for (const auto& w : report.warnings) warnings.push_back(trace_warning_json(w));
  for (const auto& r : report.results) checks.push_back(trace_check_json(r));
  return {{"files", files}, {"warnings", warnings}, {"checks", checks}, {"verdict", report.passed ? "green" : "red"}};
}

json trace_analysis_json(const TraceAnalysis& a, const std::vector<TraceCheckResult>* checks) {
  json doc;
  doc["kind"] = "trace-analysis";
  doc["files"] = json::array();
  for (const auto& f : a.files) doc["files"].push_back(trace_file_json(f));
  doc["time_unit"] = "ns";
  doc["base_us"] = a.base_micros;
  doc["window"] = window_json(a.window);
  doc["counts"] = {{"events", a.counts.events},     {"slices", a.counts.slices},   {"instants", a.counts.instants},
                   {"counters", a.counts.counters}, {"flows", a.counts.flows},     {"metadata", a.counts.metadata},
                   {"ignored", a.counts.ignored}};
  doc["warnings"] = json::array();
  for (const auto& w : a.warnings) doc["warnings"].push_back(trace_warning_json(w));
  doc["lanes"] = json::array();
  for (const auto& l : a.lanes) {
    doc["lanes"].push_back({{"label", l.label},
                            {"kind", std::string(to_string(l.kind))},
                            {"rank", l.rank},
                            {"file", l.file},
                            {"slices", l.slices},
                            {"busy_ns", l.busy_ns},
                            {"busy_fraction", l.busy_fraction},
                            {"gaps", l.gaps},
                            {"gap_ns", l.gap_ns},
                            {"largest_gap_ns", l.largest_gap_ns},
                            {"largest_gap_start_ns", l.largest_gap_start}});
  }
  json ranks = json::array();
  for (const auto& b : a.breakdown) {
    json r = {{"rank", b.rank}, {"window_ns", b.window_ns}};
    json fractions = json::object();
    for (std::size_t c = 0; c < b.ns.size(); ++c) {
      const std::string name(to_string(static_cast<SliceClass>(c)));
      r[name + "_ns"] = b.ns[c];
      fractions[name] = b.window_ns > 0 ? static_cast<double>(b.ns[c]) / static_cast<double>(b.window_ns) : 0.0;
    }
    r["fractions"] = fractions;
    ranks.push_back(r);
  }
  doc["breakdown"] = {{"precedence", {"compute", "communication", "transfer", "other", "idle"}},
                      {"lanes", "gpu and cpu lanes of each rank"},
                      {"ranks", ranks}};
  doc["comm_comp_overlap"] = a.comm_comp ? overlap_json(*a.comm_comp) : json(nullptr);
  doc["overlaps"] = json::array();
  for (const auto& o : a.overlaps) doc["overlaps"].push_back(overlap_json(o));
  doc["top"] = json::array();
  const double w = static_cast<double>(a.window.length());
  for (const auto& n : a.top) {
    doc["top"].push_back({{"name", n.name},
                          {"lane_kind", std::string(to_string(n.kind))},
                          {"class", std::string(to_string(n.slice_class))},
                          {"count", n.count},
                          {"inclusive_ns", n.inclusive_ns},
                          {"exclusive_ns", n.exclusive_ns},
                          {"window_fraction", w > 0 ? static_cast<double>(n.exclusive_ns) / w : 0.0}});
  }
  const auto& ld = a.launch_delay;
  json worst = json::array();
  for (const auto& s : ld.worst) {
    worst.push_back({{"kernel", s.kernel},
                     {"runtime", s.runtime},
                     {"lane", s.lane},
                     {"rank", s.rank},
                     {"correlation", s.correlation},
                     {"runtime_end_ns", s.runtime_end},
                     {"kernel_start_ns", s.kernel_start},
                     {"delay_ns", s.delay_ns}});
  }
  doc["launch_delay"] = {{"gpu_with_correlation", ld.gpu_with_correlation},
                         {"matched", ld.matched},
                         {"negative", ld.negative},
                         {"min_ns", ld.matched ? json(ld.min_ns) : json(nullptr)},
                         {"median_ns", ld.matched ? json(ld.median_ns) : json(nullptr)},
                         {"mean_ns", ld.matched ? json(ld.mean_ns) : json(nullptr)},
                         {"p90_ns", ld.matched ? json(ld.p90_ns) : json(nullptr)},
                         {"max_ns", ld.matched ? json(ld.max_ns) : json(nullptr)},
                         {"worst", worst}};
  if (checks) {
    doc["checks"] = json::array();
    bool passed = true;
    for (const auto& r : *checks) {
      doc["checks"].push_back(trace_check_json(r));
      passed = passed && r.passed;
    }
    doc["verdict"] = passed ? "green" : "red";
  }
  return doc;
}

std::string render_trace_checks_text(const std::vector<TraceCheckResult>& results) {
  std::string out;
  for (const auto& r : results) {
    const std::string value = !r.value ? "n/a" : r.unit == "ms" ? fmt::format("{:.6g} ms", *r.value) : fmt::format("{:.4f}", *r.value);
    const char* op = r.check.kind == TraceCheck::Kind::overlap ? ">=" : "<=";
    const std::string bound = r.unit == "ms" ? fmt::format("{:.6g} ms", r.check.bound) : fmt::format("{:.4f}", r.check.bound);
    out += fmt::format("  {:<5} {} {}{}: {} (bound {} {}){}\n", r.passed ? "green" : "red", to_string(r.check.kind), r.check.a.text,
                       r.check.b ? " with " + r.check.b->text : std::string(), value, op, bound,
                       r.rank ? fmt::format(", worst rank {}", *r.rank) : std::string());
    if (!r.window.name.empty()) out += fmt::format("        window '{}' [{} .. {}]\n", r.window.name, ms(r.window.start), ms(r.window.end));
    if (!r.reason.empty()) out += "        " + r.reason + "\n";
    for (const auto& s : r.intervals) out += slice_line(s, r.check.kind == TraceCheck::Kind::share ? "in selection" : "exposed");
    if (r.intervals_total > r.intervals.size()) out += fmt::format("        ... {} more\n", r.intervals_total - r.intervals.size());
  }
  return out;
}

std::string render_trace_analysis_text(const TraceAnalysis& a, const std::vector<TraceCheckResult>* checks) {
  std::string out;
  for (const auto& f : a.files) {
    out += fmt::format("{}: {} ({} bytes, {} events), rank {} ({}){}\n", f.path, f.format, f.bytes, f.events, f.rank, f.rank_source,
                       f.display_time_unit.empty() ? "" : fmt::format(", displayTimeUnit {}", f.display_time_unit));
  }
  out += fmt::format("{} slices, {} instants, {} counters, {} flows; times from {} us\n", a.counts.slices, a.counts.instants,
                     a.counts.counters, a.counts.flows, a.base_micros);
  out += fmt::format("window: {} [{} .. {}], {}\n", a.window.name.empty() ? "whole trace" : "'" + a.window.name + "'",
                     ms(a.window.start), ms(a.window.end), ms(a.window.length()));
  if (!a.warnings.empty()) {
    out += "warnings (repaired):\n";
    for (const auto& w : a.warnings) out += fmt::format("  {}: {}: {} (first: {})\n", w.kind, w.file, w.message, w.first);
  }
  out += "\nwhere the time went (per rank; compute > communication > transfer > other > idle):\n";
  out += fmt::format("  {:>4} {:>14} {:>14} {:>14} {:>14} {:>14}\n", "rank", "compute", "communication", "transfer", "other", "idle");
  for (const auto& b : a.breakdown) {
    std::string row = fmt::format("  {:>4}", b.rank);
    for (std::size_t c = 0; c < b.ns.size(); ++c) {
      const double pct = b.window_ns > 0 ? 100.0 * static_cast<double>(b.ns[c]) / static_cast<double>(b.window_ns) : 0.0;
      row += fmt::format(" {:>14}", fmt::format("{:.3f} {:.1f}%", static_cast<double>(b.ns[c]) / 1e6, pct));
    }
    out += row + "\n";
  }
  out += "  (ms and % of the window)\n\nlanes:\n";
  for (const auto& l : a.lanes) {
    out += fmt::format("  {:<48} {:>8} slices  busy {} ({:.1f}%), {} gaps, largest {}\n", l.label, l.slices, ms(l.busy_ns),
                       100 * l.busy_fraction, l.gaps, dur(l.largest_gap_ns));
  }
  if (a.comm_comp) {
    out += "\n";
    out += overlap_text("communication/computation overlap (HTA's definition)", *a.comm_comp);
  }
  for (const auto& o : a.overlaps) {
    out += "\n";
    out += overlap_text("overlap", o);
  }
  out += "\ntop names by exclusive time:\n";
  for (const auto& n : a.top) {
    out += fmt::format("  {:<10} {:<13} {:>14} excl {:>14} incl {:>8}x  {}\n", to_string(n.kind), to_string(n.slice_class),
                       ms(n.exclusive_ns), ms(n.inclusive_ns), n.count, n.name);
  }
  const auto& ld = a.launch_delay;
  out += fmt::format("\nlaunch delay (GPU start - end of the launching call): {} of {} GPU slices matched by correlation id\n",
                     ld.matched, ld.gpu_with_correlation);
  if (ld.matched > 0) {
    out += fmt::format("  min {}  median {}  mean {}  p90 {}  max {}  ({} negative)\n", dur(ld.min_ns), dur(ld.median_ns),
                       dur(static_cast<std::int64_t>(ld.mean_ns)), dur(ld.p90_ns), dur(ld.max_ns), ld.negative);
    for (const auto& s : ld.worst) {
      out += fmt::format("    {} {} after {} (correlation {}) on {}\n", dur(s.delay_ns), s.kernel, s.runtime, s.correlation, s.lane);
    }
  }
  if (checks) out += "\nchecks:\n" + render_trace_checks_text(*checks);
  return out;
}

}  // namespace densefeed
