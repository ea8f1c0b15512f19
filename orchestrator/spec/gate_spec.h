// A gate: the frozen correctness test of one op, read from the gate store
// (gate_store.h: the trusted ref's gates/NAME.yaml, never a candidate's) and
// validated against densefeed's installed schemas/gate.schema.json.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_statistics.h"
#include "build_spec.h"
#include "case_grid.h"
#include "gate_structure.h"
#include "param_spec.h"
#include "process_limits.h"
#include "resources_spec.h"
#include "tolerance.h"
#include "yaml_document.h"

namespace densefeed {


// A bound on how fast an output's error may grow along one case key (e.g. K,
// T, shards): the least-squares slope of log2(metric) on log2(key) over the
// cases that differ only in that key (a "row"), as error_trend.h fits it.
// A slope over max_exponent makes every case of that row red (FailureKind::trend).
struct TrendBound {
  std::string metric = "rel_l2";  // rel_l2 | max_abs
  std::string along;              // a numeric case key
  double max_exponent = 0;
  // The gate's structure gave it (gate_structure.h: along the partition
  // key, unless the gate bounds that key itself): judged only where a power
  // law fits (R^2 >= kDefaultTrendMinR2), as the printed trend lines say.
  bool by_default = false;
};
// The least R^2 of the log-log fit at which a default trend bound is judged:
// the printed trend lines' "power law" threshold (error_trend.cpp).
inline constexpr double kDefaultTrendMinR2 = 0.9;

// A named output the harnesses write as NAME.npy (or as tensor NAME of one
// .safetensors file). `dtype` is what the candidate must write,
// `reference_dtype` what the reference must write (float32, bfloat16, ...).
struct OutputSpec {
  std::string name;
  std::string dtype;
  std::string reference_dtype;
  Tolerance tolerance;           // as declared, or default_tolerance(dtype)
  bool default_tolerance = false;
  // Shape rule: one entry per dimension, each "*" (any), an integer, or a
  // "{case.NAME}" placeholder; empty when the gate does not constrain it.
  std::vector<std::string> shape;
  // Partition axis for "first failing slice": the axis, and the number of
  // equal parts as an integer or "{case.NAME}" ("" = one part per position).
  std::optional<std::size_t> partition_axis;
  std::string partition_parts;
  std::vector<TrendBound> trends;  // gate file: outputs.NAME.trend (an object or an array of them)
};

// How the benchmark stage runs: interleaved base/candidate rounds of
// `warmup` + `iters` harness iterations each, on `cases` (a subset of the
// gate's correctness cases), each arm warmed up by one call first (at most
// `max_warmup_seconds`), checked at `looks` rounds until a decision, at most
// `max_seconds_per_case` of timed rounds per case (then inconclusive).
// A frozen benchmark driver (gate file: bench.driver): trusted code from the
// gate store that loads one arm's kernel and times it itself, so the samples
// that decide a speedup are not the candidate's word. `command` is rendered in
// the trusted context ({project} = the trusted ref's export, {gate_dir}) and
// every file it names under {project} must be frozen. The arm's tree reaches
// the driver as DENSEFEED_ARM_PROJECT and the kernel as DENSEFEED_KERNEL, a
// JSON object: {"module", "function"} (Python: imported from the arm's tree)
// or {"library", "symbol"} (a shared library with a C entry point). A module
// is found under `path` of the arm's tree (DENSEFEED_KERNEL_PATH: that folder
// first, then the project's python.path); a library, a file name without '/'
// or '..', in the arm's bin folders (DENSEFEED_KERNEL_PATH: the arm's
// exe_dirs in order, where a bare argv[0] of its own commands is looked up;
// kernels/common/driver.h opens the first match). The driver writes samples.json
// and, per timed iteration, the outputs' hashes (timed.json) with the outputs
// of every distinct iteration under timed/ITER/ (README, 'Timings the candidate cannot forge').
struct BenchDriver {
  std::vector<std::string> command;
  std::string module, function;  // Python kernel
  std::string library, symbol;   // C entry point
  std::string path = ".";        // where in the arm's tree the module is (kernel.path; Python only)
};

// The work of one bench case, as muparser expressions over the case's
// numeric keys (e.g. "4 * B * H * K"): bytes moved and floating-point
// operations. Empty: not declared. Used against the machine's measured
// ceilings (machine_ceilings.h).
struct BenchWork {
  std::string bytes;
  std::string flops;
};

struct BenchSpec {
  int warmup = 1;
  int iters = 5;
  // The rounds the decision is looked at (bench_statistics.h
  // default_looks(max_rounds)); the last is the most rounds a case runs.
  std::vector<int> looks = default_looks(200);
  // The measurement budget of a case: seconds of its timed rounds (each
  // arm's warm-up call apart), then inconclusive with the rounds a verdict
  // would need.
  double max_seconds_per_case = 600;
  // The cap on each arm's warm-up call of a case (its first: compilation,
  // autotuning, caches), seconds; past it the bench stage ends, named.
  double max_warmup_seconds = 1800;
  std::vector<Case> cases;
  std::optional<BenchDriver> driver;  // absent: the candidate's harness times itself ("timed by the candidate")
  BenchWork work;
  // A speedup above this (x) needs a person's acceptance before promotion
  // (issue 16: default 50x, the field's record of agents' forged speedups
  // being orders of magnitude).
  double max_speedup = 50;
};

struct GateSpec {
  std::string name;
  std::string description;
  std::filesystem::path file;  // absolute path of the gate file
  std::vector<std::string> reference_command;  // argv templates
  // reference.case_keys: the case keys the reference's outputs depend on
  // beside those its command names; cases that agree on them share one
  // reference run, whose case (request or DENSEFEED_CASE) holds only them.
  // Unset: the keys its command names, or every key where its command can
  // name none (protocol: session) or names none (one run per case).
  std::optional<std::vector<std::string>> reference_case_keys;
  std::vector<std::string> candidate_command;
  std::vector<ParamSpec> params;
  std::vector<OutputSpec> outputs;
  std::vector<Case> cases;
  std::map<std::string, ProfileFilter> profiles;
  double timeout_s = kDefaultHarnessTimeoutS;  // per harness process, seconds
  int gpus = 0;  // GPUs each harness process (each rank) holds alone (executor.h AllocationRequest::gpus); 1 when ranks > 1 and unset
  // ranks: processes per case of the candidate's (and base's) command
  // (rank_group.h): an integer ("4") or "{case.KEY}"; "1" = one process.
  // The reference is always one process.
  std::string ranks = "1";
  // rank_outputs: per_rank: rank K writes out/rank-K; false (gathered): all
  // ranks share out/ and rank 0 writes the outputs there.
  bool per_rank_outputs = false;
  // protocol: session: the harnesses serve requests (session.h), one process
  // per arm and job slot; false: one process per case (the default).
  bool sessions = false;
  CommandLimits limits;  // per untrusted command (process_limits.h)
  // resources: what each stage's scheduler jobs ask for (resources_spec.h);
  // a run lays the project's beneath (experiment_runner.cpp).
  StageResources resources;
  std::vector<std::string> freezes;  // paths relative to the project folder
  BenchSpec bench;
  std::optional<BuildSpec> build;  // absent: the project's build, else a revision's clean export is its build
  // Case keys the report tabulates errors by (rows x columns), e.g. T x shards;
  // empty when the gate asks for no table.
  std::string trend_rows;
  std::string trend_columns;
  // structure: the partition, precision and algorithm params, state outputs
  // (gate_structure.h); what hints and `densefeed narrow` reason on.
  GateStructure structure;

