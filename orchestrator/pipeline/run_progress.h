// What a running experiment has reached outside the bench's rounds
// (bench_progress.h tells those): a stage starting, each gate process
// ending, a stage ending. Shown on a terminal as one updating line
// (present/progress_display.h), appended to the run folder's progress.jsonl
// beside the bench's events (what `status --json` shows while it runs) and
// sent by the MCP server as progress notifications.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace densefeed {

struct RunProgress {
  std::int64_t experiment_id = 0;
  std::string stage;  // gate | bench | trace
  // start: the stage begins (total: its cases); process: a gate process
  // ended (done: cases whose candidate ended, of total; references_done of
  // references); end: the stage ended (verdict).
  std::string phase;
  std::size_t done = 0, total = 0;
  std::size_t references_done = 0, references = 0;
  std::string case_label;  // process: the case whose process ended
  std::string arm;         // process: reference | candidate
  std::string verdict;     // end: the stage's verdict (green | red | error)
  double elapsed_s = 0;    // since the stage began, seconds
  // Seconds more at the pace so far (the mean process time over the jobs
  // still to run); -1: unknown (nothing ended yet, or the stage ended).
  double eta_s = -1;
};

// {"at", "stage", "phase", "experiment_id", "done", "total",
// "references_done", "references", "case", "arm", "verdict", "elapsed_s",
// "eta_s" (null: unknown)}, the fields a phase does not use left out.
nlohmann::ordered_json run_progress_json(const RunProgress& p);

// For people, e.g. "gate: case 12 of 29 (T=1024 shards=4), 4.1 s, about 6 s
// left" or "gate: 29 case(s), profile quick: starting".
std::string run_progress_line(const RunProgress& p);

// Appends the event to `file` (JSON Lines, the bench's progress.jsonl); a
// failure to write is ignored (progress is for watching, never the record).
void append_run_progress(const std::filesystem::path& file, const RunProgress& p);

}  // namespace densefeed
