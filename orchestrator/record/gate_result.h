// What the correctness gate stage found (gate_runner.h runs it): per case
// each output's comparison, the processes' outcomes, where they ran; the
// trend bounds judged per row. Plain values: the ledger stores them, the
// printers read them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "case_grid.h"
#include "failure.h"
#include "placement.h"
#include "process_runner.h"
#include "sandbox.h"
#include "scheduler_accounting.h"
#include "tensor_compare.h"
#include "verdict.h"

namespace densefeed {

struct OutputResult {
  std::string output;
  Comparison comparison;
  Failure failure;  // none when the comparison is green
  // Simple wrong candidates (wrong_candidates.h: zeros, reference_mean,
  // last_partition_zeroed) that this output's bounds would have accepted
  // against this case's reference: where the gate cannot fail.
  std::vector<std::string> passing_wrong_candidates;
};

// One trend bound judged over one row of cases (trend_bound.h).
struct TrendJudgement {
  std::string output, metric, along;
  std::string row;            // the other keys of the row, "n=64 H=4" ('' when none vary)
  double max_exponent = 0;
  std::optional<double> exponent;  // nullopt: too few points, or flat (not judged)
  double r2 = 0;
  std::size_t points = 0;
  bool passed = true;
  std::string text;           // "y: rel_l2 ~ K^1.60 (R^2 1.00) across K 16..256, over the gate's max_exponent 1"
  std::vector<std::size_t> cases;  // indexes into GateResult::cases
};

// What a harness session measured for one case (session.h).
struct SessionCaseRecord {
  int session = 0;    // 1, 2, ...: which session of its arm on its job thread (a new one after one ended)
  int request = 0;    // 0, 1, ...: the request's number in that session
  std::uint64_t rss_bytes = 0;  // the session's resident memory after its answer, bytes (0: it ended)
  double wall_s = 0;  // request to answer, seconds
  int slot = 0;       // 0, 1, ...: the job thread whose session it was (session and request count per slot)
};

struct CaseResult {
  Case gate_case;
  Verdict verdict = Verdict::green;
  std::string reason;  // why not green: process failure, missing output, metric over its bound
  Failure failure;     // the same as a value: the first thing that failed (none when green)
  std::vector<OutputResult> outputs;
  double reference_wall_s = 0;  // 0 when the reference was shared with an earlier case
  // Parts the case's work is cut into (gate_structure.h case_parts): the
  // partition key's value, or what the candidate reported in meta.json;
  // unset when the gate declares no partition or the candidate reported none.
  std::optional<std::int64_t> parts;
  double candidate_wall_s = 0;
  // The failing process's last lines (process_limits.h kLogTailLines) of
  // stderr, or of stdout when stderr is empty; log_tail_stream says which.
  std::string log_tail;
  std::string log_tail_stream;
  std::filesystem::path reference_out;  // the reference's outputs (the bench checks against them)
  // How each process ended and what it wrote: exit code or signal, timeout,
  // stdout/stderr bytes and bytes dropped beyond the cap, strays killed.
  // The reference's is shared by the cases that share its run.
  ProcessResult reference_process;
  ProcessResult candidate_process;
  std::string candidate_gpu;  // CUDA_VISIBLE_DEVICES the candidate ran with ('' = unchanged: no GPU assignment; ranks: "0;1", rank 0's first)
  int candidate_ranks = 1;    // processes the candidate ran as (gate ranks)
  // Where the executor ran each (executor.h LaunchResult::placement; in
  // words, placement.h to_string: "local", "slurm job 42 on node1").
  Placement candidate_placement;
  Placement reference_placement;
  // How the launcher contained the candidate where it ran (untrusted_launch.h
  // UntrustedResult::containment): on a Slurm node, that node's launcher's word.
  std::string candidate_containment;
  double candidate_queue_s = 0;  // the candidate's job's wait in the scheduler's queue, seconds (0 locally)
  // What the scheduler's accounting recorded of each one's job (elapsed,
  // MaxRSS, exit code, node: scheduler_accounting.h); unset locally or
  // where the cluster keeps none.
  std::optional<SchedulerAccounting> candidate_accounting, reference_accounting;
  // Set when the gate ran sessions (protocol: session): RSS per request, so
  // growth across cases shows.
  std::optional<SessionCaseRecord> reference_session, candidate_session;
};

struct GateResult {
  Verdict verdict = Verdict::green;
  std::string reason;
  Failure failure;  // the first failing case's, or the lock's / the build's when no case ran
  std::vector<CaseResult> cases;
  double wall_s = 0;          // the whole stage, seconds
  double harness_wall_s = 0;  // sum of every harness process's wall time, seconds
  SandboxStatus sandbox;      // whether the candidate commands ran sandboxed, and if not why
  std::vector<TrendJudgement> trends;  // every trend bound of the gate, per row
  // Files the candidate's command names that the trusted ref has and the
  // candidate's tree lacks, when a candidate did not run (gate_reason.h
  // files_only_on_trusted_ref): a revision older than its gate. The stage's
  // failure then says so (no_start by the candidate, metric
  // "missing_in_candidate", detail the files), which the ledger keeps.
  std::vector<std::string> missing_in_candidate;
};

}  // namespace densefeed
