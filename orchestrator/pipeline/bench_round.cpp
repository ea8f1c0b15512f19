// One paired round of a bench case (bench_case.h run_paired_round): each
// arm's command built, launched, its samples read and bounded by the
// outside clock, and the candidate's timed outputs gated.
#include "bench_case.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "bench_work.h"
#include "command_template.h"
#include "error.h"
#include "gate_runner.h"
#include "harness_command.h"
#include "harness_protocol.h"
#include "input_sets.h"
#include "outside_clock.h"
#include "sha256.h"
#include "statistics.h"
#include "untrusted_launch.h"

namespace densefeed {
namespace {

// Reads samples.json, checking every field: harness output is untrusted.
ArmRound read_samples(const std::filesystem::path& path) {
  // Not followed if a link: it may loop or name a FIFO that never ends.
  std::error_code ec;
  if (const auto type = std::filesystem::symlink_status(path, ec).type();
      type != std::filesystem::file_type::regular && type != std::filesystem::file_type::not_found) {
    const std::string what = type == std::filesystem::file_type::symlink ? "a symbolic link"
                             : ec                                         ? ec.message()
                                                                          : "not a regular file";
    throw std::runtime_error(fmt::format("{}: not a file the harness wrote ({})", path.string(), what));
  }
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("{}: missing (the harness wrote no samples)", path.string()));
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(fmt::format("{}: not JSON: {}", path.string(), e.what()));
  }
  if (!doc.is_object() || !doc.contains("unit") || !doc["unit"].is_string() || !doc.contains("samples") ||
      !doc["samples"].is_array()) {
    throw std::runtime_error(fmt::format("{}: expected {{\"unit\": \"ms\", \"samples\": [numbers...]}}", path.string()));
  }
  if (doc["unit"] != "ms") {
    throw std::runtime_error(fmt::format("{}: unit {}, expected \"ms\"", path.string(), doc["unit"].dump()));
  }
  ArmRound round;
  for (std::size_t i = 0; i < doc["samples"].size(); ++i) {
    const auto& v = doc["samples"][i];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0) {
      throw std::runtime_error(fmt::format("{}: samples[{}] = {} is not a positive finite number", path.string(), i, v.dump()));
    }
    round.samples_ms.push_back(v.get<double>());
  }
  if (round.samples_ms.empty()) throw std::runtime_error(fmt::format("{}: no samples", path.string()));
  if (doc.contains("sm_clock_mhz")) {
    if (!doc["sm_clock_mhz"].is_number() || doc["sm_clock_mhz"].get<double>() <= 0) {
      throw std::runtime_error(fmt::format("{}: sm_clock_mhz must be a positive number", path.string()));
    }
    round.sm_clock_mhz = doc["sm_clock_mhz"].get<double>();
  }
  if (doc.contains("throttled")) {
    if (!doc["throttled"].is_number_unsigned() || doc["throttled"].get<std::size_t>() > round.samples_ms.size()) {
      throw std::runtime_error(fmt::format("{}: throttled must be a count of at most the samples", path.string()));
    }
    round.throttled = doc["throttled"].get<std::size_t>();
  }
  return round;
}


// The trusted driver's timed.json, read: one entry per timed iteration, each
// {OUTPUT: sha256 of its .npy file}, and, from a driver that draws an input
// set per iteration (input_sets.h), "input_seeds": the seed of each.
struct TimedRecord {
  nlohmann::json iterations;
  std::optional<std::vector<std::uint64_t>> input_seeds;
};

