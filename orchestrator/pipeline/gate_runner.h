// The correctness gate stage: for every case of a profile, the reference and
// the candidate run as separate processes (harness protocol, DENSEFEED_MODE=
// gate) and each declared output is compared within the gate's tolerance.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arm_context.h"
#include "run_progress.h"
#include "case_grid.h"
#include "gate_spec.h"
#include "reference_run.h"
#include "process_runner.h"
#include "sandbox.h"
#include "gate_result.h"
#include "output_compare.h"
#include "tensor_compare.h"
#include "failure.h"
#include "verdict.h"

namespace densefeed {

class Executor;

struct GateRunOptions {
  std::filesystem::path work_dir;  // emptied and filled with one folder per process
  std::string profile = "quick";
  std::uint64_t seed = 0;
  int jobs = 1;  // processes at once
  ArmContext reference;  // where the reference runs from: the gate store's tree
  ArmContext candidate;  // the candidate's export or the worktree
  // Candidate commands under bwrap when it can start (sandbox.h); false:
  // --no-sandbox. The reference never runs sandboxed.
  bool sandbox = true;
  // Hidden from sandboxed commands (the ledger's runs folder, where every
  // reference's outputs lie); empty: work_dir.
  std::filesystem::path private_dir;
  // Also readable under the sandbox where /tmp or private_dir would hide
  // them: a revision's source and build folders.
  std::vector<std::filesystem::path> sandbox_readable;
  // GPUs (CUDA_VISIBLE_DEVICES values): one job thread per GPU, each job
  // seeing only its thread's GPU; empty: CPU jobs (`jobs` threads).
  std::vector<std::string> gpus;
  // What runs the stage's launches and sessions (executor.h; the run's,
  // RunOptions::executor); nullptr: this machine's. A test passes a scripted one.
  Executor* executor = nullptr;
  // Told as each process ends (phase "process": cases whose candidate ended,
  // references ended, the pace so far); empty: nobody watches. Called from
  // the stage's job threads, one call at a time.
  std::function<void(const RunProgress&)> progress;
};

// Refuses (InputError naming the gate file and `ranks`) a multi-rank case
// that needs more GPUs (ranks x the gate's gpus, at least 1 each) than
// `gpus`, the GPUs a run holds: it could never start, where a case that
// fits waits for its whole set. Nothing is checked for an empty `gpus`
// (CPU, or a scheduler that places jobs).
void require_gpus(const GateSpec& gate, const std::vector<Case>& cases, const std::vector<std::string>& gpus);

// Runs the gate's reference for case `c` once per seed in `seeds` (a bench
// case's input sets, input_sets.h), as run_gate runs it (the same command,
// case keys, executor, sessions and `jobs`), each in
// options.work_dir/reference-seed-SEED/. Returns one ReferenceRun per seed,
// in order. Throws InfraError only for densefeed's own failures.
// The case as the reference sees it (its DENSEFEED_CASE and template
// values): only the keys its command uses and those the gate's
// reference.case_keys names (cases that agree on them share one reference
// run), or the whole case when its command can name none (a session) or
// names none. Never throws.
nlohmann::ordered_json reference_case(const GateSpec& gate, const Case& c);

std::vector<ReferenceRun> run_references(const GateSpec& gate, const Case& c, const std::vector<std::uint64_t>& seeds,
                                         const GateRunOptions& options);

// Runs the cases. A reference command whose rendered argv is the same for
// several cases (it does not use the parameters they differ in) runs once and
// is shared. Throws InfraError only when densefeed cannot do its own part
// (create folders, read files it wrote).
GateResult run_gate(const GateSpec& gate, const std::vector<Case>& cases,
                    const nlohmann::ordered_json& candidate_params, const GateRunOptions& options);

}  // namespace densefeed
