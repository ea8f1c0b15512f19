// The gate step of execute_experiment (experiment_steps.h): whether the
// candidate may run at all, the builds it needs, run_gate, and the gate run
// recorded.
#include "experiment_steps.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "arms.h"
#include "error.h"
#include "executor.h"
#include "export_verify.h"
#include "ledger.h"
#include "pending_results.h"
#include "revision.h"
#include "revision_build.h"
#include "trusted_arm.h"

namespace densefeed {
namespace {

// The trusted files of a gate, relative to the project: its file, the lock,
// what it freezes.
std::vector<std::string> trusted_files(const GateStore& store, const std::string& gate_name, const GateSpec* gate) {
  std::vector<std::string> files = {store.gate_rel(gate_name), store.lock_rel()};
  if (gate) files.insert(files.end(), gate->freezes.begin(), gate->freezes.end());
  return files;
}

// Whether the candidate may run: a WORKTREE one whose copies of the trusted
// files are the gate store's; a revision whose own commits change none of
// them and whose build succeeds (its arm is then its build, whatever the
// build's verdict). When not, out.gate_result says why: red, no case run.
bool candidate_runnable(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options, ExperimentRun& run,
                        GateRunOptions& gate_options) {
  const Manifest& m = out.manifest;
  bool runnable = true;
  const auto trusted = trusted_files(options.store, m.gate, &*out.gate);
  if (m.candidate.revision == kWorktree) {
    // WORKTREE runs the project folder's files: if its copies of the gate,
    // lock or frozen files are not the gate store's, what ran is not what
    // was locked.
    if (const auto differ = worktree_differences(options.project, options.store, trusted); !differ.empty()) {
      runnable = false;
      out.gate_result.verdict = Verdict::red;
      out.gate_result.failure = {FailureKind::lock, FailureWho::candidate, {}, {}, "", "worktree", fmt::format("{}", fmt::join(differ, " "))};
      out.gate_result.reason = fmt::format(
          "the WORKTREE candidate edits frozen files: {} differ from the gate store ({}); no case ran. Commit them on {} "
          "and have a person run 'densefeed gate lock', or pass --trust-worktree to trust the worktree's gates",
          fmt::join(differ, ", "), options.store.describe(), options.store.ref);
    }
    return runnable;
  }
  // Gates and frozen files come from the gate store; a candidate whose
  // own commits (since it left the trusted ref) change one of them is red
  // before it is even built. A branch made before a gate change on the
  // trusted ref is judged by the trusted ref's gate, not blamed for it.
  std::vector<std::string> changed;
  std::string history_error;
  try {
    changed = changed_by_own_commits(options.project.dir, options.store.commit, out.candidate_sha, trusted);
  } catch (const std::runtime_error& e) {
    history_error = e.what();
  }
  if (!history_error.empty() || !changed.empty()) {
    out.gate_result.verdict = Verdict::red;
    out.gate_result.failure = {history_error.empty() ? FailureKind::lock : FailureKind::infrastructure, FailureWho::candidate,
                               {}, {}, "", history_error.empty() ? "own_commits" : "history", fmt::format("{}", fmt::join(changed, " "))};
    out.gate_result.reason =
        history_error.empty()
            ? fmt::format("the candidate revision {} changes frozen files in its own commits: {}; no case ran",
                          out.candidate_sha.substr(0, 12), fmt::join(changed, ", "))
            : fmt::format("the candidate revision cannot be judged: {}; no case ran", history_error);
    return false;
  }
  const RevisionBuild b =
      build_revision(*out.gate, options.project, out.candidate_sha, options.workspace, options.sandbox, &run.executor);
  for (const auto& e : b.tampered) ledger.record_tamper(e);
  run.revision_dirs.push_back(b.src.parent_path());
  gate_options.sandbox_readable = run.revision_dirs;
  if (!b.ok) {
    runnable = false;
    out.gate_result.verdict = Verdict::red;
    out.gate_result.failure = {FailureKind::infrastructure, FailureWho::candidate, {}, {}, "", "build", ""};
    out.gate_result.reason = fmt::format("the candidate's build at {} failed: {}", out.candidate_sha.substr(0, 12), b.failure);
  }
  const auto hidden = out.candidate_arm.hidden;
  out.candidate_arm = revision_context(options.project, options.store, b, out.candidate_arm.python);
  out.candidate_arm.hidden = hidden;
  out.candidate_arm.cache_dir = arm_cache_dir(options.workspace, b.src.parent_path().filename().string(), "candidate");
  if (options.isolated_candidate_cache) {
    // Empty, this experiment's alone: a copy of the revision's would hold
    // what the candidate wrote there when it first ran these cases.
    out.candidate_arm.cache_dir = arm_cache_dir(options.workspace, fmt::format("{}-experiment-{}", b.src.parent_path().filename().string(),
                                                                               out.experiment_id), "candidate");
    std::error_code ec;
    std::filesystem::remove_all(out.candidate_arm.cache_dir, ec);
    std::filesystem::create_directories(out.candidate_arm.cache_dir, ec);
    if (ec) throw InfraError(fmt::format("{}: cannot make the candidate's compile cache: {}", out.candidate_arm.cache_dir.string(), ec.message()));
  }
  out.candidate_bin = b.bin;
  out.provenance = read_provenance(options.project, options.store, &*out.gate, &out.reference_arm, &out.candidate_arm,
                                   out.candidate_params);
  return runnable;
}

// The reference and the driver as the trusted ref's build (trusted_arm.h).
// Called once the candidate is known to be runnable: a red before any case
// costs no build. false: out.gate_result is an error, no case runs.
bool trusted_arm_built(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options, ExperimentRun& run) {
  bool trusted_built = false;
  std::vector<TamperEvent> trusted_tampered;
  const std::string problem = build_trusted_arm(out.reference_arm, *out.gate, options.project, options.store, options.workspace,
                                                options.sandbox, &trusted_built, &trusted_tampered, &run.executor);
  for (const auto& e : trusted_tampered) ledger.record_tamper(e);
  if (!problem.empty()) {
    out.gate_result.verdict = Verdict::error;
    out.gate_result.failure = {FailureKind::infrastructure, FailureWho::reference, {}, {}, "", "trusted_build", problem};
    out.gate_result.reason = problem + "; no case ran";
    return false;
  }
  if (trusted_built) {
    out.provenance = read_provenance(options.project, options.store, &*out.gate, &out.reference_arm, &out.candidate_arm,
                                     out.candidate_params);
  }
  return true;
}

// The export was checked before the run (open_gate_store); a shell of the
// agent's user could change it while the reference read it (the hostile
// trial swapped the reference after the check and put nothing back).
// Checked again once the gate ran: a difference is a tamper event and the
// gate stage an error, never a verdict. A swap put back before this check is
// beyond what the agent's own user can be kept from (densefeed as a service
// of its own user, issue 28).
void check_export_after_gate(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options) {
  const ExportCheck after = verify_export(options.project.repo_top, options.project.prefix, options.store.commit, options.store.root);
  if (after.tampered.empty()) return;
  std::vector<std::int64_t> ids;
  for (const auto& e : after.tampered) ids.push_back(ledger.record_tamper(e));
  const std::string why = fmt::format(
      "the trusted ref's export {} changed while the gate ran ({}: {}; tamper event {}), so what the reference computed "
      "is not the trusted ref's; nothing of this gate run counts",
      options.store.root.string(), to_string(after.tampered.front().kind), after.tampered.front().path, ids.front());
  out.gate_result.verdict = Verdict::error;
  out.gate_result.failure = {FailureKind::infrastructure, FailureWho::densefeed, {}, {}, after.tampered.front().path,
                             "export_changed", why};
  out.gate_result.reason = why;
}

// How a case's processes ended and what they wrote, for the ledger's
// output_capture: exit, signal, timeout, bytes kept and dropped, strays.
nlohmann::ordered_json output_capture(const CaseResult& c) {
  nlohmann::ordered_json capture = nlohmann::ordered_json::object();
  for (const auto& [who, p] : {std::pair{"reference", &c.reference_process}, std::pair{"candidate", &c.candidate_process}}) {
    if (!p->started) continue;
    capture[who] = {{"exit_code", p->exit_code}, {"signal", p->signal}, {"timed_out", p->timed_out},
                    {"stdout_bytes", p->stdout_capture.bytes}, {"stdout_dropped", p->stdout_capture.dropped},
                    {"stderr_bytes", p->stderr_capture.bytes}, {"stderr_dropped", p->stderr_capture.dropped},
                    {"strays_killed", p->strays_killed}};
  }
  if (!c.candidate_gpu.empty() && capture.contains("candidate")) capture["candidate"]["gpu"] = c.candidate_gpu;
  // Where each ran when not on this machine (a Slurm job and its node).
  if (capture.contains("candidate") && ran_elsewhere(c.candidate_placement)) {
    capture["candidate"]["placement"] = to_string(c.candidate_placement);
    capture["candidate"]["containment"] = c.candidate_containment;
    capture["candidate"]["queue_s"] = c.candidate_queue_s;
  }
  if (capture.contains("reference") && ran_elsewhere(c.reference_placement)) {
    capture["reference"]["placement"] = to_string(c.reference_placement);
  }
  // What the scheduler's accounting recorded of each one's job.
  if (capture.contains("candidate") && c.candidate_accounting) capture["candidate"]["accounting"] = accounting_to_json(*c.candidate_accounting);
  if (capture.contains("reference") && c.reference_accounting) capture["reference"]["accounting"] = accounting_to_json(*c.reference_accounting);
  return capture;
}

}  // namespace

void gate_experiment(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options, ExperimentRun& run) {
  const Manifest& m = out.manifest;
  if (!out.lock_problems.empty()) {
    out.gate_result.verdict = Verdict::red;
    out.gate_result.failure = {FailureKind::lock, FailureWho::none, {}, {}, "", out.gate_unlocked ? "unlocked" : "changed", ""};
    out.gate_result.reason = fmt::format("gate '{}' does not match {} ({}); no case ran", m.gate, options.store.lock_rel(),
                                         out.lock_problems.front());
    return;
  }
  GateRunOptions gate_options;
  gate_options.work_dir = out.work_dir;
  gate_options.profile = options.profile;
  gate_options.seed = out.seed;
  gate_options.jobs = options.jobs;
  gate_options.sandbox = options.sandbox;
  gate_options.private_dir = run.runs_dir;
  gate_options.gpus = options.gpus;
  gate_options.executor = &run.executor;
  bool runnable = candidate_runnable(out, ledger, options, run, gate_options);
  if (runnable) runnable = trusted_arm_built(out, ledger, options, run);
  gate_options.reference = out.reference_arm;
  gate_options.candidate = out.candidate_arm;
  const auto progress_file = out.work_dir / "progress.jsonl";
  gate_options.progress = [&out, &options, progress_file](const RunProgress& p) {
    RunProgress q = p;
    q.experiment_id = out.experiment_id;
    append_run_progress(progress_file, q);
    if (options.on_progress) options.on_progress(q);
  };
  if (runnable) {
    RunProgress start{out.experiment_id, "gate", "start", 0, run.cases.size(), 0, 0, "", "", "", 0, -1};
    gate_options.progress(start);
    out.gate_result = run_gate(*out.gate, run.cases, out.candidate_params, gate_options);
    RunProgress end{out.experiment_id, "gate", "end", out.gate_result.cases.size(), run.cases.size(), 0, 0, "", "",
                    to_string(out.gate_result.verdict), out.gate_result.wall_s, -1};
    gate_options.progress(end);
  }
  gate_options.progress = nullptr;  // the bench's reference runs are told by the bench's own events
  run.reference_options = gate_options;
  if (runnable && !options.store.worktree) check_export_after_gate(out, ledger, options);
}

void record_gate_experiment(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options, ExperimentRun& run) {
  GateRunRecord record{out.manifest.gate, out.gate_sha256, out.lock_problems, options.profile, out.seed, run.started_at,
                       &out.gate_result, provenance_json(out.provenance).dump(), out.sandbox.text(), {}};
  for (const auto& c : out.gate_result.cases) record.output_capture.push_back(output_capture(c));
  // Kept in the run folder first: a held write lock or a crash while
  // waiting for it loses nothing (`densefeed ledger recover` records it).
  const auto pending = write_pending_gate_run(out.work_dir, out.experiment_id, record, ledger);
  try {
    run.gate_run_id = ledger.record_gate_run(out.experiment_id, record);
  } catch (const LedgerBusy& e) {
    throw LedgerBusy(fmt::format("{}; the gate's results of experiment {} are kept in {}: `densefeed ledger recover` records "
                                 "them once the lock is free", e.what(), out.experiment_id, pending.string()));
  }
  std::error_code pending_ec;
  std::filesystem::remove(pending, pending_ec);
  out.verdict = out.gate_result.verdict;
}

}  // namespace densefeed
