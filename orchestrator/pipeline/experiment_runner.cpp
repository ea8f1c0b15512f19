#include "experiment_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "pending_results.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error.h"
#include "export_verify.h"
#include "gate_lock.h"
#include "heartbeat.h"
#include "ledger.h"
#include "revision.h"
#include "revision_build.h"
#include "trace_report.h"
#include "executor.h"
#include "slurm_executor.h"
#include "untrusted_launch.h"
#include "sha256.h"
#include "command_template.h"
#include "trusted_arm.h"
#include "arms.h"

namespace densefeed {
namespace {

// The trusted files of a gate, relative to the project: its file, the lock,
// what it freezes.
std::vector<std::string> trusted_files(const GateStore& store, const std::string& gate_name, const GateSpec* gate) {
  std::vector<std::string> files = {store.gate_rel(gate_name), store.lock_rel()};
  if (gate) files.insert(files.end(), gate->freezes.begin(), gate->freezes.end());
  return files;
}

bool uses_python(const Manifest& m, const GateSpec& gate) {
  if (is_python_command(gate.reference_command) || is_python_command(gate.candidate_command)) return true;
  if (gate.bench.driver && is_python_command(gate.bench.driver->command)) return true;
  for (const auto* section : {&m.trace, &m.acceptance}) {
    if (!section->is_null() && is_python_command((*section)["command"].get<std::vector<std::string>>())) return true;
  }
  return false;
}

}  // namespace

ExperimentOutcome prepare_experiment(Manifest manifest, const RunOptions& options) {
  ExperimentOutcome out;
  out.profile = options.profile;
  out.manifest = std::move(manifest);
  const Manifest& m = out.manifest;
  const GateStore& store = options.store;
  const LockTable lock = read_lock(store);
  const std::string gate_rel = store.gate_rel(m.gate);
  out.gate_sha256 = sha256_file(store.path(gate_rel));
  // The gate file is checked against the lock before it is parsed: an edited
  // gate is never trusted, not even to list its parameters.
  out.lock_problems = check_locked_file(store, lock, gate_rel);
  out.gate_unlocked = !lock.count(gate_rel);
  // A gate nobody could lock (it does not validate) is bad input, not a red
  // that asks a person to lock what cannot be locked: parsed for its errors
  // only, never trusted.
  if (out.gate_unlocked) load_gate(store, m.gate);
  // A person re-locked but did not commit the lock on the trusted ref: say so.
  if (!out.lock_problems.empty() && !store.worktree &&
      !worktree_differences(options.project, store, {store.lock_rel()}).empty()) {
    out.lock_problems.push_back(fmt::format("the project folder's {} differs from the trusted ref's ({}): if a person re-locked, "
                                            "commit {} on {} so that runs use it",
                                            store.lock_rel(), store.describe(), store.lock_rel(), store.ref));
  }
  std::filesystem::path python;
  if (out.lock_problems.empty()) {
    out.gate = load_gate(store, m.gate);
    out.lock_problems = check_frozen_files(store, lock, *out.gate);
    for (const auto& f : out.gate->freezes) out.gate_unlocked = out.gate_unlocked || !lock.count(f);
    out.candidate_params = resolve_params(m, "candidate", m.candidate, *out.gate);
    out.base_params = resolve_params(m, "base", m.base, *out.gate);
    out.gate->profile_cases(options.profile);  // an unknown profile is bad input now, not after recording
    // A case that needs more GPUs than this run holds, before anything is recorded.
    if (executor().assigns_gpus()) require_gpus(*out.gate, out.gate->profile_cases(options.profile), options.gpus);
    if (uses_python(m, *out.gate)) python = harness_python(options.project);
  } else {
    out.candidate_params = m.candidate.params;
    out.base_params = m.base.params;
  }
  // The reference's and driver's interpreter, import path and programs: the
  // trusted ref's only (trusted_arm.h), refused now when they would be the worktree's.
  out.reference_arm = out.gate && out.lock_problems.empty() ? trusted_arm(*out.gate, options.project, store, python)
                                                            : reference_context(options.project, store, python, {});
  out.candidate_arm = worktree_context(options.project, store, python);
  // Compile caches: one per revision under test (arm_context.h).
  out.reference_arm.cache_dir = options.workspace.caches() / (store.worktree || store.commit.empty() ? std::string("trusted-worktree")
                                                                                                      : "trusted-" + store.commit.substr(0, 12));
  // The WORKTREE arms' caches are keyed by the experiment (run_experiment), once it has an id.
  out.base_arm = out.candidate_arm;
  out.provenance = read_provenance(options.project, store, out.gate ? &*out.gate : nullptr, &out.reference_arm,
                                   &out.candidate_arm, out.candidate_params);
  out.seed = options.seed ? *options.seed : (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();

  // Revisions: resolved to commits now, so that a bad one is bad input.
  const auto& dir = options.project.dir;
  out.worktree_dirty = worktree_dirty(dir);
  const std::string head = head_commit(dir);
  auto resolve_arm = [&](const char* field, const Arm& arm) {
    if (arm.revision == kWorktree) return head;
    try {
      return resolve_revision(dir, arm.revision);
    } catch (const std::runtime_error& e) {
      m.doc.fail(std::string("/") + field + "/revision", e.what());
    }
  };
  out.candidate_sha = resolve_arm("candidate", m.candidate);
  out.base_sha = resolve_arm("base", m.base);
  // The code an arm runs: its commit, or the checkout when WORKTREE has
  // uncommitted changes (a clean WORKTREE is HEAD, whatever it is called).
  const auto code_of = [&](const Arm& arm, const std::string& sha) {
    return arm.revision == kWorktree && out.worktree_dirty ? std::string(kWorktree) : sha;
  };
  out.base_origin = judge_base(dir, m.base.revision, out.base_sha, out.worktree_dirty, store.worktree ? std::string() : store.commit);
  if (out.gate && code_of(m.candidate, out.candidate_sha) == code_of(m.base, out.base_sha) &&
      out.candidate_params == out.base_params) {
    m.doc.fail("/base", "the base is the candidate (same revision and parameters): that only measures noise; "
                        "give the base another revision or parameters");
  }
  // The trace and acceptance commands take the arms' parameters: a
  // placeholder the gate does not declare is bad input now, not a failure later.
  for (const char* section : {"trace", "acceptance"}) {
    const auto& v = std::string(section) == "trace" ? m.trace : m.acceptance;
    if (v.is_null() || !out.gate) continue;
    try {
      for (const auto* params : {&out.candidate_params, &out.base_params}) {
        arm_command(v["command"].get<std::vector<std::string>>(), {nlohmann::ordered_json::object(), *params, out.seed, "OUT"},
                    out.candidate_arm);
      }
    } catch (const std::invalid_argument& e) {
      m.doc.fail(std::string("/") + section + "/command", e.what());
    }
  }
  if (!m.trace.is_null()) out.trace_checks = parse_trace_checks(m.doc, "/trace/checks");
  return out;
}

std::int64_t record_prepared(Ledger& ledger, ExperimentOutcome& prepared, ExperimentEvent first, const std::string& owner) {
  if (prepared.base_origin.kind == BaseOriginKind::agent_commits || prepared.base_origin.kind == BaseOriginKind::trusted_history) {
    credit_promoted(prepared.base_origin, ledger.promoted_candidate_shas());
  }
  return ledger.record_experiment({&prepared.manifest, prepared.candidate_params, prepared.base_params, prepared.candidate_sha,
                                   prepared.base_sha, prepared.worktree_dirty, prepared.base_origin},
                                  first, owner);
}

ExperimentOutcome run_experiment(const std::filesystem::path& manifest_path, const RunOptions& options) {
  // Everything that can be rejected as bad input is checked before the
  // ledger is opened, so a rejected manifest leaves it as it was.
  ExperimentOutcome out = prepare_experiment(load_manifest(manifest_path, options.store, options.project), options);
  // Fail closed, before anything is recorded or run (exit 3).
  require_sandbox(options.sandbox);
  Ledger ledger(options.workspace.ledger);
  ledger.recover_dead_owners();
  out.experiment_id = record_prepared(ledger, out, ExperimentEvent::started, "run");
  // A WORKTREE arm's compile cache: its own, per experiment and arm (the
  // worktree changes between experiments; the candidate and the base never
  // share one). A revision's is keyed by its build and arm where it is built.
  out.candidate_arm.cache_dir = arm_cache_dir(options.workspace, fmt::format("worktree-{}", out.experiment_id), "candidate");
  out.base_arm.cache_dir = arm_cache_dir(options.workspace, fmt::format("worktree-{}", out.experiment_id), "base");
  {
    // Beaten while it runs, so that a worker of another host can tell when this run died.
    const Heartbeat heartbeat(options.workspace.ledger, ledger.heartbeat_of(out.experiment_id), ledger.heartbeat_interval_s());
    // `densefeed cancel ID` of this run: every launch ends as cancelled
    // (executor.h request_cancel), here as under a worker.
    std::atomic<bool> done{false};
    std::thread watcher([&] {
      try {
        const Ledger reader(options.workspace.ledger, Ledger::Mode::read_only);
        while (!done) {
          if (reader.state(out.experiment_id) == ExperimentState::cancel_requested) request_cancel();
          std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
      } catch (const std::exception&) {
        // The reader is a convenience: without it a cancel waits for the run's end.
      }
    });
    try {
      execute_experiment(out, ledger, options);
    } catch (const std::exception& e) {
      done = true;
      watcher.join();
      // Densefeed's own failure (a scheduler that refused a job, a folder it
      // cannot write): the experiment says so, not "started" until a worker
      // finds its owner dead.
      try {
        ledger.record_event(out.experiment_id, ExperimentEvent::interrupted, "run", std::string("densefeed failed: ") + e.what());
      } catch (const std::exception&) {
      }
      throw;
    }
    done = true;
    watcher.join();
  }
  if (cancel_requested()) {
    ledger.record_event(out.experiment_id, ExperimentEvent::cancelled, "run", "cancelled while running");
    out.record = ledger.record(out.experiment_id);
    return out;
  }
  ledger.record_finished(out.experiment_id, "run");
  out.record = ledger.record(out.experiment_id);
  return out;
}

void execute_experiment(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  // Its jobs are found by name (densefeed cancel, a starting worker).
  executor().set_job_context(slurm_experiment_prefix(options.workspace.ledger, out.experiment_id),
                             options.workspace.runs() / std::to_string(out.experiment_id) / "slurm-jobs");
  // A write waits for another writer at least as long as a harness may run.
  if (out.gate) ledger.set_lock_wait(std::max(60.0, out.gate->timeout_s));
  const Manifest& m = out.manifest;
  std::vector<Case> cases;
  if (out.gate) cases = out.gate->profile_cases(options.profile);
  // Every benchmarked case is gated in the same run, whatever the profile:
  // a benchmark's outputs are only ever checked against this run's reference.
  if (out.gate && options.bench) {
    for (const auto& b : out.gate->bench.cases) {
      if (std::none_of(cases.begin(), cases.end(), [&](const Case& c) { return c.label == b.label; })) cases.push_back(b);
    }
  }
  // Keyed on the ledger file, so two ledgers in one folder never share runs.
  out.work_dir = options.workspace.runs() / std::to_string(out.experiment_id);
  const std::string started_at = utc_now();
  out.sandbox = require_sandbox(options.sandbox);
  // The workspace this run writes (--ledger may put it outside the project):
  // hidden from every arm's sandbox wherever an arm's tree holds it.
  for (auto* arm : {&out.candidate_arm, &out.base_arm}) {
    for (const auto& h : workspace_hidden(options.workspace)) arm->hidden.push_back(h);
  }
  // Every run's folder, with every reference's outputs: hidden from
  // sandboxed commands, so that no candidate can copy a reference's answer.
  const auto runs_dir = out.work_dir.parent_path();
  std::vector<std::filesystem::path> revision_dirs;  // revision builds the sandbox must still show
  // How the gate ran its reference: the bench runs it the same way for a
  // driver's other input sets (BenchOptions::references).
  std::optional<GateRunOptions> reference_options;

  if (!out.lock_problems.empty()) {
    out.gate_result.verdict = Verdict::red;
    out.gate_result.failure = {FailureKind::lock, FailureWho::none, {}, {}, "", out.gate_unlocked ? "unlocked" : "changed", ""};
    out.gate_result.reason = fmt::format("gate '{}' does not match {} ({}); no case ran", m.gate, options.store.lock_rel(),
                                         out.lock_problems.front());
  } else {
    GateRunOptions gate_options;
    gate_options.work_dir = out.work_dir;
    gate_options.profile = options.profile;
    gate_options.seed = out.seed;
    gate_options.jobs = options.jobs;
    gate_options.sandbox = options.sandbox;
    gate_options.private_dir = runs_dir;
    gate_options.gpus = options.gpus;
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
    } else {
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
        runnable = false;
        out.gate_result.verdict = Verdict::red;
        out.gate_result.failure = {history_error.empty() ? FailureKind::lock : FailureKind::infrastructure, FailureWho::candidate,
                                   {}, {}, "", history_error.empty() ? "own_commits" : "history", fmt::format("{}", fmt::join(changed, " "))};
        out.gate_result.reason =
            history_error.empty()
                ? fmt::format("the candidate revision {} changes frozen files in its own commits: {}; no case ran",
                              out.candidate_sha.substr(0, 12), fmt::join(changed, ", "))
                : fmt::format("the candidate revision cannot be judged: {}; no case ran", history_error);
      } else {
        const RevisionBuild b = build_revision(*out.gate, options.project, out.candidate_sha, options.workspace, options.sandbox);
        for (const auto& e : b.tampered) ledger.record_tamper(e);
        revision_dirs.push_back(b.src.parent_path());
        gate_options.sandbox_readable = revision_dirs;
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
        out.candidate_bin = b.bin;
        out.provenance = read_provenance(options.project, options.store, &*out.gate, &out.reference_arm, &out.candidate_arm,
                                         out.candidate_params);
      }
    }
    // The reference and the driver as the trusted ref's build (trusted_arm.h).
    // Once the candidate is known to be runnable: a red before any case
    // costs no build.
    bool trusted_built = false;
    std::vector<TamperEvent> trusted_tampered;
    const std::string problem = runnable ? build_trusted_arm(out.reference_arm, *out.gate, options.project, options.store,
                                                             options.workspace, options.sandbox, &trusted_built, &trusted_tampered)
                                         : "";
    for (const auto& e : trusted_tampered) ledger.record_tamper(e);
    if (!problem.empty()) {
      runnable = false;
      out.gate_result.verdict = Verdict::error;
      out.gate_result.failure = {FailureKind::infrastructure, FailureWho::reference, {}, {}, "", "trusted_build", problem};
      out.gate_result.reason = problem + "; no case ran";
    } else if (trusted_built) {
      out.provenance = read_provenance(options.project, options.store, &*out.gate, &out.reference_arm, &out.candidate_arm,
                                       out.candidate_params);
    }
    gate_options.reference = out.reference_arm;
    gate_options.candidate = out.candidate_arm;
    if (runnable) out.gate_result = run_gate(*out.gate, cases, out.candidate_params, gate_options);
    reference_options = gate_options;
    // The export was checked before the run (open_gate_store); a shell of
    // the agent's user could change it while the reference read it (the
    // hostile trial swapped the reference after the check and put nothing
    // back). Checked again once the gate ran: a difference is a tamper event
    // and the gate stage an error, never a verdict. A swap put back before
    // this check is beyond what the agent's own user can be kept from
    // (densefeed as a service of its own user, issue 28).
    if (runnable && !options.store.worktree) {
      const ExportCheck after = verify_export(options.project.repo_top, options.project.prefix, options.store.commit, options.store.root);
      if (!after.tampered.empty()) {
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
    }
  }
  GateRunRecord record{m.gate, out.gate_sha256, out.lock_problems, options.profile, out.seed, started_at, &out.gate_result,
                       provenance_json(out.provenance).dump(), out.sandbox.text(), {}};
  for (const auto& c : out.gate_result.cases) {
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
    if (capture.contains("candidate") && !c.candidate_placement.empty() && c.candidate_placement != "local") {
      capture["candidate"]["placement"] = c.candidate_placement;
      capture["candidate"]["containment"] = c.candidate_containment;
      capture["candidate"]["queue_s"] = c.candidate_queue_s;
    }
    if (capture.contains("reference") && !c.reference_placement.empty() && c.reference_placement != "local") {
      capture["reference"]["placement"] = c.reference_placement;
    }
    record.output_capture.push_back(capture);
  }
  // Kept in the run folder first: a held write lock or a crash while
  // waiting for it loses nothing (`densefeed ledger recover` records it).
  const auto pending = write_pending_gate_run(out.work_dir, out.experiment_id, record, ledger);
  std::int64_t gate_run_id = 0;
  try {
    gate_run_id = ledger.record_gate_run(out.experiment_id, record);
  } catch (const LedgerBusy& e) {
    throw LedgerBusy(fmt::format("{}; the gate's results of experiment {} are kept in {}: `densefeed ledger recover` records "
                                 "them once the lock is free", e.what(), out.experiment_id, pending.string()));
  }
  std::error_code pending_ec;
  std::filesystem::remove(pending, pending_ec);
  out.verdict = out.gate_result.verdict;

  const auto skipped = [&](const char* stage, const std::string& why) {
    StageOutcome o;
    o.stage = stage;
    o.verdict = StageVerdict::skipped;
    o.reason = why;
    ledger.record_stage(out.experiment_id, o);
  };
  if (out.verdict != Verdict::green) {
    out.bench_skipped = "the gate is not green: a speedup is never measured on a red gate";
  } else if (!options.bench) {
    out.bench_skipped = "--no-bench";
  } else if (out.gate->bench.cases.empty()) {
    out.bench_skipped = "the gate declares no bench cases";
  } else {
    out.environment = collect_environment();
    BenchOptions bench_options;
    bench_options.work_dir = out.work_dir;
    bench_options.seed = out.seed;
    bench_options.candidate = out.candidate_arm;
    bench_options.base = out.base_arm;
    bench_options.noise_floor = ledger.noise_floors(m.gate, out.environment.host);
    bench_options.predicted_speedup = m.predicted_speedup;
    bench_options.sandbox = options.sandbox;
    bench_options.agent_base = is_agent_base(out.base_origin.kind);
    bench_options.private_dir = runs_dir;
    bench_options.gpu = options.gpus.empty() ? std::string() : options.gpus.front();
    for (const auto& c : out.gate_result.cases) bench_options.reference_out[c.gate_case.label] = c.reference_out;
    bench_options.trusted = out.reference_arm;
    if (reference_options) {
      GateRunOptions ro = *reference_options;
      ro.work_dir = out.work_dir / "bench-references";
      const GateSpec* gate = &*out.gate;
      bench_options.references = [ro, gate](const Case& c, const std::vector<std::uint64_t>& seeds) {
        return run_references(*gate, c, seeds, ro);
      };
    }
    {
      // The ceilings of what the arms can reach: the CPU and the GPU the
      // benchmark holds (by index into nvidia-smi's list, or by UUID), or,
      // when it holds none (no --gpus: CUDA_VISIBLE_DEVICES is left as
      // found), the CPU and every GPU of the machine. Each figure is the
      // largest of theirs: an arm's process can use any of them, so its
      // achieved rate is bounded by the fastest, never by the CPU's alone
      // (a GPU kernel against a CPU's memcpy rate is not implausible).
      std::vector<std::string> devices = {"cpu"};
      const auto& gpus = out.environment.gpus;
      if (!bench_options.gpu.empty()) {
        std::string device = bench_options.gpu;
        if (std::all_of(device.begin(), device.end(), ::isdigit) && std::stoul(device) < gpus.size()) {
          device = gpus[std::stoul(device)].value("uuid", device);
        }
        devices.push_back(device);
      } else {
        for (const auto& g : gpus) {
          if (g.contains("uuid")) devices.push_back(g["uuid"].get<std::string>());
        }
      }
      std::vector<MachineCeilings> measured;
      for (const auto& d : devices) {
        if (auto c = ledger.latest_ceilings(out.environment.host, d)) measured.push_back(std::move(*c));
      }
      if (!measured.empty()) bench_options.ceilings = fastest_ceilings(measured);
    }
    if (m.base.revision != kWorktree) {
      const RevisionBuild b = build_revision(*out.gate, options.project, out.base_sha, options.workspace, options.sandbox);
        for (const auto& e : b.tampered) ledger.record_tamper(e);
      revision_dirs.push_back(b.src.parent_path());
      const auto hidden = out.base_arm.hidden;
      out.base_arm = revision_context(options.project, options.store, b, out.base_arm.python);
      out.base_arm.hidden = hidden;
      out.base_arm.cache_dir = arm_cache_dir(options.workspace, b.src.parent_path().filename().string(), "base");
      bench_options.base = out.base_arm;
      if (!b.ok) {
        // Never measure something else in the base's place.
        out.bench = BenchResult{Verdict::error,
                                fmt::format("the base's build at {} failed, so nothing was measured: {}", out.base_sha.substr(0, 12),
                                            b.failure),
                                {FailureKind::infrastructure, FailureWho::base, {}, {}, "", "build", ""}, {}, 0, out.sandbox};
      }
    }
    bench_options.sandbox_readable = revision_dirs;
    if (!out.bench) out.bench = run_bench(*out.gate, out.base_params, out.candidate_params, bench_options);
    // Recorded whatever its verdict: a red or errored benchmark is a row
    // (without speedups), never an absence.
    ledger.record_bench(out.experiment_id, gate_run_id, *out.bench, out.environment, out.candidate_sha, out.base_sha,
                        out.worktree_dirty);
    out.verdict = worst(out.verdict, out.bench->verdict);
  }
  if (!out.bench) skipped("bench", out.bench_skipped);
  // The trace stage: where the time goes, for a green gate only.
  if (m.trace.is_null()) {
    out.trace_skipped = "the manifest has no trace section";
    skipped("trace", out.trace_skipped);
  } else if (out.gate_result.verdict != Verdict::green) {
    out.trace_skipped = "the gate is not green";
    skipped("trace", out.trace_skipped);
  } else {
    TraceStageOptions trace_options{out.work_dir, out.seed, out.candidate_arm, out.base_arm};
    trace_options.sandbox = options.sandbox;
    trace_options.limits = out.gate->limits;
    trace_options.gpus = out.gate->gpus;
    if (m.base.revision != kWorktree) {
      const RevisionBuild b = build_revision(*out.gate, options.project, out.base_sha, options.workspace, options.sandbox);
        for (const auto& e : b.tampered) ledger.record_tamper(e);
      revision_dirs.push_back(b.src.parent_path());
      trace_options.base = revision_context(options.project, options.store, b, out.base_arm.python);
      trace_options.base.hidden = out.base_arm.hidden;
      trace_options.base.cache_dir = arm_cache_dir(options.workspace, b.src.parent_path().filename().string(), "base");
    }
    trace_options.readable = revision_dirs;
    out.trace = run_trace_stage(m.trace, out.trace_checks, out.candidate_params, out.base_params, trace_options);
    std::vector<TraceFindingRecord> findings;
    for (const auto& arm : out.trace->arms) {
      if (!arm.ran) continue;
      for (std::size_t i = 0; i < arm.report.results.size(); ++i) {
        const auto& r = arm.report.results[i];
        TraceFindingRecord f;
        f.arm = arm.arm;
        f.check_index = static_cast<int>(i);
        f.kind = std::string(to_string(r.check.kind));
        f.check = m.trace["checks"][i];
        f.passed = r.passed;
        f.value = r.value;
        f.bound = r.check.bound;
        f.details = trace_check_json(r);
        f.trace_file = arm.trace_file.string();
        findings.push_back(std::move(f));
      }
    }
    StageOutcome stage;
    stage.stage = "trace";
    stage.verdict = stage_verdict_from(to_string(out.trace->verdict));
    stage.failure = out.trace->failure;
    if (out.trace->verdict != Verdict::green && !stage.failure.failed()) stage.failure.kind = FailureKind::unknown;
    stage.reason = out.trace->reason;
    stage.wall_s = out.trace->wall_s;
    ledger.record_trace_findings(out.experiment_id, gate_run_id, findings, stage);
    out.verdict = worst(out.verdict, out.trace->verdict);
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace densefeed
