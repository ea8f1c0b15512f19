#include "experiment_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
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
#include "experiment_steps.h"

namespace densefeed {
namespace {

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
  for (const auto& [k, v] : options.candidate_param_overrides.items()) manifest.candidate.params[k] = v;
  if (!options.candidate_revision.empty()) manifest.candidate.revision = options.candidate_revision;
  ExperimentOutcome out;
  out.profile = options.profile;
  out.parent_id = options.parent_id;
  out.step = options.step;
  for (const auto& f : options.cases) out.case_filter.push_back(f.text);
  out.executor = given_or_local(options.executor.get()).name();
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
    // The project's resources beneath the gate's (resources_spec.h).
    out.gate->resources = layered(options.project.resources, out.gate->resources);
    out.lock_problems = check_frozen_files(store, lock, *out.gate);
    for (const auto& f : out.gate->freezes) out.gate_unlocked = out.gate_unlocked || !lock.count(f);
    out.candidate_params = resolve_params(m, "candidate", m.candidate, *out.gate);
    out.base_params = resolve_params(m, "base", m.base, *out.gate);
    // An unknown profile, or a --case no case of it has, is bad input now, not after recording.
    filter_cases(out.gate->profile_cases(options.profile), options.cases,
                 fmt::format("profile {} of gate {}", options.profile, out.gate->name));
    // A case that needs more GPUs than this run holds, before anything is recorded.
    if (given_or_local(options.executor.get()).assigns_gpus()) require_gpus(*out.gate, out.gate->profile_cases(options.profile), options.gpus);
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
  // A replay whose --candidate-param makes it the base (the precision swap
  // of a next step: tf32 -> ieee, the base's) is a gate question, not a
  // benchmark: it runs without the bench stage.
  out.bench_is_noise = code_of(m.candidate, out.candidate_sha) == code_of(m.base, out.base_sha) && out.candidate_params == out.base_params;
  if (out.gate && out.bench_is_noise && options.candidate_param_overrides.empty()) {
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
                                   prepared.base_sha, prepared.worktree_dirty, prepared.base_origin, prepared.parent_id,
                                   prepared.step, prepared.case_filter},
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
  if (options.on_started) options.on_started(out);
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
  if (interrupt_signal() != 0) {
    // SIGTERM or SIGINT to run (a `timeout`, a Ctrl-C): every launch was
    // ended; what the stages had is recorded, and so is how it ended.
    std::string had;
    if (out.bench && !out.bench->cases.empty()) {
      const auto& c = out.bench->cases.back();
      had = fmt::format("; the bench stage had {} round{} of case {} (recorded, inconclusive)", c.base.size(),
                        c.base.size() == 1 ? "" : "s", c.bench_case.label);
    }
    ledger.record_event(out.experiment_id, ExperimentEvent::interrupted, "run",
                        fmt::format("interrupted by signal {} ({}){}", interrupt_signal(), strsignal(interrupt_signal()), had));
    out.record = ledger.record(out.experiment_id);
    return out;
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
  ExperimentRun run{given_or_local(options.executor.get()), {}, {}, {}, {}, {}, 0};
  out.executor = run.executor.name();
  // Its jobs are found by name (densefeed cancel, a starting worker).
  run.executor.set_job_context(slurm_experiment_prefix(options.workspace.ledger, out.experiment_id),
                               options.workspace.runs() / std::to_string(out.experiment_id) / "slurm-jobs");
  // A write waits for another writer at least as long as a harness may run.
  if (out.gate) ledger.set_lock_wait(std::max(60.0, out.gate->timeout_s));
  if (out.gate) {
    run.cases = filter_cases(out.gate->profile_cases(options.profile), options.cases,
                             fmt::format("profile {} of gate {}", options.profile, out.gate->name));
  }
  // Every benchmarked case is gated in the same run, whatever the profile:
  // a benchmark's outputs are only ever checked against this run's reference.
  if (out.gate && options.bench && runs_whole_profile(options)) {
    for (const auto& b : out.gate->bench.cases) {
      if (std::none_of(run.cases.begin(), run.cases.end(), [&](const Case& c) { return c.label == b.label; })) run.cases.push_back(b);
    }
  }
  // Keyed on the ledger file, so two ledgers in one folder never share runs.
  out.work_dir = options.workspace.runs() / std::to_string(out.experiment_id);
  run.started_at = utc_now();
  out.sandbox = require_sandbox(options.sandbox);
  // The workspace this run writes (--ledger may put it outside the project):
  // hidden from every arm's sandbox wherever an arm's tree holds it.
  for (auto* arm : {&out.candidate_arm, &out.base_arm}) {
    for (const auto& h : workspace_hidden(options.workspace)) arm->hidden.push_back(h);
  }
  run.runs_dir = out.work_dir.parent_path();
  gate_experiment(out, ledger, options, run);
  record_gate_experiment(out, ledger, options, run);
  // After a cancel or a signal no stage starts (run_experiment records how it ended).
  if (!cancel_requested()) bench_experiment(out, ledger, options, run);
  if (!cancel_requested() && options.trace) trace_experiment(out, ledger, options, run);
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace densefeed