// Throws std::runtime_error naming the file and what is wrong.
TimedRecord read_timed(const GateSpec& gate, const std::filesystem::path& out_dir, int timed) {
  const auto path = out_dir / "timed.json";
  std::error_code ec;
  if (std::filesystem::symlink_status(path, ec).type() != std::filesystem::file_type::regular) {
    throw std::runtime_error(fmt::format("{}: missing or not a plain file: the driver records every timed iteration's outputs there",
                                         path.string()));
  }
  std::ifstream in(path);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(fmt::format("{}: not JSON: {}", path.string(), e.what()));
  }
  if (!doc.is_object() || !doc.contains("iterations") || !doc["iterations"].is_array()) {
    throw std::runtime_error(fmt::format("{}: expected {{\"iterations\": [{{OUTPUT: sha256}}, ...]}}", path.string()));
  }
  TimedRecord r;
  r.iterations = doc["iterations"];
  if (r.iterations.size() != static_cast<std::size_t>(timed)) {
    throw std::runtime_error(fmt::format("{}: {} iterations recorded, {} were timed", path.string(), r.iterations.size(), timed));
  }
  for (std::size_t k = 0; k < r.iterations.size(); ++k) {
    const auto& e = r.iterations[k];
    if (!e.is_object()) throw std::runtime_error(fmt::format("{}: iterations[{}] is not an object", path.string(), k));
    for (const auto& o : gate.outputs) {
      if (!e.contains(o.name) || !e[o.name].is_string() || e[o.name].get<std::string>().size() != 64) {
        throw std::runtime_error(fmt::format("{}: iterations[{}] has no sha256 for output {}", path.string(), k, o.name));
      }
    }
  }
  if (doc.contains("input_seeds")) {
    const auto& seeds = doc["input_seeds"];
    if (!seeds.is_array() || seeds.size() != r.iterations.size() ||
        !std::all_of(seeds.begin(), seeds.end(), [](const nlohmann::json& v) { return v.is_number_unsigned(); })) {
      throw std::runtime_error(fmt::format("{}: input_seeds must be one u64 seed per timed iteration ({})", path.string(), timed));
    }
    r.input_seeds = seeds.get<std::vector<std::uint64_t>>();
  }
  return r;
}

// Gates the timed iterations of `record`: for each distinct pair of input set
// and outputs, the folder timed/K/ (K its first iteration) must hold those
// files, and they must pass the gate against reference_of(its set's seed)
// (`run_seed` for a driver that records no input sets). So every timed
// iteration's outputs are what was gated, for its own inputs. A driver that
// records input sets must record the ones densefeed drew (`drawn`, the timed
// part). Throws std::runtime_error (and sets *failure) naming the iteration,
// its input set, the file and the check.
void check_timed_outputs(const GateSpec& gate, const Case& c, const std::filesystem::path& out_dir, const TimedRecord& record,
                         const std::vector<std::uint64_t>& drawn, std::uint64_t run_seed,
                         const std::function<std::filesystem::path(std::uint64_t)>& reference_of, Failure* failure) {
  const auto path = out_dir / "timed.json";
  std::error_code ec;
  if (record.input_seeds && *record.input_seeds != drawn) {
    std::size_t k = 0;
    while (k < drawn.size() && k < record.input_seeds->size() && (*record.input_seeds)[k] == drawn[k]) ++k;
    *failure = Failure{FailureKind::malformed_output, FailureWho::candidate, {}, {}, "timed.json", "input_seeds", ""};
    throw std::runtime_error(fmt::format("{}: timed iteration {} records the inputs of seed {}, but densefeed drew seed {} for it: "
                                         "what was timed is not the inputs densefeed chose", path.string(), k,
                                         k < record.input_seeds->size() ? std::to_string((*record.input_seeds)[k]) : "none",
                                         k < drawn.size() ? std::to_string(drawn[k]) : "none"));
  }
  std::set<std::string> seen;  // input set and outputs
  for (std::size_t k = 0; k < record.iterations.size(); ++k) {
    const auto& e = record.iterations[k];
    const std::uint64_t seed = record.input_seeds ? (*record.input_seeds)[k] : run_seed;
    if (!seen.insert(std::to_string(seed) + " " + e.dump()).second) continue;
    const auto dir = out_dir / "timed" / std::to_string(k);
    const std::filesystem::path reference = reference_of(seed);
    for (const auto& o : gate.outputs) {
      const auto file = dir / (o.name + ".npy");
      if (std::filesystem::symlink_status(file, ec).type() != std::filesystem::file_type::regular) {
        throw std::runtime_error(fmt::format("{}: missing or not a plain file (the outputs of timed iteration {})", file.string(), k));
      }
      if (sha256_file(file) != e[o.name].get<std::string>()) {
        throw std::runtime_error(fmt::format("{}: its sha256 is not the one timed.json records for iteration {}", file.string(), k));
      }
      const OutputResult r = compare_output(o, c.values, reference, dir);
      if (r.comparison.verdict != Verdict::green) {
        *failure = r.failure;
        throw std::runtime_error(fmt::format("what was timed is not what was gated: timed iteration {}{}: {}: {}", k,
                                             record.input_seeds ? fmt::format(" (its input set, seed {})", seed) : "", o.name,
                                             r.comparison.reason));
      }
    }
  }
}


