// The results of an experiment's stages: the gate run with its cases and
// metrics, the benchmark and its environment, trace findings, a stage's
// outcome and the overall verdict; the machine's ceilings and the noise
// floors of calibrations; the gate's blind spots.
#include "ledger.h"

#include <sqlite3.h>

#include <fmt/format.h>

#include "error.h"
#include "ledger_sql.h"
#include "statistics.h"

namespace densefeed {
using namespace ledger_sql;

std::int64_t Ledger::record_gate_run(std::int64_t experiment_id, const GateRunRecord& record) {
  const GateResult& r = *record.result;
  Transaction t(db_);
  Statement s(db_,
              "INSERT INTO gate_runs(experiment_id, gate, gate_sha256, lock_problems, profile, seed, verdict, reason, "
              "wall_s, harness_wall_s, started_at, finished_at, provenance, sandbox) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, experiment_id).bind(2, record.gate).bind(3, record.gate_sha256);
  s.bind(4, nlohmann::json(record.lock_problems).dump()).bind(5, record.profile).bind(6, std::to_string(record.seed));
  s.bind(7, to_string(r.verdict)).bind(8, r.reason).bind(9, r.wall_s).bind(10, r.harness_wall_s);
  s.bind(11, record.started_at).bind(12, utc_now()).bind(13, record.provenance_json).bind(14, record.sandbox);
  s.run();
  const std::int64_t gate_run_id = sqlite3_last_insert_rowid(db_);
  link("gate_runs", gate_run_id);
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const CaseResult& c = r.cases[i];
    Statement cs(db_,
                 "INSERT INTO gate_cases(gate_run_id, case_index, case_label, case_json, verdict, reason, "
                 "reference_wall_s, candidate_wall_s, output_capture, failure_kind, failure_who, failure_signal, "
                 "failure_exit_code, failure_output, failure_metric, passing_wrong_candidates, parts) "
                 "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    cs.bind(1, gate_run_id).bind(2, i).bind(3, c.gate_case.label).bind(4, c.gate_case.values.dump());
    cs.bind(5, to_string(c.verdict)).bind(6, c.reason).bind(7, c.reference_wall_s).bind(8, c.candidate_wall_s);
    cs.bind(9, i < record.output_capture.size() ? record.output_capture[i].dump() : std::string("{}"));
    cs.bind(10, to_string(c.failure.kind)).bind(11, to_string(c.failure.who));
    if (c.failure.signal) cs.bind(12, *c.failure.signal);
    if (c.failure.exit_code) cs.bind(13, *c.failure.exit_code);
    cs.bind(14, c.failure.output).bind(15, c.failure.metric);
    {
      nlohmann::json passing = nlohmann::json::array();
      for (const auto& o : c.outputs) {
        for (const auto& w : o.passing_wrong_candidates) passing.push_back({{"output", o.output}, {"candidate", w}});
      }
      cs.bind(16, c.outputs.empty() ? std::string() : passing.dump());
    }
    if (c.parts) cs.bind(17, *c.parts);
    cs.run();
    const std::int64_t case_id = sqlite3_last_insert_rowid(db_);
    link("gate_cases", case_id);
    for (const auto& o : c.outputs) {
      for (const auto& m : o.comparison.checks) {
        Statement ms(db_,
                     "INSERT INTO gate_metrics(gate_case_id, output, metric, value, bound, passed, violations, "
                     "judged_relative, worst_index, first_failing_slice) VALUES (?,?,?,?,?,?,?,?,?,?)");
        ms.bind(1, case_id).bind(2, o.output).bind(3, m.metric).bind(4, m.value).bind(5, m.bound);
        ms.bind(6, m.passed ? 1 : 0).bind(7, m.violations).bind(8, o.comparison.judged_relative ? 1 : 0);
        ms.bind(9, nlohmann::json(o.comparison.worst_index).dump());
        if (o.comparison.first_failing_slice) ms.bind(10, *o.comparison.first_failing_slice);
        ms.run();
        link("gate_metrics", sqlite3_last_insert_rowid(db_));
      }
    }
  }
  StageOutcome gate_stage;
  gate_stage.stage = "gate";
  gate_stage.verdict = stage_verdict_from(to_string(r.verdict));
  gate_stage.failure = r.failure;
  if (!record.lock_problems.empty() && !gate_stage.failure.failed()) gate_stage.failure.kind = FailureKind::lock;
  if (r.verdict != Verdict::green && !gate_stage.failure.failed()) gate_stage.failure.kind = FailureKind::unknown;
  gate_stage.reason = r.reason;
  gate_stage.wall_s = r.wall_s;
  insert_stage(experiment_id, gate_stage);
  t.commit();
  return gate_run_id;
}

void Ledger::record_bench(std::int64_t experiment_id, std::int64_t gate_run_id, const BenchResult& bench,
                          const Environment& env, const std::string& candidate_sha, const std::string& base_sha,
                          bool worktree_dirty) {
  Transaction t(db_);
  StageOutcome stage;
  stage.stage = "bench";
  stage.verdict = bench.interrupted ? StageVerdict::interrupted : stage_verdict_from(to_string(bench.verdict));
  stage.failure = bench.failure;
  if (bench.verdict != Verdict::green && !stage.failure.failed()) stage.failure.kind = FailureKind::unknown;
  stage.reason = bench.reason;
  stage.wall_s = bench.harness_wall_s;
  insert_stage(experiment_id, stage);
  if (bench.verdict != Verdict::green) {
    t.commit();
    return;
  }
  nlohmann::json clocks = nlohmann::json::object();
  for (const auto& c : bench.cases) {
    const Decision& d = c.decision;
    nlohmann::json rounds = nlohmann::json::array();
    for (std::size_t r = 0; r < c.base.size() && r < c.candidate.size(); ++r) {
      nlohmann::json round = {{"base_ms", c.base[r].samples_ms}, {"candidate_ms", c.candidate[r].samples_ms}};
      if (c.base[r].sm_clock_mhz) round["base_sm_clock_mhz"] = *c.base[r].sm_clock_mhz;
      if (c.candidate[r].sm_clock_mhz) round["candidate_sm_clock_mhz"] = *c.candidate[r].sm_clock_mhz;
      if (r < c.base_walls.size() && r < c.candidate_walls.size()) {
        round["iterations"] = c.base_walls[r].iterations;  // warmup + timed, the same for both arms
        round["base_wall_ms"] = c.base_walls[r].wall_s * 1e3;
        round["candidate_wall_ms"] = c.candidate_walls[r].wall_s * 1e3;
      }
      rounds.push_back(round);
    }
    // Median SM clock per arm over the rounds that reported one.
    for (const auto* arm : {&c.base, &c.candidate}) {
      std::vector<double> mhz;
      for (const auto& r : *arm) {
        if (r.sm_clock_mhz) mhz.push_back(*r.sm_clock_mhz);
      }
      if (!mhz.empty()) clocks[c.bench_case.label][arm == &c.base ? "base_sm_clock_mhz" : "candidate_sm_clock_mhz"] = median(mhz);
    }
    Statement s(db_,
                "INSERT INTO bench_cases(experiment_id, gate_run_id, case_label, case_json, unit, verdict, reason, "
                "base_median, base_relative_spread, candidate_median, candidate_relative_spread, speedup, speedup_lo, "
                "speedup_hi, ci_confidence, p_value, rounds, threshold, capped, predicted_speedup, prediction_error, "
                "rounds_json, timing, timing_flags, timing_checks, guards) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    s.bind(1, experiment_id).bind(2, gate_run_id).bind(3, c.bench_case.label).bind(4, c.bench_case.values.dump());
    s.bind(5, c.unit).bind(6, to_string(d.verdict)).bind(7, d.reason).bind(8, d.base_median_ms);
    s.bind(9, d.base_relative_spread).bind(10, d.candidate_median_ms).bind(11, d.candidate_relative_spread);
    s.bind(12, d.speedup).bind(13, d.speedup_ci.lo).bind(14, d.speedup_ci.hi).bind(15, 1 - d.alpha_at_look);
    s.bind(16, d.p_value).bind(17, c.base.size()).bind(18, c.threshold).bind(19, c.capped ? 1 : 0);
    if (c.predicted_speedup) s.bind(20, *c.predicted_speedup);
    if (c.prediction_error) s.bind(21, *c.prediction_error);
    s.bind(22, rounds.dump());
    nlohmann::ordered_json flags = nlohmann::ordered_json::array();
    for (const auto& f : c.flags) flags.push_back({{"kind", to_string(f.kind)}, {"arm", f.arm}, {"reason", f.reason}, {"figures", f.figures}});
    s.bind(23, c.timing).bind(24, flags.dump()).bind(25, c.checks.dump());
    s.bind(26, guards_json(d).dump());
    s.run();
    link("bench_cases", sqlite3_last_insert_rowid(db_));
  }
  Statement e(db_,
              "INSERT INTO environments(experiment_id, host, cpu_model, gpus, cuda_version, compiler, flags, candidate_sha, "
              "base_sha, worktree_dirty, clocks) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
  e.bind(1, experiment_id).bind(2, env.host).bind(3, env.cpu_model).bind(4, env.gpus.dump()).bind(5, env.cuda_version);
  e.bind(6, env.compiler).bind(7, env.flags).bind(8, candidate_sha).bind(9, base_sha).bind(10, worktree_dirty ? 1 : 0);
  e.bind(11, clocks.dump());
  e.run();
  link("environments", sqlite3_last_insert_rowid(db_));
  t.commit();
}

std::int64_t Ledger::record_ceilings(const MachineCeilings& m) {
  Transaction t(db_);
  Statement s(db_,
              "INSERT INTO machine_ceilings(host, device, device_name, bytes_per_s, flops_per_s, figures, tool, measured_at) "
              "VALUES (?,?,?,?,?,?,?,?)");
  s.bind(1, m.host).bind(2, m.device).bind(3, m.device_name).bind(4, m.bytes_per_s).bind(5, m.flops_per_s);
  s.bind(6, m.figures.dump()).bind(7, m.tool).bind(8, m.measured_at);
  s.run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  link("machine_ceilings", id);
  t.commit();
  return id;
}

std::optional<MachineCeilings> Ledger::latest_ceilings(const std::string& host, const std::string& device) const {
  Statement s(db_,
              "SELECT host, device, device_name, bytes_per_s, flops_per_s, figures, tool, measured_at FROM machine_ceilings "
              "WHERE host = ? AND device = ? ORDER BY id DESC LIMIT 1");
  s.bind(1, host).bind(2, device);
  if (!s.step()) return std::nullopt;
  MachineCeilings m;
  m.host = s.column(0).get<std::string>();
  m.device = s.column(1).get<std::string>();
  m.device_name = s.column(2).get<std::string>();
  m.bytes_per_s = s.column(3).get<double>();
  m.flops_per_s = s.column(4).get<double>();
  m.figures = parse_json_column(s.column(5));
  m.tool = s.column(6).get<std::string>();
  m.measured_at = s.column(7).get<std::string>();
  return m;
}

void Ledger::record_calibration(const Calibration& c) {
  Transaction t(db_);
  Statement s(db_,
              "INSERT INTO calibrations(gate, gate_sha256, case_label, host, params, comparisons, noise_floor, "
              "false_verdict_rate, verdicts, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, c.gate).bind(2, c.gate_sha256).bind(3, c.case_label).bind(4, c.host).bind(5, c.params.dump());
  s.bind(6, c.comparisons).bind(7, c.noise_floor).bind(8, c.false_verdict_rate).bind(9, c.verdicts.dump()).bind(10, utc_now());
  s.run();
  link("calibrations", sqlite3_last_insert_rowid(db_));
  t.commit();
}

std::map<std::string, double> Ledger::noise_floors(const std::string& gate, const std::string& host) const {
  std::map<std::string, double> out;
  Statement s(db_, "SELECT case_label, noise_floor FROM calibrations WHERE gate = ? AND host = ? ORDER BY id");
  s.bind(1, gate).bind(2, host);
  while (s.step()) out[s.column(0).get<std::string>()] = s.column(1).get<double>();  // the latest wins
  return out;
}

void Ledger::record_trace_findings(std::int64_t experiment_id, std::int64_t gate_run_id,
                                   const std::vector<TraceFindingRecord>& findings, const StageOutcome& outcome) {
  Transaction t(db_);
  insert_stage(experiment_id, outcome);
  for (const auto& f : findings) {
    Statement s(db_,
                "INSERT INTO trace_findings(experiment_id, gate_run_id, arm, check_index, kind, check_json, passed, value, "
                "bound, details, trace_file) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
    s.bind(1, experiment_id).bind(2, gate_run_id).bind(3, f.arm).bind(4, f.check_index).bind(5, f.kind);
    s.bind(6, f.check.dump()).bind(7, f.passed ? 1 : 0).bind(8, f.value).bind(9, f.bound).bind(10, f.details.dump());
    s.bind(11, f.trace_file);
    s.run();
    link("trace_findings", sqlite3_last_insert_rowid(db_));
  }
  t.commit();
}

std::int64_t Ledger::insert_stage(std::int64_t experiment_id, const StageOutcome& o, std::optional<std::int64_t> acceptance_run) {
  Statement s(db_,
              "INSERT INTO stage_outcomes(experiment_id, stage, verdict, failure_kind, failure_who, failure_signal, "
              "failure_exit_code, failure_output, failure_metric, reason, wall_s, acceptance_run_id, recorded_at, failure_detail) "
              "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, experiment_id).bind(2, o.stage).bind(3, to_string(o.verdict)).bind(4, to_string(o.failure.kind));
  s.bind(5, to_string(o.failure.who));
  if (o.failure.signal) s.bind(6, *o.failure.signal);
  if (o.failure.exit_code) s.bind(7, *o.failure.exit_code);
  s.bind(8, o.failure.output).bind(9, o.failure.metric).bind(10, o.reason).bind(11, o.wall_s);
  if (acceptance_run) s.bind(12, *acceptance_run);
  s.bind(13, utc_now()).bind(14, o.failure.detail);
  s.run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  link("stage_outcomes", id);
  return id;
}

void Ledger::record_stage(std::int64_t experiment_id, const StageOutcome& outcome) {
  Transaction t(db_);
  try {
    insert_stage(experiment_id, outcome);
  } catch (const InfraError& e) {
    refused(path_, experiment_id, e);
  }
  t.commit();
}

std::string Ledger::record_finished(std::int64_t experiment_id, const std::string& owner) {
  Transaction t(db_);
  // The latest row of each stage; acceptance comes after promotion and is
  // not part of the experiment's verdict.
  Statement q(db_,
              "SELECT s.stage, s.verdict, s.reason FROM stage_outcomes s WHERE s.experiment_id = ? AND s.stage <> 'acceptance' "
              "AND s.id = (SELECT MAX(x.id) FROM stage_outcomes x WHERE x.experiment_id = s.experiment_id AND x.stage = s.stage) "
              "ORDER BY s.id");
  q.bind(1, experiment_id);
  const auto rank = [](const std::string& v) { return v == "error" ? 3 : v == "red" ? 2 : v == "green" || v == "skipped" ? 0 : 1; };
  std::string verdict = "green", stage, reason;
  bool gate = false;
  while (q.step()) {
    const auto st = q.column(0).get<std::string>();
    const auto v = q.column(1).get<std::string>();
    gate = gate || st == "gate";
    if (rank(v) > rank(verdict)) {
      verdict = rank(v) == 1 ? "unknown" : v;
      stage = st;
      reason = q.column(2).get<std::string>();
    }
  }
  if (!gate) verdict = "error", stage = "gate", reason = "no gate stage was recorded";
  Statement o(db_, "INSERT INTO experiment_outcomes(experiment_id, verdict, stage, reason, recorded_at) VALUES (?,?,?,?,?)");
  o.bind(1, experiment_id).bind(2, verdict).bind(3, stage).bind(4, reason).bind(5, utc_now());
  o.run();
  link("experiment_outcomes", sqlite3_last_insert_rowid(db_));
  const auto me = current_process();
  Statement ev(db_,
               "INSERT INTO experiment_events(experiment_id, event, owner, owner_host, owner_pid, owner_start, detail, at) "
               "VALUES (?,'finished',?,?,?,?,'',?)");
  ev.bind(1, experiment_id).bind(2, owner).bind(3, me.host).bind(4, static_cast<std::int64_t>(me.pid)).bind(5, me.start_ticks);
  ev.bind(6, utc_now());
  ev.run();
  link("experiment_events", sqlite3_last_insert_rowid(db_));
  t.commit();
  return verdict;
}

BlindSpots Ledger::blind_spots(const std::string& gate) const {
  BlindSpots out;
  Statement run(db_,
                "SELECT g.id, g.experiment_id, g.finished_at FROM gate_runs g WHERE g.gate = ? AND EXISTS "
                "(SELECT 1 FROM gate_cases c WHERE c.gate_run_id = g.id AND c.passing_wrong_candidates <> '') "
                "ORDER BY g.id DESC LIMIT 1");
  run.bind(1, gate);
  if (!run.step()) return out;
  out.gate_run_id = run.column(0).get<std::int64_t>();
  out.experiment_id = run.column(1).get<std::int64_t>();
  out.recorded_at = run.column(2).get<std::string>();
  Statement s(db_, "SELECT case_label, output, candidate FROM gate_blind_spots WHERE gate_run_id = ? ORDER BY case_index");
  s.bind(1, out.gate_run_id);
  while (s.step()) {
    out.entries.push_back({s.column(0).get<std::string>(), s.column(1).get<std::string>(), s.column(2).get<std::string>()});
  }
  return out;
}

}  // namespace densefeed
