// A failure as a value: what went wrong (kind), in whose process (who), and
// the fields that kind carries. Stored in columns (gate_cases.failure_*,
// stage_outcomes.failure_*), rendered into reasons by describe(), and read by
// the next-step rules (next_steps.cpp), which never parse reason text.
#pragma once

#include <optional>
#include <string>

namespace densefeed {

enum class FailureKind {
  none,              // green
  crash,             // killed by a signal (signal)
  exit_code,         // exited with a non-zero code (exit_code)
  timeout,           // ran past the gate's timeout
  no_start,          // could not be started (not found, not executable)
  missing_output,    // exited 0 without writing a declared output (output)
  malformed_output,  // an output of the wrong dtype or shape, truncated, a link, NaN/Inf (output)
  tolerance,         // an output's metric over its bound (output, metric)
  trend,             // an output's metric grows along a case key faster than the gate's max_exponent (output, metric; detail: the fit)
  lock,              // a gate or frozen file differs from gates.lock, or the candidate edits one
  sandbox,           // the sandbox could not start the command
  limit,             // ran into a resource limit of the gate's (detail: which, e.g. "the memory limit of 512 MiB")
  implausible_timing,  // bench: timings that contradict densefeed's own measurement (detail: the check, timing_checks.h)
  infrastructure,    // densefeed itself, the build, the ledger
  unknown,           // recorded before failures were values (ledger version < 3)
};

enum class FailureWho { none, reference, candidate, base, driver, densefeed };

struct Failure {
  FailureKind kind = FailureKind::none;
  FailureWho who = FailureWho::none;
  std::optional<int> signal;     // crash: the signal number (11 = SIGSEGV)
  std::optional<int> exit_code;  // exit_code: the code
  std::string output;            // missing/malformed/tolerance: the gate's output name
  std::string metric;            // tolerance: rel_l2 | max_abs | elementwise | max_ulp
  std::string detail;            // one line for people: the file, what was wrong (never parsed)
  std::optional<int> rank;       // a multi-rank case (rank_group.h): the rank that failed (0-based)

  bool failed() const { return kind != FailureKind::none; }
};

const char* to_string(FailureKind k);
const char* to_string(FailureWho w);
// The inverse of to_string; unknown text gives FailureKind::unknown / FailureWho::none.
FailureKind failure_kind_from(const std::string& text);
FailureWho failure_who_from(const std::string& text);

// "the candidate was killed by signal 11 (SIGSEGV)", "the candidate exited with
// code 7", "y: rel_l2 over its bound": the reason text people read, rendered
// from the value. detail is appended after "; " when it is not empty.
std::string describe(const Failure& f);

// Whether the candidate's process did not run to its end: it could not start
// (no_start, sandbox), or exited non-zero or was killed (exit_code, crash) —
// an import error or a missing file, not a wrong answer. Such a case is red
// (the gate never passes it) but is shown as `error` in the candidate's
// column and counted apart from tolerance failures (case_label, gate reasons).
bool candidate_did_not_run(const Failure& f);
// The word in a case's verdict column: "error" where candidate_did_not_run,
// else `verdict` ("green", "red", "error").
std::string case_label(const std::string& verdict, const Failure& f);

}  // namespace densefeed