// A copy of the arm's driver cache `cache` at `copy` (emptied first; the
// cache need not exist yet), symlinks copied as links. Returns `copy`.
// Throws InfraError naming the folder when it cannot be copied.
std::filesystem::path round_cache_copy(const std::filesystem::path& cache, const std::filesystem::path& copy) {
  std::error_code ec;
  std::filesystem::remove_all(copy, ec);
  std::filesystem::create_directories(copy, ec);
  if (!ec && std::filesystem::exists(cache, ec)) {
    std::filesystem::copy(cache, copy, std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks, ec);
  }
  if (ec) throw InfraError(fmt::format("{}: cannot copy the driver cache {} for a timed round: {}", copy.string(), cache.string(), ec.message()));
  return copy;
}

// The call of one arm's round (harness_command.h), run from `dir`: the
// gate's driver from the trusted tree loading the arm's kernel (its context
// is `driver_arm`, which must outlive the launch), or the arm's own harness;
// with a driver, `round_seeds` gets the round's input sets (warm-up first,
// then the timed iterations'). `warmup`: the arm's warm-up call, whose
// inputs are all outside the pool and which writes the arm's driver cache;
// a timed round's driver gets a throwaway copy of that cache (dir/
// driver-cache), so nothing one round writes is there for the next.
HarnessCall bench_call(BenchRun& run, const BenchCaseRun& cr, const std::filesystem::path& dir, bool is_base, int iters,
                       bool warmup, ArmContext& driver_arm, std::vector<std::uint64_t>& round_seeds) {
  const GateSpec& gate = run.gate;
  const BenchOptions& options = run.options;
  const Case& c = *cr.bench_case;
  const ArmContext& arm = is_base ? options.base : options.candidate;
  const nlohmann::ordered_json& params = is_base ? run.base_params : run.candidate_params;
  HarnessCall call;
  call.mode = ProtocolMode::bench;
  call.values = {c.values, params, options.seed, (dir / "out").string()};
  if (run.driven) {
    // The driver is trusted code from the trusted tree; the arm's tree
    // is only where its kernel is loaded from. It runs in the same
    // sandbox as the arm's own harness would: it hosts the arm's code.
    const BenchDriver& d = *gate.bench.driver;
    driver_arm = *options.trusted;
    driver_arm.readable.insert(driver_arm.readable.end(), arm.readable.begin(), arm.readable.end());
    driver_arm.hidden.insert(driver_arm.hidden.end(), arm.hidden.begin(), arm.hidden.end());
    // A cache of its own per arm: the arm's kernel compiles into it,
    // so it is neither the reference's (trusted) nor the arm's own
    // harness's (arm_context.h).
    driver_arm.cache_dir = arm.cache_dir.empty() ? std::filesystem::path()
                                                 : arm.cache_dir.parent_path() / (arm.cache_dir.filename().string() + "-driver");
    // A timed round runs with a copy of it, thrown away with the round's
    // folder: a kernel that stores what it computed (issue 29's hostile
    // trial: results keyed by input, read back by a later round) finds
    // nothing of another round's there. The warm-up call fills the cache
    // itself (compilation, autotuning): that is what it is for.
    if (!warmup && !driver_arm.cache_dir.empty()) driver_arm.cache_dir = round_cache_copy(driver_arm.cache_dir, dir / "driver-cache");
    // The driver is told no params: the arm's go in DENSEFEED_PARAMS.
    call.command = d.command;
    call.values.params = nlohmann::ordered_json::object();
    call.arm = &driver_arm;
    nlohmann::ordered_json kernel = d.module.empty() ? nlohmann::ordered_json{{"library", d.library}, {"symbol", d.symbol}}
                                                     : nlohmann::ordered_json{{"module", d.module}, {"function", d.function}};
    call.extra_env["DENSEFEED_KERNEL"] = kernel.dump();
    call.extra_env["DENSEFEED_ARM_PROJECT"] = arm.project.string();
    call.extra_env["DENSEFEED_TRUSTED_PROJECT"] = options.trusted->project.string();
    call.extra_env["DENSEFEED_PARAMS"] = params.dump();
    std::string kernel_path;
    if (d.module.empty()) {
      // A library is a build product: it is looked up where the arm's
      // own commands' bare names are (a revision's build bin, then the
      // project's harness_path under the arm's tree), in that order.
      for (const auto& dir : arm.exe_dirs) kernel_path += (kernel_path.empty() ? "" : ":") + dir.lexically_normal().string();
    } else {
      // The arm's kernel folder first, then its PYTHONPATH (the
      // project's python.path and densefeed's module folder).
      kernel_path = (arm.project / d.path).lexically_normal().string();
      if (auto p = arm.env.find("PYTHONPATH"); p != arm.env.end()) kernel_path += ":" + p->second;
    }
    call.extra_env["DENSEFEED_KERNEL_PATH"] = kernel_path;
  } else {
    call.command = gate.candidate_command;
    call.arm = &arm;
  }
  call.case_values = c.values;
  call.dir = dir;
  call.out = dir / "out";
  call.warmup = gate.bench.warmup;
  call.iters = iters;
  if (run.driven) {
    // Warm-up iterations (and the whole warm-up call) outside the pool.
    round_seeds = fresh_seeds(static_cast<std::size_t>(gate.bench.warmup + (warmup ? iters : 0)), cr.pool, run.draw);
    if (!warmup) {
      const auto timed = draw_round_seeds(cr.pool, static_cast<std::size_t>(iters), run.draw);
      round_seeds.insert(round_seeds.end(), timed.begin(), timed.end());
    }
    call.input_seeds = round_seeds;
  }
  if (run.assigns_gpus) call.gpu = options.gpu;
  call.readable = options.sandbox_readable;
  call.timeout = harness_timeout(gate.timeout_s);
  call.limits = gate.limits;
  call.sandbox = options.sandbox;
  return call;
}

