#include "experiment_runner.h"

#include <chrono>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error.h"
#include "gate_lock.h"
#include "ledger.h"
#include "revision.h"
#include "revision_build.h"
#include "trace_report.h"
#include "sha256.h"
#include "command_template.h"

namespace densefeed {
namespace {

std::filesystem::path builds_dir(const std::filesystem::path& ledger_path) {
  return ledger_path.parent_path() / (ledger_path.stem().string() + "-builds");
}

}  // namespace

ExperimentOutcome prepare_experiment(Manifest manifest, const RunOptions& options) {
  ExperimentOutcome out;
  out.profile = options.profile;
  out.manifest = std::move(manifest);
  const Manifest& m = out.manifest;
  const LockTable lock = read_lock(options.root);
  const std::string gate_rel = "gates/" + m.gate + ".yaml";
  out.gate_sha256 = sha256_file(options.root / gate_rel);
  // The gate file is checked against the lock before it is parsed: an edited
  // gate is never trusted, not even to list its parameters.
  out.lock_problems = check_locked_file(options.root, lock, gate_rel);
  if (out.lock_problems.empty()) {
    out.gate = load_gate(options.root, m.gate);
    out.lock_problems = check_frozen_files(options.root, lock, *out.gate);
    out.candidate_params = resolve_params(m, "candidate", m.candidate, *out.gate);
    out.base_params = resolve_params(m, "base", m.base, *out.gate);
    out.gate->profile_cases(options.profile);  // an unknown profile is bad input now, not after recording
    out.provenance = read_provenance(options.root, *out.gate);
  } else {
    GateSpec unparsed;  // the edited gate is not parsed: record what git says of its file
    unparsed.name = m.gate;
    out.provenance = read_provenance(options.root, unparsed);
    out.candidate_params = m.candidate.params;
    out.base_params = m.base.params;
  }
  out.seed = options.seed ? *options.seed : (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();

  // Revisions: resolved to commits now, so that a bad one is bad input.
  out.worktree_dirty = worktree_dirty(options.root);
  const std::string head = head_commit(options.root);
  auto resolve_arm = [&](const char* field, const Arm& arm) {
    if (arm.revision == kWorktree) return head;
    if (out.gate && !out.gate->build) {
      m.doc.fail(std::string("/") + field + "/revision",
                 fmt::format("gate '{}' has no build commands, so its arms must be WORKTREE", m.gate));
    }
    try {
      return resolve_revision(options.root, arm.revision);
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
      render_command(v["command"].get<std::vector<std::string>>(),
                     {nlohmann::ordered_json::object(), out.candidate_params, out.seed, "OUT"});
      render_command(v["command"].get<std::vector<std::string>>(), {nlohmann::ordered_json::object(), out.base_params, out.seed, "OUT"});
    } catch (const std::invalid_argument& e) {
      m.doc.fail(std::string("/") + section + "/command", e.what());
    }
  }
  if (!m.trace.is_null()) out.trace_checks = parse_trace_checks(m.doc, "/trace/checks");
  return out;
}

std::int64_t record_prepared(Ledger& ledger, const ExperimentOutcome& prepared, ExperimentEvent first, const std::string& owner) {
  return ledger.record_experiment({&prepared.manifest, prepared.candidate_params, prepared.base_params, prepared.candidate_sha,
                                   prepared.base_sha, prepared.worktree_dirty},
                                  first, owner);
}

ExperimentOutcome run_experiment(const std::filesystem::path& manifest_path, const RunOptions& options) {
  // Everything that can be rejected as bad input is checked before the
  // ledger is opened, so a rejected manifest leaves it as it was.
  ExperimentOutcome out = prepare_experiment(load_manifest(manifest_path, options.root), options);
  Ledger ledger(options.ledger_path);
  ledger.recover_dead_owners();
  out.experiment_id = record_prepared(ledger, out, ExperimentEvent::started, "run");
  execute_experiment(out, ledger, options);
  ledger.record_event(out.experiment_id, ExperimentEvent::finished, "run");
  return out;
}

void execute_experiment(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const Manifest& m = out.manifest;
  std::vector<Case> cases;
  if (out.gate) cases = out.gate->profile_cases(options.profile);
  // Keyed on the ledger file, so two ledgers in one folder never share runs.
  out.work_dir = options.ledger_path.parent_path() / (options.ledger_path.stem().string() + "-runs") /
                 std::to_string(out.experiment_id);
  const std::string started_at = utc_now();
  out.sandbox = sandbox_status(options.sandbox);
  // Every run's folder, with every reference's outputs: hidden from
  // sandboxed commands, so that no candidate can copy a reference's answer.
  const auto runs_dir = out.work_dir.parent_path();
  std::vector<std::filesystem::path> revision_dirs;  // revision builds the sandbox must still show

  if (!out.lock_problems.empty()) {
    out.gate_result.verdict = Verdict::red;
    out.gate_result.reason = fmt::format("gate '{}' does not match gates/gates.lock ({}); no case ran", m.gate,
                                         out.lock_problems.front());
  } else {
    GateRunOptions gate_options{out.work_dir, options.profile, out.seed, options.jobs, {}, options.sandbox, runs_dir, {}, options.gpus};
    bool runnable = true;
    if (m.candidate.revision != kWorktree) {
      // Gates and frozen files come from densefeed's checkout; a candidate
      // commit whose copies of them differ is red before it is even built.
      std::vector<std::string> trusted = out.gate->freezes;
      trusted.push_back("gates/" + m.gate + ".yaml");
      trusted.push_back("gates/gates.lock");
      const auto changed = changed_at_revision(options.root, out.candidate_sha, trusted);
      if (!changed.empty()) {
        runnable = false;
        out.gate_result.verdict = Verdict::red;
        out.gate_result.reason = fmt::format("the candidate revision {} changes frozen files: {}; no case ran",
                                             out.candidate_sha.substr(0, 12), fmt::join(changed, ", "));
      } else {
        const RevisionBuild b =
            build_revision(*out.gate, options.root, out.candidate_sha, builds_dir(options.ledger_path), options.sandbox);
        revision_dirs.push_back(b.src.parent_path());
        gate_options.sandbox_readable = revision_dirs;
        if (!b.ok) {
          runnable = false;
          out.gate_result.verdict = Verdict::red;
          out.gate_result.reason = fmt::format("the candidate's build at {} failed: {}", out.candidate_sha.substr(0, 12), b.failure);
        }
        gate_options.candidate_exe_dir = b.bin;
        out.candidate_bin = b.bin;
      }
    }
    if (runnable) out.gate_result = run_gate(*out.gate, cases, out.candidate_params, gate_options);
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
    record.output_capture.push_back(capture);
  }
  const std::int64_t gate_run_id = ledger.record_gate_run(out.experiment_id, record);
  out.verdict = out.gate_result.verdict;

  if (out.verdict != Verdict::green) {
    out.bench_skipped = "the gate is not green: a speedup is never measured on a red gate";
  } else if (!options.bench) {
    out.bench_skipped = "--no-bench";
  } else if (out.gate->bench.cases.empty()) {
    out.bench_skipped = "the gate declares no bench cases";
  } else {
    out.environment = collect_environment();
    BenchOptions bench_options{out.work_dir, out.seed, {}, out.candidate_bin,
                               ledger.noise_floors(m.gate, out.environment.host), m.predicted_speedup, std::nullopt, {},
                               options.sandbox, runs_dir, {}, options.gpus.empty() ? std::string() : options.gpus.front()};
    for (const auto& c : out.gate_result.cases) bench_options.reference_out[c.gate_case.label] = c.reference_out;
    if (m.base.revision != kWorktree) {
      const RevisionBuild b = build_revision(*out.gate, options.root, out.base_sha, builds_dir(options.ledger_path), options.sandbox);
      revision_dirs.push_back(b.src.parent_path());
      bench_options.base_exe_dir = b.bin;
      if (!b.ok) {
        // Never measure something else in the base's place.
        out.bench = BenchResult{Verdict::error, fmt::format("the base's build at {} failed, so nothing was measured: {}",
                                                            out.base_sha.substr(0, 12), b.failure), {}, 0, out.sandbox};
      }
    }
    bench_options.sandbox_readable = revision_dirs;
    if (!out.bench) out.bench = run_bench(*out.gate, out.base_params, out.candidate_params, bench_options);
    if (out.bench->verdict == Verdict::green) {
      ledger.record_bench(out.experiment_id, gate_run_id, *out.bench, out.environment, out.candidate_sha, out.base_sha,
                          out.worktree_dirty);
    }
    out.verdict = worst(out.verdict, out.bench->verdict);
  }
  // The trace stage: where the time goes, for a green gate only.
  if (m.trace.is_null()) {
    out.trace_skipped = "the manifest has no trace section";
  } else if (out.gate_result.verdict != Verdict::green) {
    out.trace_skipped = "the gate is not green";
  } else {
    TraceStageOptions trace_options{out.work_dir, out.seed, out.candidate_bin, {}};
    if (m.base.revision != kWorktree) {
      const RevisionBuild b = build_revision(*out.gate, options.root, out.base_sha, builds_dir(options.ledger_path), options.sandbox);
      trace_options.base_exe_dir = b.bin;
    }
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
    if (!findings.empty()) ledger.record_trace_findings(out.experiment_id, gate_run_id, findings);
    out.verdict = worst(out.verdict, out.trace->verdict);
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace densefeed
