// A ledger of N experiments for the report's figures (report_html_figures.sh):
// the tf32 example's manifest recorded N times, each with a gate run over the
// cp-affine-chain quick grid (T x shards x regime, final_state rel_l2 and
// max_abs), one in three red (errors growing with shards, as tf32's do), the
// green ones benchmarked (9 rounds of 5 samples per arm); gate runs started
// two a day over the last N / 2 days (the ledger stamps submitted_at itself:
// now). Values are synthetic; only the sizes matter.
//
//   report_ledger_writer LEDGER PROJECT N
#include <cmath>
#include <ctime>
#include <iostream>
#include <random>
#include <string>

#include <fmt/format.h>

#include "gate_store.h"
#include "ledger.h"
#include "manifest.h"
#include "project.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: report_ledger_writer LEDGER PROJECT N\n";
    return 2;
  }
  namespace df = densefeed;
  try {
    const df::Project project = df::load_project(argv[2]);
    const df::GateStore store = df::worktree_store(project);
    const df::Manifest m = df::load_manifest(project.dir / "experiments/cp-affine-chain-tf32.yaml", store, project);
    const int n = std::stoi(argv[3]);
    df::Ledger ledger(argv[1]);
    std::mt19937_64 rng(19);
    std::normal_distribution<double> noise(0, 0.02);
    const std::time_t start = std::time(nullptr) - static_cast<std::time_t>(n / 2) * 86400;
    for (int i = 0; i < n; ++i) {
      const bool red = i % 3 == 1;
      df::GateResult result;
      result.verdict = red ? df::Verdict::red : df::Verdict::green;
      if (red) result.reason = "final_state.rel_l2 over its bound in 20 of 36 cases";
      int index = 0;
      for (const char* regime : {"long-memory", "fast-decay"}) {
        for (int t : {8000, 8192, 10240}) {
          for (int shards : {1, 2, 4, 8, 16, 64}) {
            df::CaseResult c;
            c.gate_case.values = {{"H", 1}, {"K", 128}, {"V", 128}, {"seq_lens", ""}, {"regime", regime}, {"T", t}, {"shards", shards}};
            c.gate_case.label = fmt::format("regime={} T={} shards={}", regime, t, shards);
            df::OutputResult o;
            o.output = "final_state";
            const double base = 1.5e-6 * (1 + noise(rng));
            const double e = red && shards > 1 && std::string(regime) == "long-memory" ? 1e-3 * std::sqrt(shards) * t / 8192.0 : base;
            o.comparison.rel_l2 = e;
            o.comparison.max_abs = 8 * e;
            o.comparison.checks = {{"rel_l2", e, 1e-5, e <= 1e-5, 0}, {"max_abs", 8 * e, 1e-4, 8 * e <= 1e-4, e > 1e-5 ? 1000u : 0u}};
            if (e > 1e-5) {
              o.comparison.verdict = df::Verdict::red;
              o.comparison.first_failing_slice = 0;
              c.verdict = df::Verdict::red;
              c.reason = "final_state: rel_l2 over its bound";
            }
            c.outputs.push_back(o);
            result.cases.push_back(c);
            ++index;
          }
        }
      }
      char at[32];
      const std::time_t when = start + static_cast<std::time_t>(i) * 43200;
      std::strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&when));
      const auto id = ledger.record_experiment({&m, {{"precision", red ? "tf32" : "tf32x3"}}, {{"precision", "tf32"}}});
      const auto run = ledger.record_gate_run(id, {"cp-affine-chain", std::string(64, 'a'), {}, "quick", static_cast<std::uint64_t>(i), at, &result});
      if (!red) {
        df::BenchResult bench;
        df::BenchCaseResult b;
        b.bench_case.values = {{"regime", "long-memory"}, {"T", 8192}, {"shards", 8}};
        b.bench_case.label = "regime=long-memory T=8192 shards=8";
        const double speedup = 0.8 + 0.4 * (i % 7) / 6.0;
        for (int r = 0; r < 9; ++r) {
          df::ArmRound base, cand;
          for (int s = 0; s < 5; ++s) {
            base.samples_ms.push_back(10 * (1 + noise(rng)));
            cand.samples_ms.push_back(10 / speedup * (1 + noise(rng)));
          }
          b.base.push_back(base);
          b.candidate.push_back(cand);
        }
        b.decision.verdict = speedup > 1.02 ? df::BenchVerdict::faster : speedup < 0.98 ? df::BenchVerdict::slower : df::BenchVerdict::same;
        b.decision.reason = "synthetic";
        b.decision.speedup = speedup;
        b.decision.speedup_ci = {speedup * 0.98, speedup * 1.02};
        b.decision.p_value = 0.004;
        b.decision.alpha_at_look = 0.0167;
        b.decision.base_median_ms = 10;
        b.decision.candidate_median_ms = 10 / speedup;
        b.predicted_speedup = 1.0;
        bench.cases.push_back(b);
        ledger.record_bench(id, run, bench, df::Environment{"perf-host", "cpu", nlohmann::json::array(), "", "g++", "-O2"}, "", "", false);
      }
      ledger.record_event(id, df::ExperimentEvent::finished, "run");
    }
  } catch (const std::exception& e) {
    std::cerr << "report_ledger_writer: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