// What decides a driver's round under the outside clock: densefeed's
// clock; the driver's samples `r` are the cross-check (check_clock_agrees)
// and the wall checks' claims, bounded here by densefeed's intervals around
// them. Throws std::runtime_error (and sets *failure) when the clock's
// protocol was broken.
void bound_by_clock(BenchCaseRun& cr, bool is_base, int round, const ClockRound& clocked, ArmRound& r, Failure& failure) {
  const FailureWho who = is_base ? FailureWho::base : FailureWho::candidate;
  if (clocked.error != ClockProtocolError::none) {
    failure = Failure{FailureKind::implausible_timing, who, {}, {}, "", "", fmt::format("clock_protocol: {}", to_string(clocked.error))};
    throw std::runtime_error(fmt::format("round {}: {}", round, clocked.reason));
  }
  // What decides is densefeed's clock; the driver's samples are
  // the cross-check (check_clock_agrees) and the wall checks' claims.
  // The overhead a sample may be short of its bracket by: the
  // empty brackets of the round, of either arm so far, with the
  // least median; the same for both arms (an arm's own would let a
  // kernel that slows its own empty brackets, e.g. with device work
  // queued at load that the empty call waits behind, widen its own
  // lower bound; one arm's own beside the other's least made an A/A
  // of kda-decode on the H200 read 1.038x twice).
  const int a = is_base ? 0 : 1;
  if (cr.least_empty.empty() || median(clocked.empty_ms) < median(cr.least_empty)) cr.least_empty = clocked.empty_ms;
  cr.own_overhead_ms[a].push_back(median(clocked.empty_ms));
  cr.clock_rounds[a].push_back({r.samples_ms, clocked.timed_ms, median(cr.least_empty)});
  // The driver's samples, bounded by densefeed's intervals around
  // them (bound_by_outside_clock): shrunk ones count as what
  // densefeed saw less the brackets' overhead.
  const BoundedSamples bounded = bound_by_outside_clock(r.samples_ms, clocked.timed_ms, cr.least_empty);
  cr.bounded_counts[is_base ? 0 : 1][0] += bounded.raised;
  cr.bounded_counts[is_base ? 0 : 1][1] += bounded.lowered;
  r.samples_ms = bounded.ms;
}

