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
#include "narrow_result.h"

namespace densefeed {

inline constexpr int kNarrowReruns = 4;  // the most reruns of the red cases, to count k of n

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
