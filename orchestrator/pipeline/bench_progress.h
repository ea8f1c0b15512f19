// What a running bench case has reached (BenchOptions::progress): told
// after each arm's warm-up call and each paired round, shown on a terminal
// as one line and kept in the run folder's progress.jsonl, whose last
// events `status --json` shows while the experiment runs.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "bench_statistics.h"

namespace densefeed {

// What a bench case has reached, told after each arm's warm-up and each
// paired round (BenchOptions::progress): a terminal's progress line and the
// events `status --json` shows while the run lasts.
struct BenchProgress {
  std::string case_label;
  std::size_t case_index = 0, cases = 0;  // which of the stage's cases, of how many
  std::string phase;                      // "warmup" (an arm's warm-up call ended) or "round" (a paired round ended)
  std::string arm;                        // phase warmup: "base" or "candidate"
  double warmup_s = 0;                    // phase warmup: that call's wall time, seconds
  int rounds = 0;                         // timed rounds so far
  Decision decision;                      // decide() on them (phase round)
  double elapsed_s = 0;                   // seconds of timed rounds so far (the budget's count)
  double budget_s = 0;                    // the case's measurement budget, seconds
  // Seconds more the noise seen would need to a verdict (decision.more_rounds
  // at the mean paired round's wall time); -1: unknown or none.
  double eta_s = -1;
};

// The event as one JSON object: {"at": UTC time, "stage": "bench", "case",
// "case_index", "cases", "phase", and for "warmup" "arm" and "warmup_s", for
// "round" "rounds", "verdict" (decide() so far), "speedup", "ci" [lo, hi]
// (null while undefined), "elapsed_s", "budget_s", "eta_s" (null: unknown)}.
nlohmann::ordered_json bench_progress_json(const BenchProgress& p);

// The event as a line for people, e.g. "bench 1/1 T=4096: round 6, speedup
// 0.781x [0.760, 0.803], slower so far; 12 s of 300 s".
std::string bench_progress_line(const BenchProgress& p);

// Appends the event to `file` (JSON Lines); a failure to write is ignored
// (progress is for watching, never part of the record).
void append_bench_progress(const std::filesystem::path& file, const BenchProgress& p);

// The last `n` events of `file` in order ([] when it is missing; lines that
// are not JSON objects are skipped).
nlohmann::ordered_json read_bench_progress(const std::filesystem::path& file, std::size_t n);

}  // namespace densefeed
