#include "narrow_printers.h"

#include <fmt/format.h>

namespace densefeed {

nlohmann::ordered_json narrow_json(const NarrowResult& r) {
  nlohmann::ordered_json j = {{"experiment", r.experiment_id}, {"gate", r.gate}, {"layer", to_string(r.layer)}, {"conclusion", r.conclusion}};
  if (r.layer == NarrowLayer::commit) j["commit"] = {{"sha", r.commit_sha}, {"subject", r.commit_subject}};
  j["reruns"] = {{"red", r.rerun_red}, {"of", r.rerun_of}};
  j["experiments"] = r.steps.size();
  j["seconds"] = r.seconds;
  j["budget_s"] = r.budget_s;
  j["stopped"] = r.stopped;
  j["notes"] = r.notes;
  j["steps"] = nlohmann::ordered_json::array();
  for (const auto& s : r.steps) {
    j["steps"].push_back({{"experiment", s.experiment_id}, {"step", s.step}, {"kind", s.kind}, {"cases", s.cases}, {"red", s.red},
                          {"seconds", s.seconds}, {"shows", s.shows}});
  }
  return j;
}

std::string narrow_step_line(const NarrowStep& s) {
  return fmt::format("densefeed: narrow step #{} {}: {} case(s), {} red, {:.1f} s", s.experiment_id, s.step, s.cases, s.red, s.seconds);
}

std::string render_narrow_text(const NarrowResult& r) {
  std::string out = fmt::format("narrow experiment {} (gate {}): {} experiment(s), {:.1f} s of a {:.0f} s budget ({})\n", r.experiment_id,
                                r.gate, r.steps.size(), r.seconds, r.budget_s, r.stopped);
  for (const auto& s : r.steps) {
    out += fmt::format("  #{} {}: {} case(s), {} red, {:.1f} s{}\n", s.experiment_id, s.step, s.cases, s.red, s.seconds,
                       s.shows.empty() ? "" : ": " + s.shows);
  }
  for (const auto& n : r.notes) out += "  not run: " + n + "\n";
  if (r.rerun_of > 0) out += fmt::format("reruns: {} of {} case-runs red\n", r.rerun_red, r.rerun_of);
  out += fmt::format("layer: {}: {}\n", to_string(r.layer), r.conclusion);
  if (r.layer == NarrowLayer::commit) out += fmt::format("commit: {} {}\n", r.commit_sha, r.commit_subject);
  return out;
}

}  // namespace densefeed
