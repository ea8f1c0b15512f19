// The bench step of execute_experiment (experiment_steps.h): for a green
// gate, the options of run_bench (the machine's ceilings, the references of
// a driver's input sets), the base's build, run_bench, its row.
#include "experiment_steps.h"

#include <algorithm>

#include <fmt/format.h>

#include "arms.h"
#include "ledger.h"
#include "revision.h"
#include "revision_build.h"

namespace densefeed {
namespace {

// The ceilings of what the arms can reach: the CPU and the GPU the
// benchmark holds (by index into nvidia-smi's list, or by UUID), or, when
// it holds none (no --gpus: CUDA_VISIBLE_DEVICES is left as found), the CPU
// and every GPU of the machine. Each figure is the largest of theirs: an
// arm's process can use any of them, so its achieved rate is bounded by the
// fastest, never by the CPU's alone (a GPU kernel against a CPU's memcpy
// rate is not implausible). Unset when none was measured.
std::optional<Ceilings> bench_ceilings(const ExperimentOutcome& out, Ledger& ledger, const std::string& gpu) {
  std::vector<std::string> devices = {"cpu"};
  const auto& gpus = out.environment.gpus;
  if (!gpu.empty()) {
    std::string device = gpu;
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
  if (measured.empty()) return std::nullopt;
  return fastest_ceilings(measured);
}

// run_bench's options for this run (the base's arm as it is before a
// revision base is built).
BenchOptions bench_options_of(const ExperimentOutcome& out, Ledger& ledger, const RunOptions& options, const ExperimentRun& run) {
  const Manifest& m = out.manifest;
  BenchOptions bench_options;
  bench_options.work_dir = out.work_dir;
  bench_options.seed = out.seed;
  bench_options.candidate = out.candidate_arm;
  bench_options.base = out.base_arm;
  bench_options.noise_floor = ledger.noise_floors(m.gate, out.environment.host);
  bench_options.predicted_speedup = m.predicted_speedup;
  bench_options.sandbox = options.sandbox;
  bench_options.agent_base = is_agent_base(out.base_origin.kind);
  bench_options.private_dir = run.runs_dir;
  bench_options.gpu = options.gpus.empty() ? std::string() : options.gpus.front();
  bench_options.executor = &run.executor;
  for (const auto& c : out.gate_result.cases) bench_options.reference_out[c.gate_case.label] = c.reference_out;
  bench_options.trusted = out.reference_arm;
  if (run.reference_options) {
    GateRunOptions ro = *run.reference_options;
    ro.work_dir = out.work_dir / "bench-references";
    const GateSpec* gate = &*out.gate;
    bench_options.references = [ro, gate](const Case& c, const std::vector<std::uint64_t>& seeds, Executor* held) {
      GateRunOptions in = ro;
      if (held) in.executor = held;
      return run_references(*gate, c, seeds, in);
    };
  }
  if (auto ceilings = bench_ceilings(out, ledger, bench_options.gpu)) bench_options.ceilings = std::move(*ceilings);
  bench_options.budget_s = options.bench_budget_s;
  // Watched while it runs: the run folder's progress.jsonl (status --json), and whoever started the run.
  bench_options.progress = [file = out.work_dir / "progress.jsonl", tell = options.on_bench_progress](const BenchProgress& p) {
    append_bench_progress(file, p);
    if (tell) tell(p);
  };
  return bench_options;
}

}  // namespace

void record_skipped(Ledger& ledger, std::int64_t experiment_id, const char* stage, const std::string& why) {
  StageOutcome o;
  o.stage = stage;
  o.verdict = StageVerdict::skipped;
  o.reason = why;
  ledger.record_stage(experiment_id, o);
}

void bench_experiment(ExperimentOutcome& out, Ledger& ledger, const RunOptions& options, ExperimentRun& run) {
  const Manifest& m = out.manifest;
  if (out.verdict != Verdict::green) {
    out.bench_skipped = "the gate is not green: a speedup is never measured on a red gate";
  } else if (!options.bench) {
    out.bench_skipped = "--no-bench";
  } else if (!runs_whole_profile(options)) {
    // A green subset of the gate (a replay, a narrowing step, --case) is not
    // the frozen gate: it never gets a performance result (the trend bounds,
    // for one, need the whole row).
    out.bench_skipped = fmt::format("only {} of the gate's profile ran{}: a speedup is measured only where the whole profile is green",
                                    options.cases.empty() ? "some" : "the cases --case names",
                                    options.parent_id ? fmt::format(" (a replay or narrowing step of experiment {})", *options.parent_id) : "");
  } else if (out.bench_is_noise) {
    out.bench_skipped = "the replay's --candidate-param makes the candidate the base: a benchmark of it would only measure noise";
  } else if (out.gate->bench.cases.empty()) {
    out.bench_skipped = "the gate declares no bench cases";
  } else {
    out.environment = collect_environment();
    BenchOptions bench_options = bench_options_of(out, ledger, options, run);
    if (m.base.revision != kWorktree) {
      const RevisionBuild& b = base_revision_arm(out, ledger, options, run);
      bench_options.base = out.base_arm;
      if (!b.ok) {
        // Never measure something else in the base's place.
        out.bench = BenchResult{Verdict::error,
                                fmt::format("the base's build at {} failed, so nothing was measured: {}", out.base_sha.substr(0, 12),
                                            b.failure),
                                {FailureKind::infrastructure, FailureWho::base, {}, {}, "", "build", ""}, {}, 0, out.sandbox};
      }
    }
    bench_options.sandbox_readable = run.revision_dirs;
    if (!out.bench) out.bench = run_bench(*out.gate, out.base_params, out.candidate_params, bench_options);
    // Recorded whatever its verdict: a red or errored benchmark is a row
    // (without speedups), never an absence.
    ledger.record_bench(out.experiment_id, run.gate_run_id, *out.bench, out.environment, out.candidate_sha, out.base_sha,
                        out.worktree_dirty);
    out.verdict = worst(out.verdict, out.bench->verdict);
  }
  if (!out.bench) record_skipped(ledger, out.experiment_id, "bench", out.bench_skipped);
}

}  // namespace densefeed
