#include "report.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error_trend.h"

namespace densefeed {
namespace {

std::string sci(double v) { return std::isnan(v) ? "nan" : fmt::format("{:.2e}", v); }

nlohmann::ordered_json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
}

std::vector<TrendTable> trends(const ExperimentOutcome& o) {
  if (!o.gate || o.gate->trend_rows.empty()) return {};
  return build_trend_tables(o.gate_result, o.gate->trend_rows, o.gate->trend_columns);
}

std::string worst_text(const Comparison& c) {
  if (c.worst_index.empty()) return "";
  return fmt::format("worst element [{}]: candidate {:.6g}, reference {:.6g}", fmt::join(c.worst_index, ","),
                     c.worst_candidate, c.worst_reference);
}

}  // namespace

std::string render_text_report(const ExperimentOutcome& o) {
  const Manifest& m = o.manifest;
  std::string s;
  s += fmt::format("experiment {} '{}' — gate {} (profile {}, seed {})\n", o.experiment_id, m.name, m.gate, o.profile, o.seed);
  s += fmt::format("  hypothesis: {}\n  predicted:  {}\n", m.hypothesis, m.predicted_effect);
  s += fmt::format("  candidate: {} {}   base: {} {}\n", m.candidate.revision, o.candidate_params.dump(), m.base.revision,
                   o.base_params.dump());
  const GateResult& g = o.gate_result;
  s += fmt::format("\ngate: {}{}\n", to_string(g.verdict), g.reason.empty() ? "" : " — " + g.reason);
  if (!o.lock_problems.empty()) {
    s += "  lock: NOT OK\n";
    for (const auto& p : o.lock_problems) s += "    " + p + "\n";
  } else {
    s += fmt::format("  lock: ok (gate sha256 {})\n", o.gate_sha256);
  }
  if (!g.cases.empty()) {
    s += fmt::format("  {:<52} {:<7} {:<12} {:>9} {:>9} {:>9} {:>9}\n", "case", "verdict", "output", "rel_l2", "bound",
                     "max_abs", "bound");
    for (const auto& c : g.cases) {
      if (c.outputs.empty()) {
        s += fmt::format("  {:<52} {:<7} {}\n", c.gate_case.label, to_string(c.verdict), c.reason);
        continue;
      }
      for (const auto& out : c.outputs) {
        double rel = NAN, rel_bound = NAN, abs = NAN, abs_bound = NAN;
        for (const auto& chk : out.comparison.checks) {
          if (chk.metric == "rel_l2") rel = chk.value, rel_bound = chk.bound;
          if (chk.metric == "max_abs") abs = chk.value, abs_bound = chk.bound;
        }
        s += fmt::format("  {:<52} {:<7} {:<12} {:>9} {:>9} {:>9} {:>9}\n", c.gate_case.label,
                         to_string(out.comparison.verdict), out.output, sci(rel), sci(rel_bound), sci(abs), sci(abs_bound));
      }
    }
    bool any_failed = false;
    for (const auto& c : g.cases) {
      if (c.verdict == Verdict::green) continue;
      if (!any_failed) s += "  not green:\n";
      any_failed = true;
      s += fmt::format("    [{}] {}: {}\n", to_string(c.verdict), c.gate_case.label, c.reason);
      for (const auto& out : c.outputs) {
        if (out.comparison.verdict != Verdict::green && !out.comparison.worst_index.empty()) {
          s += fmt::format("      {}: {}\n", out.output, worst_text(out.comparison));
        }
      }
      if (!c.log_tail.empty()) s += "      stderr: " + c.log_tail + "\n";
    }
  }
  for (const auto& t : trends(o)) s += "\n" + render_trend_table(t);

  s += "\nbench: ";
  if (!o.bench) {
    s += "not run (" + o.bench_skipped + ")\n";
  } else if (o.bench->verdict != Verdict::green) {
    s += fmt::format("{} — {}\n", to_string(o.bench->verdict), o.bench->reason);
  } else {
    s += "candidate vs base, interleaved rounds (speedup = base time / candidate time)\n";
    for (const auto& c : o.bench->cases) {
      s += fmt::format("  {}: speedup {:.3f}x (rounds {:.3f}..{:.3f}, n={}); base median {:.3f} {} (IQR/median {:.1f}%), "
                       "candidate median {:.3f} {} (IQR/median {:.1f}%)\n",
                       c.bench_case.label, c.speedup, c.speedup_min, c.speedup_max, c.round_speedups.size(), c.base.median,
                       c.unit, 100 * c.base.relative_iqr, c.candidate.median, c.unit, 100 * c.candidate.relative_iqr);
    }
  }
  s += fmt::format("\nverdict: {}   (experiment {}, {:.1f} s, harness logs in {})\n", to_string(o.verdict), o.experiment_id,
                   o.wall_s, o.work_dir.string());
  return s;
}

