#include "bench_runner.h"

#include "held_allocation.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>

#include <fmt/format.h>

#include "bench_case.h"
#include "bench_work.h"
#include "error.h"
#include "executor.h"
#include "harness_command.h"
#include "harness_protocol.h"
#include "session.h"
#include "timing_checks.h"
#include "untrusted_launch.h"

namespace densefeed {
namespace {

// With protocol: session (and no driver, run here) each arm's session
// serves every round of the benchmark: no process starts inside a round,
// and each arm stays on the benchmark's GPU throughout. Each is started on
// first need and again after one ended.
class ArmSessions {
 public:
  ArmSessions(const GateSpec& gate, const BenchOptions& options, Executor& executor)
      : gate_(gate), options_(options), executor_(executor) {}
  // Both wind down at once.
  ~ArmSessions() {
    for (int i = 0; i < 2; ++i) {
      if (sessions_[i]) sessions_[i]->resume(), sessions_[i]->close_input();
    }
  }

  ArmLaunch run(const HarnessCall& call, bool is_base, int iters) {
    auto& session = sessions_[is_base ? 0 : 1];
    int& started = started_[is_base ? 0 : 1];
    if (!session || session->ended()) {
      session.reset();
      const auto dir = options_.work_dir / fmt::format("bench-session-{}-{}", is_base ? "base" : "candidate", started++);
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      std::filesystem::create_directories(dir, ec);
      Launch launch;
      launch.untrusted = harness_command(session_call(call, dir));
      session = std::make_unique<HarnessSession>(std::move(launch), dir / "exchange",
                                                 fmt::format("the {}'s session", is_base ? "base" : "candidate"), executor_);
    }
    SessionRequest req;
    req.mode = "bench";
    req.case_values = call.case_values;
    req.seed = options_.seed;
    req.warmup = gate_.bench.warmup;
    req.iters = iters;
    // The other arm's session is held still while this one's round is
    // timed (HarnessSession::pause): it cannot load the machine under this
    // arm's clock.
    if (auto& other = sessions_[is_base ? 1 : 0]) other->pause();
    session->resume();
    const SessionAnswer a = session->request(req, call.out, call.timeout);
    ArmLaunch out;
    out.answer = a;
    LaunchResult& r = out.ran;
    r.placement = local_placement();
    ProcessResult& p = r.result.process;
    p.started = true;
    p.wall_s = a.wall_s;
    p.exit_code = 0;
    if (!a.ok) {
      out.session_failure = fmt::format("its session {}", a.failure);
      if (a.kind == FailureKind::timeout) p.timed_out = true, p.timeout_s = gate_.timeout_s;
      else if (a.signal) p.signal = *a.signal, p.exit_code = -1;
      else p.exit_code = a.exit_code.value_or(1);
      if (a.kind == FailureKind::infrastructure) r.infrastructure = a.failure;
    }
    if (a.ended) session.reset();
    return out;
  }

  // How the other arm's session is held still (the last one running's
  // freezer); unset when none runs.
  std::optional<std::string> freeze_mechanism() const {
    std::optional<std::string> m;
    for (const auto& s : sessions_) {
      if (s) m = s->freeze_mechanism();
    }
    return m;
  }

