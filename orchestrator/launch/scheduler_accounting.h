// What a scheduler's accounting recorded of one job (Slurm: sacct), carried
// with the launch it ran (executor.h LaunchResult::accounting) to the case
// (gate_result.h CaseResult) and into the ledger's output capture and run's
// JSON (`accounting`). Read once per job array or job when it has ended
// (slurm_executor.h), from sacct's accounting storage (slurmdbd) or, where a
// cluster keeps only job completion records (JobCompType=jobcomp/filetxt),
// from `sacct --completion`, which has no MaxRSS.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace densefeed {

struct SchedulerAccounting {
  std::string source;      // "sacct" (accounting storage) | "jobcomp" (sacct --completion)
  std::string job;         // the job as sacct names it: "41" or, a task of an array, "40_3"
  std::string state;       // sacct's State: "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", ...
  int exit_code = 0;       // ExitCode's first number: the batch script's exit status
  int signal = 0;          // ExitCode's second: the signal that ended it (0 none)
  double elapsed_s = 0;    // Elapsed, seconds (wall time from start to end)
  std::optional<long long> max_rss_bytes;  // the largest MaxRSS of its steps, bytes; unset where not recorded
  std::string node;        // NodeList

  bool operator==(const SchedulerAccounting&) const = default;
};

// Parses sacct's `-n -P -o JobID,State,ExitCode,Elapsed,MaxRSS,NodeList`
// lines (fields split by '|'; a job's own line, then its steps "ID.batch",
// "ID.0", whose MaxRSS is folded into the job's as the largest). Returns one
// entry per job or array task, in sacct's order. Lines of another shape are
// skipped. `source` is copied into each.
std::vector<SchedulerAccounting> parse_sacct(std::string_view text, const std::string& source);

// Slurm's [DD-[HH:]]MM:SS elapsed time in seconds; -1 when not of that shape.
double parse_slurm_elapsed(std::string_view text);
// MaxRSS "123456K" / "12M" / "1.5G" / "0" (KiB when unitless) in bytes; unset when empty or not of that shape.
std::optional<long long> parse_slurm_memory(std::string_view text);

nlohmann::ordered_json accounting_to_json(const SchedulerAccounting& a);
// Throws nlohmann::json::exception for a field missing or of the wrong type.
SchedulerAccounting accounting_from_json(const nlohmann::json& j);

}  // namespace densefeed