// The reference's outputs of every input set of `timed_seeds` that has none
// yet (BenchOptions::references), kept in cr.set_reference. false: one of
// them failed: the stage is an error (run.result says why).
bool reference_input_sets(BenchRun& run, BenchCaseRun& cr, const std::vector<std::uint64_t>& timed_seeds) {
  const Case& c = *cr.bench_case;
  std::vector<std::uint64_t> missing;
  for (std::uint64_t seed : timed_seeds) {
    if (!cr.set_reference.count(seed) && std::find(missing.begin(), missing.end(), seed) == missing.end()) missing.push_back(seed);
  }
  if (missing.empty()) return true;
  if (!run.options.references) {
    throw InfraError(fmt::format("case {}: the driver drew {} input sets but this benchmark cannot run the "
                                 "reference for them (BenchOptions::references unset)", c.label, missing.size()));
  }
  for (const ReferenceRun& ref_run : run.options.references(c, missing, run.held)) {
    ++cr.reference_runs;
    cr.reference_wall_s += ref_run.wall_s;
    if (!ref_run.reason.empty()) {
      run.result.verdict = Verdict::error;
      run.result.failure = ref_run.failure;
      run.result.reason = fmt::format("case {}: {} (the bench stage is an error: the candidate is not judged)",
                                      c.label, ref_run.reason);
      return false;
    }
    cr.set_reference[ref_run.seed] = ref_run.out;
  }
  return true;
}

// The candidate's timed outputs are what was gated: with a driver, each
// timed iteration's (timed.json) against the reference of its input set;
// the outputs it left against the last one's; a session's files as it
// answered. Throws std::runtime_error (and sets *failure) naming what
// differs. false: the stage ended before the candidate was judged
// (run.result says why).
bool gate_timed_outputs(BenchRun& run, BenchCaseRun& cr, int round, const std::filesystem::path& dir, int iters,
                        const std::vector<std::uint64_t>& round_seeds, const SessionAnswer& answer, Failure& failure) {
  const GateSpec& gate = run.gate;
  const Case& c = *cr.bench_case;
  const FailureWho who = FailureWho::candidate;
  std::filesystem::path last_reference = *cr.gate_reference;
  if (run.driven) {
    failure = Failure{FailureKind::malformed_output, who, {}, {}, "timed.json", "", ""};
    const TimedRecord record = read_timed(gate, dir / "out", iters);
    const std::vector<std::uint64_t> timed_seeds(round_seeds.begin() + gate.bench.warmup, round_seeds.end());
    if (!record.input_seeds) {
      // The gate's frozen driver, not the candidate, left them out.
      run.result.verdict = Verdict::error;
      run.result.failure = Failure{FailureKind::malformed_output, FailureWho::driver, {}, {}, "timed.json", "input_seeds", ""};
      run.result.reason = fmt::format(
          "case {}: the gate's driver recorded no input sets in {}: densefeed draws a set of inputs for every "
          "iteration ({}) so that a kernel caching its results gains nothing, and a driver must build each "
          "iteration's inputs from its seed (densefeed_driver.Driver.time(inputs=...), driver.h "
          "TimingOptions::prepare); the bench stage is an error, the candidate is not judged",
          c.label, (dir / "out" / "timed.json").string(), kInputSeedsEnv);
      return false;
    }
    cr.rotated = true;
    if (!reference_input_sets(run, cr, timed_seeds)) return false;
    last_reference = cr.set_reference.at(timed_seeds.back());
    check_timed_outputs(gate, c, dir / "out", record, timed_seeds, run.options.seed,
                        [&](std::uint64_t seed) { return cr.set_reference.at(seed); }, &failure);
  }
  for (const auto& out : gate.outputs) {
    const OutputResult o = compare_output(out, c.values, last_reference, dir / "out");
    if (o.comparison.verdict != Verdict::green) {
      failure = o.failure;
      failure.who = who;
      throw std::runtime_error(fmt::format("round {}: what was timed is not what was gated: {}: {}", round,
                                           out.name, o.comparison.reason));
    }
  }
  // What was compared is densefeed's copy (session.h); a file the
  // session kept open and wrote after its answer is still caught.
  if (run.sessions) {
    if (const auto changed = changed_after_answer(answer.answered, answer.out_hashes); !changed.empty()) {
      failure = Failure{FailureKind::malformed_output, who, {}, {}, changed, "", "outputs changed after the answer"};
      throw std::runtime_error(fmt::format("round {}: its session changed its output {} after it answered (its sha256 "
                                           "was taken then): what it answered with is not what it left", round, changed));
    }
  }
  return true;
}

