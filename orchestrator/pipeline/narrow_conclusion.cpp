#include "narrow_conclusion.h"

#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "case_grid.h"
#include "gate_spec.h"
#include "tool_run.h"

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

// Partitioned (parts > 1) against unpartitioned cases of the parent.
struct Split {
  bool declared = false;  // the gate declares a partition
  std::size_t partitioned = 0, unpartitioned = 0, red_partitioned = 0, red_unpartitioned = 0;
  std::int64_t fewest_red_parts = 0;
  std::string fewest_red_case;
  bool fewest_is_trend = false;
  bool only_partitioned() const { return declared && red_partitioned > 0 && red_unpartitioned == 0 && unpartitioned > 0; }
  bool both() const { return declared && red_partitioned > 0 && red_unpartitioned > 0; }
  std::string text() const {
    return fmt::format("{} of {} partitioned and {} of {} unpartitioned case(s) red", red_partitioned, partitioned, red_unpartitioned,
                       unpartitioned);
  }
};

Split split_of(const GateSpec& gate, const std::vector<GateCaseRow>& cases) {
  Split s;
  s.declared = gate.structure.partition.has_value();
  for (const auto& c : cases) {
    if (!c.parts) continue;
    const bool red = c.verdict == "red";
    if (*c.parts > 1) {
      ++s.partitioned;
      s.red_partitioned += red;
      // Over a bound of its own first: a case red only by its row's trend is no onset.
      const bool trend = c.failure.kind == FailureKind::trend;
      if (red && (s.fewest_red_parts == 0 || (s.fewest_is_trend && !trend) || (trend == s.fewest_is_trend && *c.parts < s.fewest_red_parts))) {
        s.fewest_red_parts = *c.parts;
        s.fewest_red_case = c.label;
        s.fewest_is_trend = trend;
      }
    } else {
      ++s.unpartitioned;
      s.red_unpartitioned += red;
    }
  }
  return s;
}

// What partitioning adds, in the gate's words.
std::string what_partitioning_adds(const GateSpec& gate) {
  std::string s = "the chain and merge of the parts";
  if (!gate.structure.states.empty()) s += fmt::format(" and the state(s) {} handed between them", fmt::join(gate.structure.states, ", "));
  return s;
}

// A case key all red cases share one value of, every other value green.
std::string separating_key(const std::vector<GateCaseRow>& cases) {
  std::map<std::string, std::set<std::string>> red_values, green_values;
  for (const auto& c : cases) {
    for (const auto& [k, v] : c.values.items()) (c.verdict == "red" ? red_values : green_values)[k].insert(scalar_text(v));
  }
  for (const auto& [k, reds] : red_values) {
    if (reds.size() != 1 || !green_values.count(k) || green_values[k].count(*reds.begin())) continue;
    return fmt::format("{}={}", k, *reds.begin());
  }
  return "";
}

std::size_t green_count(const NarrowEvidence& ev) {
  std::size_t g = 0;
  if (ev.record.gate_run) {
    for (const auto& c : ev.record.gate_run->cases) g += c.verdict == "green";
  }
  return g;
}

// "precision=ieee" of a step's params.
std::string params_text(const J& params) {
  std::string out;
  for (const auto& [k, v] : params.items()) out += fmt::format("{}{}={}", out.empty() ? "" : " ", k, scalar_text(v));
  return out;
}

std::string git_subject(const std::filesystem::path& repo, const std::string& sha) {
  const auto r = run_tool({"git", "-C", repo.string(), "log", "-1", "--format=%s", sha}, repo, git_foreign_repository_env());
  std::string s = r.ok ? r.out : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.size() > 200) s = s.substr(0, 200) + "...";  // the subject is the candidate's text: a line, not a file
  return s;
}

// What each step showed, and the reruns' and the precision swap's findings.
struct Findings {
  bool flipped = false;
  const NarrowEvidence* precision = nullptr;
  std::size_t precision_green = 0;
  std::int64_t fewest_red_parts = 0;  // after the partition bisection
  std::string fewest_red_case;
};