nlohmann::ordered_json report_json(const ExperimentOutcome& o, const std::string& ledger_path) {
  using J = nlohmann::ordered_json;
  J cases = J::array();
  for (const auto& c : o.gate_result.cases) {
    J outputs = J::array();
    for (const auto& out : c.outputs) {
      J checks = J::array();
      for (const auto& chk : out.comparison.checks) {
        checks.push_back({{"metric", chk.metric}, {"value", number_or_null(chk.value)}, {"bound", chk.bound}, {"passed", chk.passed}});
      }
      outputs.push_back({{"output", out.output},
                         {"verdict", to_string(out.comparison.verdict)},
                         {"reason", out.comparison.reason},
                         {"metrics", checks},
                         {"worst_index", out.comparison.worst_index},
                         {"worst_candidate", number_or_null(out.comparison.worst_candidate)},
                         {"worst_reference", number_or_null(out.comparison.worst_reference)},
                         {"candidate_nonfinite", out.comparison.candidate_nonfinite}});
    }
    cases.push_back({{"case", c.gate_case.label},
                     {"values", c.gate_case.values},
                     {"verdict", to_string(c.verdict)},
                     {"reason", c.reason},
                     {"outputs", outputs},
                     {"reference_wall_s", c.reference_wall_s},
                     {"candidate_wall_s", c.candidate_wall_s},
                     {"stderr_tail", c.log_tail}});
  }
  J tables = J::array();
  for (const auto& t : trends(o)) tables.push_back(trend_table_json(t));

  J bench = {{"status", o.bench ? to_string(o.bench->verdict) : "skipped"},
             {"reason", o.bench ? o.bench->reason : o.bench_skipped},
             {"cases", J::array()}};
  if (o.bench) {
    for (const auto& c : o.bench->cases) {
      bench["cases"].push_back({{"case", c.bench_case.label},
                                {"unit", c.unit},
                                {"speedup", c.speedup},
                                {"speedup_min", c.speedup_min},
                                {"speedup_max", c.speedup_max},
                                {"round_speedups", c.round_speedups},
                                {"base_median", c.base.median},
                                {"base_relative_iqr", c.base.relative_iqr},
                                {"candidate_median", c.candidate.median},
                                {"candidate_relative_iqr", c.candidate.relative_iqr}});
    }
  }
  return {{"experiment_id", o.experiment_id},
          {"experiment", o.manifest.name},
          {"gate", o.manifest.gate},
          {"profile", o.profile},
          {"seed", std::to_string(o.seed)},
          {"verdict", to_string(o.verdict)},
          {"candidate", {{"revision", o.manifest.candidate.revision}, {"params", o.candidate_params}}},
          {"base", {{"revision", o.manifest.base.revision}, {"params", o.base_params}}},
          {"stages",
           {{"gate",
             {{"verdict", to_string(o.gate_result.verdict)},
              {"reason", o.gate_result.reason},
              {"gate_sha256", o.gate_sha256},
              {"lock_problems", o.lock_problems},
              {"wall_s", o.gate_result.wall_s},
              {"harness_wall_s", o.gate_result.harness_wall_s},
              {"cases", cases},
              {"trend_tables", tables}}},
            {"bench", bench}}},
          {"wall_s", o.wall_s},
          {"ledger", ledger_path},
          {"work_dir", o.work_dir.string()}};
}

}  // namespace densefeed