 private:
  const GateSpec& gate_;
  const BenchOptions& options_;
  Executor& executor_;
  std::unique_ptr<HarnessSession> sessions_[2];  // base, candidate
  int started_[2] = {0, 0};
};

// Across cases and against the machine: each case's work against the
// machine's ceilings, a timer that reads the same whatever the work, a
// speedup beyond the gate's bound; then what the flags mean for each case
// and for the stage (the first one that fails it decides).
void judge_across_cases(const GateSpec& gate, const BenchOptions& options, bool driven, BenchResult& result) {
  // Stage failures found after the rounds: the first one decides the stage.
  const auto fail_stage = [&](Verdict v, FailureWho who, const std::string& detail, const std::string& reason) {
    if (result.verdict != Verdict::green) return;
    result.verdict = v;
    result.failure = Failure{FailureKind::implausible_timing, who, {}, {}, "samples.json", "", detail};
    result.reason = reason;
  };
  std::vector<CaseTiming> timings;
  for (auto& bc : result.cases) {
    CaseTiming t{bc.bench_case.label, bc.decision.base_median_ms, bc.decision.candidate_median_ms, std::nullopt, std::nullopt};
    if (!gate.bench.work.bytes.empty()) t.bytes = evaluate_work(gate.bench.work.bytes, bc.bench_case.values);
    if (!gate.bench.work.flops.empty()) t.flops = evaluate_work(gate.bench.work.flops, bc.bench_case.values);
    if (t.bytes) bc.checks["bytes"] = *t.bytes;
    if (t.flops) bc.checks["flops"] = *t.flops;
    if (t.bytes || t.flops) {
      if (options.ceilings) {
        bc.checks["ceilings"] = {{"bytes_per_s", options.ceilings->bytes_per_s}, {"flops_per_s", options.ceilings->flops_per_s},
                                 {"source", options.ceilings->source}};
        for (auto& f : check_ceilings(t, *options.ceilings)) bc.flags.push_back(std::move(f));
      } else {
        bc.checks["ceilings"] = "not measured on this machine: run `densefeed machine calibrate`";
      }
    }
    timings.push_back(t);
  }
  for (auto& f : check_flat_timer(timings)) {
    for (auto& bc : result.cases) bc.flags.push_back(f);
  }
  for (auto& bc : result.cases) {
    if (bc.decision.speedup > gate.bench.max_speedup) {
      TimingFlag f;
      f.kind = TimingFlagKind::beyond_bound;
      f.arm = "candidate";
      f.reason = fmt::format("a speedup of {:.4g}x is beyond the gate's bound of {:.4g}x (bench.max_speedup): a person must "
                             "accept it before promotion (densefeed promote --accept-speedup-beyond-bound)",
                             bc.decision.speedup, gate.bench.max_speedup);
      f.figures = {{"speedup", bc.decision.speedup}, {"max_speedup", gate.bench.max_speedup}};
      bc.flags.push_back(std::move(f));
    }
    // What the flags mean for the case and the stage.
    std::set<std::string> worded;  // flag reasons already in the decision's words (two flags may say the same)
    for (const auto& f : bc.flags) {
      if (f.kind == TimingFlagKind::beyond_bound) continue;
      // A flag takes a case's faster or same away, never a slower (as with
      // the guards: nothing may make a candidate look better than slower).
      const bool new_words = worded.insert(f.reason).second;
      if (bc.decision.verdict == BenchVerdict::slower) {
        if (new_words) bc.decision.reason += "; also: " + f.reason;
      } else if (new_words) {
        bc.decision.verdict = BenchVerdict::inconclusive;
        bc.decision.reason = fmt::format("inconclusive: {} ({})", f.reason, bc.decision.reason);
        // densefeed's clock could not yet confirm a speedup the samples
        // show: as many rounds again is what its fits need (more rounds of
        // two lengths narrow the slopes), not a calibration.
        if (f.kind == TimingFlagKind::wall_unconfirmed && bc.more_rounds <= 0 && !bc.base.empty()) {
          bc.more_rounds = static_cast<int>(bc.base.size());
          const double timed_s = bc.checks["budget"].value("timed_s", 0.0);
          if (timed_s > 0) bc.more_seconds = timed_s;
          bc.checks["budget"]["more_rounds"] = bc.more_rounds;
          bc.checks["budget"]["more_seconds"] = bc.more_seconds ? nlohmann::ordered_json(*bc.more_seconds) : nlohmann::ordered_json(nullptr);
        }
      }
      if (f.kind == TimingFlagKind::drift || f.kind == TimingFlagKind::wall_unreliable || f.kind == TimingFlagKind::wall_unconfirmed) continue;
      const std::string text = fmt::format("case {}: {}", bc.bench_case.label, f.reason);
      if (f.arm == "candidate") {
        fail_stage(Verdict::red, FailureWho::candidate, to_string(f.kind), text);
      } else {
        fail_stage(Verdict::error, driven ? FailureWho::driver : FailureWho::base, to_string(f.kind), text);
      }
    }
  }
}

// The stage as a stop (densefeed cancel, a signal) left it: a round the
// stop cut short failed by being killed, which is nobody's verdict; green
// with what was measured, the experiment's state saying how it ended.
BenchResult& stopped(BenchResult& result) {
  if (cancel_requested()) {
    result.verdict = Verdict::green;
    result.interrupted = true;
    result.failure = Failure{};
    result.reason = interrupt_signal() ? fmt::format("stopped by signal {} (the rounds it had are kept)", interrupt_signal())
                                       : "cancelled (the rounds it had are kept)";
  }
  return result;
}

}  // namespace

BenchResult run_bench(const GateSpec& gate, const nlohmann::ordered_json& base_params,
                      const nlohmann::ordered_json& candidate_params, const BenchOptions& options) {
  BenchResult result;
  result.sandbox = require_sandbox(options.sandbox);
  const bool driven = gate.bench.driver.has_value();
  if (driven && !options.trusted) throw InfraError("the gate's benchmark driver needs the trusted context, which was not given");
  const int max_rounds = options.fixed_rounds ? *options.fixed_rounds : gate.bench.looks.back();
  // The whole benchmark holds one allocation (a Slurm job: one node, its
  // GPUs alone) for all its rounds of both arms: both arms are timed on the
  // same machine, interleaved.
  AllocationRequest request;
  request.name = "bench";
  request.gpus = gate.gpus;
  // A node of its own by default (slurm_options.h), and resumable: a
  // preempted or requeued job keeps the rounds it finished.
  request.stage = "bench";
  request.resources = gate.resources.for_stage("bench");
  request.resumable = true;
  request.time_limit = std::chrono::seconds(static_cast<long long>(
      std::ceil(static_cast<double>(gate.bench.cases.size()) *
                (options.budget_s.value_or(gate.bench.max_seconds_per_case) + 2 * gate.bench.max_warmup_seconds + 2 * gate.timeout_s))));
  Executor& ex = given_or_local(options.executor);
  const std::unique_ptr<Allocation> allocation = ex.allocate(request);
  const bool sessions = gate.sessions && !driven && ex.name() == "local";
  ArmSessions arm_sessions(gate, options, ex);
  const ArmRunner run_arm = [&](const HarnessCall& call, bool is_base, int iters) {
    if (sessions) return arm_sessions.run(call, is_base, iters);
    Launch launch;
    launch.untrusted = harness_command(call);
    ArmLaunch launched;
    launched.ran = allocation->run(launch);
    return launched;
  };
  std::random_device entropy;
  std::seed_seq draw_seed{entropy(), entropy(), entropy(), entropy()};
  std::mt19937_64 draw(draw_seed);
  BenchRun run{gate,   base_params, candidate_params, options, ex.name(), ex.assigns_gpus(), driven, driven && ex.name() == "local",
               sessions, max_rounds, run_arm, draw, result};
  // What the benchmark needs run beside its rounds runs in its own job.
  const std::unique_ptr<Executor> held = ex.assigns_gpus() ? nullptr : make_held_executor(*allocation, ex);
  run.held = held.get();
  for (std::size_t ci = 0; ci < gate.bench.cases.size(); ++ci) {
    BenchCaseRun c = start_bench_case(run, ci);
    // Compilation, autotuning and caches before the first timed round: the
    // measurement budget counts timed rounds only.
    if (!warm_up_arms(run, c)) return stopped(result);
    c.start = std::chrono::steady_clock::now();
    bool stop = false;
    for (int round = 0; round < max_rounds; ++round) {
      if (cancel_requested() || !run_paired_round(run, c, round)) {
        // densefeed cancel, or a signal to run (the caller records how
        // it ended): the rounds it had are kept, as inconclusive; a round
        // a stop cut short (its second arm killed) is not one.
        if (!cancel_requested()) return result;
        stop = true;
        stopped(result);
        const std::size_t whole = std::min(c.bc.base.size(), c.bc.candidate.size());
        c.bc.base.resize(whole);
        c.bc.candidate.resize(whole);
        c.bc.base_walls.resize(std::min(whole, c.bc.base_walls.size()));
        c.bc.candidate_walls.resize(std::min(whole, c.bc.candidate_walls.size()));
        for (auto& r : c.clock_rounds) r.resize(std::min(whole, r.size()));
        c.input.base = c.bc.base;
        c.input.candidate = c.bc.candidate;
        break;
      }
      if (rerun_late_round(c, round, run.outside)) {
        --round;  // the same round again: its order (ABBA) and length stay
        continue;
      }
      const bool ends = round_ends_case(run, c, round);
      report_round(run, c, round);
      if (ends) break;
    }
    if (stop && c.bc.base.empty()) return result;
    decide_bench_case(run, c, arm_sessions.freeze_mechanism());
    if (stop) {
      c.bc.decision.verdict = BenchVerdict::inconclusive;
      // The figures are the last look's, when one was reached (bench_case.cpp, as for a capped case).
      const std::string& look = c.bc.decision.look_reason;
      const std::size_t n = c.bc.base.size();
      c.bc.decision.reason = fmt::format("inconclusive: stopped after {} round{} ({}){}", n, n == 1 ? "" : "s",
                                         interrupt_signal() ? fmt::format("signal {}", interrupt_signal()) : "cancelled",
                                         look.empty() ? std::string(", before the first look")
                                                      : fmt::format(" (the last look, after {} rounds: {})", c.bc.decision.rounds_used, look));
    }
    result.cases.push_back(std::move(c.bc));
    if (stop) return result;
  }
  judge_across_cases(gate, options, driven, result);
  return result;
}

}  // namespace densefeed