Findings read_steps(std::deque<NarrowEvidence>& evidence, NarrowResult& result, const Split& split) {
  Findings f;
  f.fewest_red_parts = split.fewest_red_parts;
  f.fewest_red_case = split.fewest_red_case;
  for (auto& ev : evidence) {
    const std::size_t n = ev.step.cases, red = ev.step.red, green = green_count(ev);
    if (ev.record.summary.state == ExperimentState::interrupted) {
      ev.step.shows = "stopped at the budget's end before its verdict";
      continue;
    }
    if (ev.kind == "rerun") {
      result.rerun_of += n;
      result.rerun_red += red;
      f.flipped = f.flipped || green > 0;
      ev.step.shows = green > 0 ? fmt::format("{} of {} red again: with the same seed some verdicts flip", red, n)
                                : fmt::format("{} of {} red again with the same seed", red, n);
    } else if (ev.kind == "precision") {
      f.precision = &ev;
      f.precision_green = green;
      ev.step.shows = fmt::format("{} of {} green with {}", green, n, params_text(ev.params));
    } else if (ev.kind == "bisect-commit") {
      ev.step.shows = n == 0 ? "nothing ran (its build failed): skipped, as git bisect skip does"
                      : red > 0 ? "red: the first red commit is this one or before it" : "green: the first red commit is after it";
    } else if (ev.kind == "bisect-key" && ev.record.gate_run) {
      for (const auto& c : ev.record.gate_run->cases) {
        if (c.verdict == "red" && c.parts && (f.fewest_red_parts == 0 || *c.parts < f.fewest_red_parts)) {
          f.fewest_red_parts = *c.parts;
          f.fewest_red_case = c.label;
        }
      }
      ev.step.shows = fmt::format("{} of {} smaller partition(s) red; the fewest parts red: {}", red, n, f.fewest_red_parts);
    }
  }
  return f;
}

void conclude_from_steps(const ExperimentRecord& parent, const GateSpec& gate, std::deque<NarrowEvidence>& evidence,
                         NarrowResult& result, const std::filesystem::path& repo);

}  // namespace

void conclude_narrowing(const ExperimentRecord& parent, const GateSpec& gate, std::deque<NarrowEvidence>& evidence,
                        NarrowResult& result, const std::filesystem::path& repo, bool out_of_budget) {
  conclude_from_steps(parent, gate, evidence, result, repo);
  // A layer that a step not run could still have changed is not named.
  const bool settled = result.layer == NarrowLayer::nondeterminism || result.layer == NarrowLayer::precision ||
                       result.layer == NarrowLayer::precision_of_partitioning || result.layer == NarrowLayer::commit;
  if (out_of_budget && !settled) {
    result.conclusion = fmt::format("stopped at the budget's end after {} step(s), before the cause was told apart; so far: {} ({}); "
                                    "give it more time (--budget)",
                                    evidence.size(), to_string(result.layer), result.conclusion);
    result.layer = NarrowLayer::undetermined;
  }
}

