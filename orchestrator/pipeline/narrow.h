// densefeed narrow ID (issue 30): densefeed runs, itself, the cheapest
// experiments that tell apart why experiment ID's gate is red, each recorded
// as an experiment whose parent is ID and whose step says what it was, within
// a time budget, and ends by naming the layer at fault with the experiments
// that show it.
//
// The steps, in order, each only while the cause is not yet clear:
//  1. rerun the red cases with the same seed (bitwise the same inputs): a
//     verdict that flips is nondeterminism (up to kNarrowReruns reruns, to
//     count k of n);
//  2. the precision swap the gate declares (gate_structure.h
//     exact_precision_swap): green is precision, of what partitioning adds
//     where only partitioned cases are red;
//  3. when the candidate is a commit: bisect the commits between the last
//     revision green on this gate (the ledger) or the trusted ref and it,
//     each built as the gate's build says, sandboxed, to the first red one;
//  4. the partition key's smaller values the gate has and ID did not run, to
//     the fewest parts that are red.
// Then the conclusion (narrow_conclusion.h) from the records alone.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "experiment_outcome.h"

namespace densefeed {

inline constexpr int kNarrowReruns = 4;  // the most reruns of the red cases, to count k of n

enum class NarrowLayer {
  precision_of_partitioning,  // green with exact precision, red only at parts > 1
  precision,                  // green with exact precision
  partitioned_algorithm,      // red only at parts > 1 whatever the precision
  commit,                     // a first red commit
  input_regime,               // red only at one value of a case key
  nondeterminism,             // the same inputs, verdicts that flip
  algorithm_or_inputs,        // red partitioned or not
  undetermined,               // none of the above could be shown
};
std::string to_string(NarrowLayer layer);  // "precision-of-partitioning", ...

struct NarrowStep {
  std::int64_t experiment_id = 0;
  std::string kind;   // rerun | precision | bisect-commit | bisect-key
  std::string step;   // as recorded (experiments.step)
  std::size_t cases = 0, red = 0;  // cases run, of them not green
  double seconds = 0;              // wall time of the experiment
  std::string shows;               // what it showed, one sentence
};

struct NarrowResult {
  std::int64_t experiment_id = 0;
  std::string gate;
  NarrowLayer layer = NarrowLayer::undetermined;
  std::string conclusion;  // one sentence with the evidence
  std::string commit_sha, commit_subject;  // layer commit only
  std::size_t rerun_red = 0, rerun_of = 0;  // case-runs over every rerun
  std::vector<NarrowStep> steps;
  double seconds = 0;   // the whole narrowing, wall
  double budget_s = 0;
  std::string stopped;  // cause clear | budget | no further step | interrupted (SIGTERM, SIGINT)
  std::vector<std::string> notes;  // the steps not taken, and why ("precision swap: ...")
  // The commit bisection, when one ran: from `bisect_from` (exclusive;
  // whence: which green experiment, or the trusted ref) over
  // `bisect_commits` (oldest first, the candidate last); commits[last_good-1]
  // green (0: the endpoint), commits[first_bad-1] red; first_bad 0: none ran.
  std::string bisect_from, bisect_from_whence;
  std::vector<std::string> bisect_commits;
  std::size_t first_bad = 0, last_good = 0;
};

struct NarrowOptions {
  RunOptions run;          // project, gate store, ledger, jobs, sandbox, executor (profile, seed, cases are narrow's)
  double budget_s = 600;   // never exceeded: a step that would not fit is not started, one still running at the end is stopped
  std::string manifest;    // '' = the one the experiment recorded (unchanged since)
  std::function<void(const NarrowStep&)> on_step;  // after each step (a terminal's line)
};

// Narrows experiment `id` of options.run.workspace.ledger. Throws InputError
// when there is no such experiment, its gate is not red (green, error,
// pending: nothing of the candidate's to narrow), or its manifest is gone;
// InfraError when densefeed itself fails.
NarrowResult narrow_experiment(std::int64_t id, const NarrowOptions& options);

}  // namespace densefeed