  const ParamSpec* find_param(const std::string& name) const;
  // Cases of a profile. Throws InputError naming the available profiles.
  std::vector<Case> profile_cases(const std::string& profile) const;
};

struct GateStore;

// How many ranks a case of `gate` runs: gate.ranks, or the case's value of
// its "{case.KEY}". load_gate has checked that every case gives a positive
// integer; throws InputError naming the gate file and field otherwise.
int case_ranks(const GateSpec& gate, const nlohmann::ordered_json& case_values);

// How many equal slices output `out` is cut into along its partition axis
// for a case: partition.parts rendered over the case's values, or 0 (one
// slice per position) when the gate gives none. Throws std::invalid_argument
// or std::out_of_range (std::stoul) when the rendered value is not a whole
// number.
std::size_t partition_parts(const OutputSpec& out, const nlohmann::ordered_json& case_values);

// Names of the gates in the store (its gates folder's *.yaml), sorted.
std::vector<std::string> list_gates(const GateStore& store);

// What to say when `store` holds no gate `name`: the gates it has, and, when
// the project folder holds gates/NAME.yaml that the trusted ref lacks, how to
// commit and lock it, or check the draft with --trust-worktree.
std::string missing_gate_message(const GateStore& store, const std::string& name);

// Reads, validates and checks a gate file: schema, placeholders in both
// commands defined by every case or declared params, bench cases gated,
// frozen files present. Throws InputError (file, line, field) on any defect;
// for a gate read from the trusted ref's export, the error names the project
// folder's file and the commit it was read at (GateStore::rethrow_shown).
GateSpec load_gate(const GateStore& store, const std::string& name);

}  // namespace densefeed