namespace {

void conclude_from_steps(const ExperimentRecord& parent, const GateSpec& gate, std::deque<NarrowEvidence>& evidence,
                         NarrowResult& result, const std::filesystem::path& repo) {
  const Split split = split_of(gate, parent.gate_run ? parent.gate_run->cases : std::vector<GateCaseRow>{});
  const Findings f = read_steps(evidence, result, split);
  const std::string swap = f.precision ? params_text(f.precision->params) : "";
  const bool precision_clears = f.precision && f.precision_green == f.precision->step.cases && f.precision->step.cases > 0;
  const std::string ruled_out = f.precision && !precision_clears
                                    ? fmt::format("; precision ruled out: with {} {} of {} still red", swap,
                                                  f.precision->step.cases - f.precision_green, f.precision->step.cases)
                                    : "";
  if (f.flipped) {
    result.layer = NarrowLayer::nondeterminism;
    result.conclusion = fmt::format("nondeterministic: {} of {} reruns red with the same seed (the same inputs): the candidate's result "
                                    "depends on more than its inputs (a race, an uninitialised read, an order of atomics); make it "
                                    "deterministic before reading any error",
                                    result.rerun_red, result.rerun_of);
    return;
  }
  if (precision_clears) {
    result.layer = split.only_partitioned() ? NarrowLayer::precision_of_partitioning : NarrowLayer::precision;
    result.conclusion =
        split.only_partitioned()
            ? fmt::format("the precision of the products partitioning adds ({}): with {} every red case is green ({} of {}), and only "
                          "partitioned cases were red ({}; the fewest parts red: {}, case {})",
                          what_partitioning_adds(gate), swap, f.precision_green, f.precision->step.cases, split.text(),
                          split.fewest_red_parts, split.fewest_red_case)
            : fmt::format("the precision of the candidate's products: with {} every red case is green ({} of {}){}", swap,
                          f.precision_green, f.precision->step.cases, split.both() ? " (" + split.text() + ")" : "");
    return;
  }
  if (result.first_bad > 0 && result.first_bad - result.last_good == 1) {
    result.layer = NarrowLayer::commit;
    result.commit_sha = result.bisect_commits[result.first_bad - 1];
    result.commit_subject = git_subject(repo, result.commit_sha);
    const std::string before = result.last_good == 0
                                   ? fmt::format("{} ({}) is taken as green", result.bisect_from.substr(0, 12), result.bisect_from_whence)
                                   : fmt::format("commit {} before it is green on the same cases",
                                                 result.bisect_commits[result.last_good - 1].substr(0, 12));
    result.conclusion = fmt::format("commit {} (\"{}\") is the first red one of the {} from {} to the candidate: {}{}", result.commit_sha.substr(0, 12),
                                    result.commit_subject, result.bisect_commits.size(), result.bisect_from.substr(0, 12), before,
                                    split.only_partitioned() ? fmt::format("; it breaks what partitioning adds ({}: {})",
                                                                           what_partitioning_adds(gate), split.text())
                                                             : "");
    return;
  }
  if (result.first_bad > 0 && result.first_bad - result.last_good > 1) {
    result.notes.push_back(fmt::format("commit bisection: the first red commit is one of commits {}..{} of {} ({} .. {}); those between "
                                       "could not be built",
                                       result.last_good + 1, result.first_bad, result.bisect_commits.size(),
                                       result.bisect_commits[result.last_good].substr(0, 12),
                                       result.bisect_commits[result.first_bad - 1].substr(0, 12)));
  }
  if (split.only_partitioned()) {
    result.layer = NarrowLayer::partitioned_algorithm;
    result.conclusion = fmt::format("the partitioned algorithm ({}): red only where the work is partitioned ({}), from {} parts on (case "
                                    "{}), every unpartitioned case green{}",
                                    what_partitioning_adds(gate), split.text(), f.fewest_red_parts, f.fewest_red_case, ruled_out);
    return;
  }
  const std::string key = parent.gate_run ? separating_key(parent.gate_run->cases) : "";
  if (!key.empty()) {
    result.layer = NarrowLayer::input_regime;
    result.conclusion = fmt::format("an input regime: red only at {}, every case at its other values green{}{}", key,
                                    split.both() ? ", partitioned or not" : "", ruled_out);
    return;
  }
  std::size_t red = 0, total = parent.gate_run ? parent.gate_run->cases.size() : 0;
  if (parent.gate_run) {
    for (const auto& c : parent.gate_run->cases) red += c.verdict == "red";
  }
  if (split.declared && split.unpartitioned == 0 && split.red_partitioned > 0) {
    result.layer = NarrowLayer::undetermined;
    result.conclusion = fmt::format("experiment {} ran partitioned cases only ({}): whether the partitioning is at fault needs its "
                                    "unpartitioned cases{}{}",
                                    parent.id(), split.text(),
                                    parent.parent_id ? fmt::format("; narrow experiment {}, which ran them", *parent.parent_id) : "",
                                    ruled_out);
    return;
  }
  if (split.both() || (total > 0 && red == total)) {
    result.layer = NarrowLayer::algorithm_or_inputs;
    result.conclusion = fmt::format("the algorithm or the inputs, not the partitioning: red {}{}",
                                    split.both() ? "partitioned or not (" + split.text() + ")" : fmt::format("at every case ({} of {})", red, total),
                                    ruled_out);
    return;
  }
  result.layer = NarrowLayer::undetermined;
  result.conclusion = fmt::format("no layer could be shown: {} of {} case(s) red with no case key or partition separating them{}{}", red, total,
                                  ruled_out, result.first_bad > 0 ? fmt::format("; the first red commit is one of commits {}..{} of the bisection",
                                                                                 result.last_good + 1, result.first_bad)
                                                                  : "");
}

}  // namespace

}  // namespace densefeed