// One arm's part of a round: its folder emptied, its command launched
// (under the outside clock when run.outside), its samples read and checked.
// `warmup` (round -1): the arm's warm-up call, at most the gate's
// bench.max_warmup_seconds, whose wall time is kept and whose samples and
// outputs are not. false: the stage ended (run.result says why).
bool run_arm_round(BenchRun& run, BenchCaseRun& cr, int round, bool is_base, int iters, bool warmup = false) {
  const GateSpec& gate = run.gate;
  const Case& c = *cr.bench_case;
  BenchResult& result = run.result;
  BenchCaseResult& bc = cr.bc;
  const char* arm_name = is_base ? "base" : "candidate";
  const auto dir = run.options.work_dir / (warmup ? fmt::format("bench-{:02}-warmup-{}", cr.index, arm_name)
                                                  : fmt::format("bench-{:02}-round-{:02}-{}", cr.index, round, arm_name));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir / "out", ec);
  if (ec) throw InfraError(fmt::format("{}: cannot create: {}", dir.string(), ec.message()));
  ArmContext driver_arm;
  std::vector<std::uint64_t> round_seeds;  // warm-up first, then the timed iterations'
  HarnessCall call = bench_call(run, cr, dir, is_base, iters, warmup, driver_arm, round_seeds);
  if (warmup) call.timeout = harness_timeout(gate.bench.max_warmup_seconds);
  std::optional<OutsideClock> clock;
  if (run.outside) {
    clock.emplace();
    call.clock_fd = clock->child_fd();
  }
  const ArmLaunch arm_launch = run.run_arm(call, is_base, iters);
  const LaunchResult& ran = arm_launch.ran;
  std::optional<ClockRound> clocked;
  if (clock) {
    auto finished = clock->finish();
    clocked = read_clock_round(finished.records, finished.held_open, gate.bench.warmup, iters);
  }
  const UntrustedResult& launched = ran.result;
  const ProcessResult& pr = launched.process;
  if (result.placement.find(to_string(ran.placement)) == std::string::npos) {
    result.placement += (result.placement.empty() ? "" : "; ") + to_string(ran.placement);
  }
  result.harness_wall_s += pr.wall_s;
  const FailureWho who = is_base ? FailureWho::base : FailureWho::candidate;
  Failure failure{FailureKind::malformed_output, who, {}, {}, "samples.json", "", ""};
  // The round's throwaway copy of the driver cache goes however the round
  // ends (a failed round's too: nothing of it is read again).
  struct DropCopy {
    std::filesystem::path path;
    ~DropCopy() {
      std::error_code e;
      std::filesystem::remove_all(path, e);
    }
  } drop_copy{dir / "driver-cache"};
  try {
    if (!ran.infrastructure.empty()) {
      failure = Failure{FailureKind::infrastructure, FailureWho::densefeed, {}, {}, "", "", ran.infrastructure};
      result.verdict = Verdict::error;
      result.failure = failure;
      result.reason = fmt::format("case {}: the {} arm's round {} did not run to an end of its own: {} (an infrastructure "
                                  "failure: error)", c.label, is_base ? "base" : "candidate", round, ran.infrastructure);
      return false;
    }
    if (warmup && pr.timed_out) {
      result.verdict = is_base ? Verdict::error : Verdict::red;
      result.failure = Failure{FailureKind::timeout, who, {}, {}, "", "warmup",
                               fmt::format("max_warmup_seconds {:g}", gate.bench.max_warmup_seconds)};
      result.reason = fmt::format("case {}: the {} arm's warm-up call (its first in bench mode: compilation, autotuning, caches) "
                                  "did not end within the gate's bench.max_warmup_seconds of {:g} s, so it was never timed",
                                  c.label, arm_name, gate.bench.max_warmup_seconds);
      return false;
    }
    if (!launched.ok() && !arm_launch.session_failure.empty()) {
      failure = failure_value(who, launched);
      failure.detail = arm_launch.session_failure;
      throw std::runtime_error(arm_launch.session_failure);
    }
    if (!launched.ok()) {
      failure = failure_value(who, launched);
      const LogTail tail = log_tail(harness_log(call, "stdout"), harness_log(call, "stderr"), 4);
      throw std::runtime_error(fmt::format("it {}{}", launched.describe(), tail.text.empty() ? "" : "; " + tail.stream + ": " + tail.text));
    }
    if (warmup) {
      // Its samples and outputs are not kept: what it cost is.
      cr.warmup_s[is_base ? 0 : 1] = pr.wall_s;
      std::filesystem::remove_all(dir / "out" / "timed", ec);
      return true;
    }
    ArmRound r = read_samples(dir / "out" / "samples.json");
    if (r.samples_ms.size() != static_cast<std::size_t>(iters)) {
      throw std::runtime_error(fmt::format("{}: {} samples for the {} iterations it was asked to time (DENSEFEED_ITERS)",
                                           (dir / "out" / "samples.json").string(), r.samples_ms.size(), iters));
    }
    RoundWall w{pr.wall_s, gate.bench.warmup + iters, iters, 0};
    for (double v : r.samples_ms) w.samples_sum_ms += v;
    if (clocked) bound_by_clock(cr, is_base, round, *clocked, r, failure);
    (is_base ? bc.base_walls : bc.candidate_walls).push_back(w);
    (is_base ? bc.base : bc.candidate).push_back(std::move(r));
    // The candidate's timed outputs are what was gated; the base's may be
    // as wrong as the base is (it is what the candidate is compared with).
    if (cr.gate_reference && !is_base) {
      if (!gate_timed_outputs(run, cr, round, dir, iters, round_seeds, arm_launch.answer, failure)) return false;
    }
    // Every timed iteration's outputs were gated (or, the base's, are
    // not): their hashes stay in timed.json, the files go (one per
    // iteration and output: a large case's would fill the disk), and so
    // does the round's copy of the driver cache (drop_copy).
    std::filesystem::remove_all(dir / "out" / "timed", ec);
  } catch (const std::runtime_error& e) {
    failure.who = who;
    result.verdict = is_base ? Verdict::error : Verdict::red;
    result.failure = failure;
    result.reason = fmt::format("case {}: the {} arm in bench mode{}: {}", c.label, arm_name, warmup ? " (its warm-up call)" : "",
                                e.what());
    return false;
  }
  return true;
}

}  // namespace

