#include "narrow.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "case_filter.h"
#include "case_grid.h"
#include "error.h"
#include "executor.h"
#include "experiment_runner.h"
#include "gate_spec.h"
#include "gate_store.h"
#include "ledger.h"
#include "narrow_conclusion.h"
#include "replay_plan.h"
#include "sha256.h"
#include "tool_run.h"

namespace densefeed {
namespace {

using Clock = std::chrono::steady_clock;
using J = nlohmann::ordered_json;

struct Context {
  std::int64_t id = 0;
  const NarrowOptions* options = nullptr;
  ExperimentRecord parent;
  GateSpec gate;
  std::string manifest;
  std::vector<std::string> red;  // labels of the parent's red cases
  Clock::time_point start, deadline;
  double seconds_per_case = 0;   // the last step's wall time per case it ran (estimate for the next)
  NarrowResult result;
  std::deque<NarrowEvidence> evidence;  // what each step ran and how its cases ended (stable addresses)
  bool out_of_budget = false;
};

double since(const Clock::time_point& t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Stops the step still running at the deadline (as a SIGTERM would: it is
// recorded interrupted with what it had).
class Watchdog {
 public:
  explicit Watchdog(Clock::time_point deadline)
      : thread_([this, deadline] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!done_cv_.wait_until(lock, deadline, [this] { return done_; })) request_interrupt(SIGALRM);
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

// What one step runs: its kind and step text, the cases (labels), params over
// the manifest's, the candidate's revision ('' = the manifest's), profile.
struct StepPlan {
  std::string kind, step;
  std::vector<std::string> labels;
  J params = J::object();
  std::string revision;
  std::string profile;
};

// Runs one step as an experiment linked to the parent, when its estimate
// fits the budget; nullptr (out_of_budget set) when it does not.
const NarrowEvidence* run_step(Context& ctx, const StepPlan& plan) {
  const double estimate = ctx.seconds_per_case * static_cast<double>(plan.labels.size());
  if (Clock::now() + std::chrono::duration<double>(estimate) > ctx.deadline || interrupt_signal() != 0) {
    ctx.out_of_budget = true;
    return nullptr;
  }
  RunOptions r = ctx.options->run;
  r.cases.clear();
  for (const auto& l : plan.labels) r.cases.push_back(parse_case_filter(l));
  r.profile = plan.profile.empty() ? ctx.parent.gate_run->profile : plan.profile;
  r.seed = std::stoull(ctx.parent.gate_run->seed);
  r.parent_id = ctx.id;
  r.step = plan.step;
  r.bench = false;
  r.trace = false;
  r.isolated_candidate_cache = true;
  r.candidate_param_overrides = plan.params;
  r.candidate_revision = plan.revision;
  ExperimentOutcome outcome;
  {
    const Watchdog watchdog(ctx.deadline);
    outcome = run_experiment(ctx.manifest, r);
  }
  const ExperimentRecord rec = Ledger(ctx.options->run.workspace.ledger, Ledger::Mode::read_only).record(outcome.experiment_id);
  NarrowEvidence ev;
  ev.kind = plan.kind;
  ev.record = rec;
  ev.params = plan.params;
  ev.revision = plan.revision;
  NarrowStep s;
  s.experiment_id = rec.id();
  s.kind = plan.kind;
  s.step = plan.step;
  s.seconds = outcome.wall_s;
  if (rec.gate_run) {
    s.cases = rec.gate_run->cases.size();
    for (const auto& c : rec.gate_run->cases) s.red += c.verdict != "green";
  }
  if (s.cases > 0) ctx.seconds_per_case = std::max(ctx.seconds_per_case, s.seconds / static_cast<double>(s.cases));
  if (interrupt_signal() != 0) ctx.out_of_budget = true;
  ev.step = s;
  ctx.evidence.push_back(ev);
  if (ctx.options->on_step) ctx.options->on_step(s);
  return &ctx.evidence.back();
}

// Same verdict and (within 10 %) the same worst error as the parent for
// every case: a rerun that tells nothing new.
bool same_as(const GateRunRow& parent, const GateRunRow& rerun) {
  std::map<std::string, const GateCaseRow*> first;
  for (const auto& c : parent.cases) first[c.label] = &c;
  for (const auto& c : rerun.cases) {
    const auto it = first.find(c.label);
    if (it == first.end() || it->second->verdict != c.verdict) return false;
    for (std::size_t m = 0; m < c.metrics.size() && m < it->second->metrics.size(); ++m) {
      const double a = c.metrics[m].value, b = it->second->metrics[m].value;
      if (std::isfinite(a) != std::isfinite(b)) return false;
      if (std::isfinite(a) && std::abs(a - b) > 0.1 * std::max(std::abs(a), std::abs(b))) return false;
    }
  }
  return true;
}

// 1. Reruns: one; when it differs from the parent, up to kNarrowReruns.
// Returns whether a verdict flipped (nondeterminism is then the cause).
bool rerun_steps(Context& ctx) {
  bool differs = false, flipped = false;
  for (int k = 1; k <= kNarrowReruns; ++k) {
    const auto* ev = run_step(ctx, {"rerun", fmt::format("rerun {} of the red cases", k), ctx.red, J::object(), "", ""});
    if (!ev || !ev->record.gate_run) break;
    const auto& run = *ev->record.gate_run;
    differs = differs || !same_as(*ctx.parent.gate_run, run);
    for (const auto& c : run.cases) flipped = flipped || c.verdict == "green";
    if (!differs || ctx.out_of_budget) break;
  }
  return flipped;
}

// The commits from `good` (exclusive) to `bad` (inclusive), oldest first,
// along first parents; empty when `good` is not an ancestor of `bad`.
std::vector<std::string> commit_range(const std::filesystem::path& dir, const std::string& good, const std::string& bad) {
  const auto env = git_foreign_repository_env();
  if (good.empty() || good == bad || !run_tool({"git", "-C", dir.string(), "merge-base", "--is-ancestor", good, bad}, dir, env).ok) return {};
  const auto list = run_tool({"git", "-C", dir.string(), "rev-list", "--reverse", "--first-parent", "--ancestry-path", good + ".." + bad}, dir, env);
  std::vector<std::string> out;
  if (!list.ok) return out;
  // `good` must be the first parent of the range's first commit: a green
  // commit off the first-parent line (merged in) is no start of it.
  std::size_t at = 0;
  while (at < list.out.size()) {
    const auto nl = list.out.find('\n', at);
    const std::string line = list.out.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    if (line.size() == 40) out.push_back(line);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  if (!out.empty()) {
    const auto parent = run_tool({"git", "-C", dir.string(), "rev-parse", out.front() + "^1"}, dir, env);
    if (!parent.ok || parent.out.substr(0, 40) != good) return {};
  }
  return out;
}

// The last revision green on this gate that is an ancestor of `bad` (the
// ledger's newest first), else the trusted ref's commit. '' when neither.
std::string good_endpoint(const Context& ctx, const std::string& bad, std::string& whence) {
  const auto& dir = ctx.options->run.project.dir;
  const Ledger ledger(ctx.options->run.workspace.ledger, Ledger::Mode::read_only);
  Ledger::ListFilter filter;
  filter.gate = ctx.parent.summary.gate;
  auto summaries = ledger.summaries(filter);
  for (auto it = summaries.rbegin(); it != summaries.rend(); ++it) {
    if (it->id == ctx.id || it->stage("gate").verdict != StageVerdict::green) continue;
    const ExperimentRecord e = ledger.record(it->id);
    // Green on what the parent ran: a committed revision (never a worktree,
    // dirty or not) with the parent's params over the whole of the parent's
    // profile (never a replay, a narrowing step or a --case subset), under
    // the same gate file. Anything less is a starting point an agent plants.
    if (e.candidate.sha.empty() || e.candidate.sha == bad || e.candidate.revision == "WORKTREE" || e.parent_id ||
        !e.case_filter.empty() || e.candidate.params != ctx.parent.candidate.params || !e.gate_run ||
        e.gate_run->profile != ctx.parent.gate_run->profile || e.gate_run->gate_sha256 != ctx.parent.gate_run->gate_sha256) {
      continue;
    }
    if (!commit_range(dir, e.candidate.sha, bad).empty()) {
      whence = fmt::format("experiment {}'s candidate, green on this gate", e.id());
      return e.candidate.sha;
    }
  }
  const std::string& trusted = ctx.options->run.store.commit;
  if (!commit_range(dir, trusted, bad).empty()) {
    whence = "the trusted ref";
    return trusted;
  }
  return "";
}

// 3. Bisect the commits between the good endpoint and the candidate: each
// midpoint's red cases (a build that fails is skipped, as git bisect skip).
void bisect_commits(Context& ctx) {
  const std::string bad = ctx.parent.candidate.sha;
  if (bad.empty() || ctx.parent.candidate.revision == "WORKTREE") {
    ctx.result.notes.push_back("commit bisection: the candidate is the worktree, not a commit");
    return;
  }
  std::string whence;
  const std::string good = good_endpoint(ctx, bad, whence);
  const auto commits = commit_range(ctx.options->run.project.dir, good, bad);
  if (commits.empty()) {
    ctx.result.notes.push_back(fmt::format("commit bisection: no revision green on gate {} (or the trusted ref) is an ancestor of the "
                                           "candidate {}", ctx.parent.summary.gate, bad.substr(0, 12)));
    return;
  }
  ctx.result.bisect_from = good;
  ctx.result.bisect_from_whence = whence;
  ctx.result.bisect_commits = commits;
  if (commits.size() == 1) {  // the candidate is the commit right after a green one: nothing to run
    ctx.result.first_bad = 1;
    ctx.result.last_good = 0;
    return;
  }
  std::size_t lo = 0, hi = commits.size();  // commits[lo-1] green (0: the endpoint), commits[hi-1] red
  std::set<std::size_t> skipped;
  while (hi - lo > 1 && !ctx.out_of_budget) {
    std::size_t mid = (lo + hi) / 2;
    while (skipped.count(mid) && mid + 1 < hi) ++mid;
    if (skipped.count(mid)) break;
    const std::string& sha = commits[mid - 1];
    const auto* ev = run_step(ctx, {"bisect-commit", fmt::format("bisect commit {} of {} {}", mid, commits.size(), sha.substr(0, 12)),
                                    ctx.red, J::object(), sha, ""});
    if (!ev || !ev->record.gate_run || ev->record.summary.state == ExperimentState::interrupted) break;
    const auto& run = *ev->record.gate_run;
    if (run.cases.empty()) {  // its build failed, or nothing ran
      skipped.insert(mid);
      continue;
    }
    bool red = false;
    for (const auto& c : run.cases) red = red || c.verdict == "red";
    (red ? hi : lo) = mid;
  }
  ctx.result.first_bad = hi;
  ctx.result.last_good = lo;
}

// 4. The partition key's values below the fewest red parts that the gate
// has and the parent did not run (same other keys): one experiment.
void bisect_partition(Context& ctx) {
  const auto& part = ctx.gate.structure.partition;
  if (!part || part->key.empty()) {
    ctx.result.notes.push_back(part ? "partition bisection: the candidate reports its parts; there is no key to bisect"
                                    : "partition bisection: the gate declares no structure.partition");
    return;
  }
  const GateCaseRow* fewest = nullptr;
  std::set<std::string> ran;
  for (const auto& c : ctx.parent.gate_run->cases) {
    ran.insert(c.label);
    // Over a bound of its own first: a case red only by its row's trend is no onset.
    if (c.verdict != "red" || !c.parts || *c.parts <= 1) continue;
    const bool trend = c.failure.kind == FailureKind::trend, fewest_trend = fewest && fewest->failure.kind == FailureKind::trend;
    if (!fewest || (fewest_trend && !trend) || (trend == fewest_trend && *c.parts < *fewest->parts)) fewest = &c;
  }
  if (!fewest) {
    ctx.result.notes.push_back("partition bisection: no partitioned case is red");
    return;
  }
  std::vector<std::string> labels;
  for (const auto& c : ctx.gate.cases) {
    if (ran.count(c.label) || !c.values.contains(part->key) || !c.values[part->key].is_number()) continue;
    const double v = c.values[part->key].get<double>();
    if (v <= 1 || v >= static_cast<double>(*fewest->parts)) continue;
    bool same = true;
    for (const auto& [k, x] : fewest->values.items()) same = same && (k == part->key || (c.values.contains(k) && c.values[k] == x));
    if (same) labels.push_back(c.label);
  }
  if (labels.empty()) {
    ctx.result.notes.push_back(fmt::format("partition bisection: the gate has no {} between 1 and {} for case {} that was not run",
                                           part->key, *fewest->parts, fewest->label));
    return;
  }
  const std::string profile = ctx.gate.profiles.count("full") ? "full" : "";
  run_step(ctx, {"bisect-key", fmt::format("{} below {} (case {})", part->key, *fewest->parts, fewest->label), labels, J::object(), "",
                 profile});
}

void check_narrowable(const ExperimentRecord& e, const std::filesystem::path& ledger) {
  const std::string where = fmt::format("experiment {}", e.id());
  if (!e.gate_run || e.gate_run->verdict == "pending") {
    throw InputError(ledger.string(), {}, where, "it has no finished gate run: wait for its verdict (densefeed status ID --wait)");
  }
  if (e.gate_run->verdict == "green") throw InputError(ledger.string(), {}, where, "its gate is green: there is nothing failing to narrow");
  std::size_t red = 0;
  for (const auto& c : e.gate_run->cases) red += c.verdict == "red";
  if (red == 0) {
    throw InputError(ledger.string(), {}, where,
                     fmt::format("no case of it is red (gate {}: {}): the reference or the machine failed, not the candidate; "
                                 "there is nothing of the candidate's to narrow",
                                 e.gate_run->verdict, e.gate_run->reason));
  }
}

}  // namespace

NarrowResult narrow_experiment(std::int64_t id, const NarrowOptions& options) {
  Context ctx;
  ctx.id = id;
  ctx.options = &options;
  ctx.start = Clock::now();
  ctx.deadline = ctx.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.budget_s));
  const auto& ledger_path = options.run.workspace.ledger;
  ctx.parent = Ledger(ledger_path, Ledger::Mode::read_only).record(id);
  check_narrowable(ctx.parent, ledger_path);
  ctx.manifest = replay_manifest(ctx.parent, options.run, options.manifest);
  ctx.gate = load_gate(options.run.store, ctx.parent.summary.gate);
  // Reruns under another gate than the parent's would read a changed gate as
  // nondeterminism.
  if (!ctx.parent.gate_run->gate_sha256.empty() && sha256_file(ctx.gate.file) != ctx.parent.gate_run->gate_sha256) {
    throw InputError(ledger_path.string(), {}, fmt::format("experiment {}", id),
                     fmt::format("its gate file {} changed since it ran (sha256 {} then): a narrowing under another gate tells "
                                 "nothing of it; run the manifest again and narrow that experiment",
                                 ctx.gate.file.string(), ctx.parent.gate_run->gate_sha256.substr(0, 12)));
  }
  for (const auto& c : ctx.parent.gate_run->cases) {
    if (c.verdict == "red") ctx.red.push_back(c.label);
  }
  // The parent's own pace is the first estimate (its gate stage over its cases).
  const double parent_wall = ctx.parent.gate_run->wall_s.value_or(0);
  ctx.seconds_per_case = parent_wall / static_cast<double>(std::max<std::size_t>(1, ctx.parent.gate_run->cases.size()));
  ctx.result.experiment_id = id;
  ctx.result.gate = ctx.parent.summary.gate;
  ctx.result.budget_s = options.budget_s;

  bool clear = rerun_steps(ctx);
  if (!clear && !ctx.out_of_budget) {
    const auto swap = exact_precision_swap(ctx.gate.structure, ctx.gate.params, ctx.parent.candidate.params);
    if (!swap) {
      ctx.result.notes.push_back(ctx.gate.structure.precision.empty()
                                     ? "precision swap: the gate declares no precision param (structure.precision) and none has an exact value"
                                     : "precision swap: the candidate already runs the exact value of every precision param");
    }
    if (swap) {
      const auto* ev = run_step(ctx, {"precision", fmt::format("precision swap {}={}", swap->param, scalar_text(swap->value)),
                                      ctx.red, J{{swap->param, swap->value}}, "", ""});
      if (ev && ev->record.gate_run) {
        bool all_green = !ev->record.gate_run->cases.empty();
        for (const auto& c : ev->record.gate_run->cases) all_green = all_green && c.verdict == "green";
        clear = all_green;
      }
    }
  }
  if (!clear && !ctx.out_of_budget) bisect_commits(ctx);
  if (!clear && !ctx.out_of_budget && ctx.result.first_bad == 0) bisect_partition(ctx);
  conclude_narrowing(ctx.parent, ctx.gate, ctx.evidence, ctx.result, options.run.project.dir, ctx.out_of_budget);
  for (const auto& ev : ctx.evidence) ctx.result.steps.push_back(ev.step);
  ctx.result.seconds = since(ctx.start);
  const int sig = interrupt_signal();
  ctx.result.stopped = sig != 0 && sig != SIGALRM ? "interrupted" : ctx.out_of_budget ? "budget" : ctx.result.layer == NarrowLayer::undetermined ? "no further step" : "cause clear";
  return ctx.result;
}

}  // namespace densefeed
