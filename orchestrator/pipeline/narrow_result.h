// What densefeed narrow found (narrow.h runs it, narrow_conclusion.h
// concludes it, present/narrow_printers.h prints it): the layer at fault,
// the sentence, and each step's experiment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace densefeed {

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

}  // namespace densefeed
