#include "experiment_runner.h"

#include <chrono>
#include <random>

#include <fmt/format.h>

#include "error.h"
#include "gate_lock.h"
#include "ledger.h"
#include "sha256.h"

namespace densefeed {

ExperimentOutcome run_experiment(const std::filesystem::path& manifest_path, const RunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  ExperimentOutcome out;
  out.profile = options.profile;

  // Everything that can be rejected as bad input is checked before the
  // ledger is opened, so a rejected manifest leaves it as it was.
  out.manifest = load_manifest(manifest_path, options.root);
  const Manifest& m = out.manifest;
  const LockTable lock = read_lock(options.root);
  const std::string gate_rel = "gates/" + m.gate + ".yaml";
  out.gate_sha256 = sha256_file(options.root / gate_rel);
  // The gate file is checked against the lock before it is parsed: an edited
  // gate is never trusted, not even to list its parameters.
  out.lock_problems = check_locked_file(options.root, lock, gate_rel);
  std::vector<Case> cases;
  if (out.lock_problems.empty()) {
    out.gate = load_gate(options.root, m.gate);
    out.lock_problems = check_frozen_files(options.root, lock, *out.gate);
    out.candidate_params = resolve_params(m, "candidate", m.candidate, *out.gate);
    out.base_params = resolve_params(m, "base", m.base, *out.gate);
    cases = out.gate->profile_cases(options.profile);
    out.provenance = read_provenance(options.root, *out.gate);
  } else {
    GateSpec unparsed;  // the edited gate is not parsed: record what git says of its file
    unparsed.name = m.gate;
    out.provenance = read_provenance(options.root, unparsed);
    out.candidate_params = m.candidate.params;
    out.base_params = m.base.params;
  }
  out.seed = options.seed ? *options.seed : (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();

  Ledger ledger(options.ledger_path);
  out.experiment_id = ledger.record_experiment({&m, out.candidate_params, out.base_params});
  // Keyed on the ledger file, so two ledgers in one folder never share runs.
  out.work_dir = options.ledger_path.parent_path() / (options.ledger_path.stem().string() + "-runs") /
                 std::to_string(out.experiment_id);
  const std::string started_at = utc_now();

  if (!out.lock_problems.empty()) {
    out.gate_result.verdict = Verdict::red;
    out.gate_result.reason = fmt::format("gate '{}' does not match gates/gates.lock ({}); no case ran", m.gate,
                                         out.lock_problems.front());
  } else {
    GateRunOptions gate_options{out.work_dir, options.profile, out.seed, options.jobs};
    out.gate_result = run_gate(*out.gate, cases, out.candidate_params, gate_options);
  }
  const std::int64_t gate_run_id = ledger.record_gate_run(
      out.experiment_id, {m.gate, out.gate_sha256, out.lock_problems, options.profile, out.seed, started_at, &out.gate_result,
                          provenance_json(out.provenance).dump()});
  out.verdict = out.gate_result.verdict;

  if (out.verdict != Verdict::green) {
    out.bench_skipped = "the gate is not green: a speedup is never measured on a red gate";
  } else if (!options.bench) {
    out.bench_skipped = "--no-bench";
  } else if (out.gate->bench.cases.empty()) {
    out.bench_skipped = "the gate declares no bench cases";
  } else {
    out.bench = run_bench(*out.gate, out.base_params, out.candidate_params, {out.work_dir, out.seed});
    if (out.bench->verdict == Verdict::green) ledger.record_bench(out.experiment_id, gate_run_id, *out.bench);
    out.verdict = worst(out.verdict, out.bench->verdict);
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace densefeed