bool warm_up_arms(BenchRun& run, BenchCaseRun& cr) {
  for (const bool is_base : {true, false}) {
    if (!run_arm_round(run, cr, -1, is_base, run.gate.bench.iters, true)) return false;
    if (run.options.progress) {
      BenchProgress p;
      p.case_label = cr.bench_case->label;
      p.case_index = cr.index;
      p.cases = run.gate.bench.cases.size();
      p.phase = "warmup";
      p.arm = is_base ? "base" : "candidate";
      p.warmup_s = cr.warmup_s[is_base ? 0 : 1];
      p.budget_s = cr.budget_s;
      run.options.progress(p);
    }
  }
  return true;
}

bool run_paired_round(BenchRun& run, BenchCaseRun& cr, int round) {
  // ABBA ordering: rounds 0 and 3 (mod 4) start with the base. Odd rounds
  // run long_factor x iters: the wall time's growth with them is
  // densefeed's own measure of each arm's per-iteration cost. A
  // self-timed benchmark's factor is set by the base's first round
  // (timing_checks.h long_round_factor) so that the wall fit can see an
  // iteration beside a process's start-up; a driven one's stays 2 (the
  // outside clock times every iteration, and the input sets are drawn
  // for 2 x iters).
  const bool base_first = round % 4 == 0 || round % 4 == 3;
  if (round == 1 && !run.driven && !cr.bc.base_walls.empty()) cr.long_factor = long_round_factor(cr.bc.base_walls.front());
  const int iters = run.gate.bench.iters * (round % 2 == 0 ? 1 : cr.long_factor);
  for (int k = 0; k < 2; ++k) {
    const bool is_base = (k == 0) == base_first;
    if (!run_arm_round(run, cr, round, is_base, iters)) return false;
  }
  return true;
}

}  // namespace densefeed
