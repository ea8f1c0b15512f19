// Reading the ledger out: the typed summaries of experiments (list), one
// experiment's rows (show), one table's or view's rows and columns, and the
// export of every table.
#include "ledger.h"

#include <sqlite3.h>

#include <limits>
#include <map>

#include <fmt/format.h>

#include "error.h"
#include "ledger_sql.h"

namespace densefeed {
using namespace ledger_sql;

std::vector<ExperimentSummary> Ledger::summaries(const ListFilter& filter) const {
  return summaries_where(filter, 0);
}

ExperimentSummary Ledger::summary(std::int64_t experiment_id) const {
  auto all = summaries_where({}, experiment_id);
  if (all.empty()) throw InputError(path_.string(), {}, "", fmt::format("no experiment with id {} in the ledger", experiment_id));
  return all.front();
}

std::vector<ExperimentSummary> Ledger::summaries_where(const ListFilter& filter, std::int64_t only_id) const {
  std::vector<ExperimentSummary> out;
  std::map<std::int64_t, std::size_t> index;
  // Base tables only: no view stands between the rows and what is printed.
  Statement s(db_, fmt::format(
      "SELECT e.id, e.name, e.gate, e.author, e.submitted_at, g.profile, {} AS state, o.verdict, o.stage, o.reason, "
      "EXISTS (SELECT 1 FROM promotions p WHERE p.experiment_id = e.id), e.base_origin, e.base_origin_detail "
      "FROM experiments e LEFT JOIN gate_runs g ON g.experiment_id = e.id "
      "LEFT JOIN experiment_outcomes o ON o.experiment_id = e.id "
      "WHERE (?1 = 0 OR e.id = ?1) AND (?2 = '' OR e.gate = ?2) AND (?4 = '' OR e.submitted_at >= ?4) "
      "AND (?3 = '' OR COALESCE(o.verdict, 'pending') = ?3 OR {} = ?3) ORDER BY e.id", kStateSql, kStateSql).c_str());
  s.bind(1, only_id).bind(2, filter.gate).bind(3, filter.verdict).bind(4, filter.since);
  while (s.step()) {
    ExperimentSummary e;
    e.id = s.column(0).get<std::int64_t>();
    e.name = s.column(1).get<std::string>();
    e.gate = s.column(2).get<std::string>();
    e.author = s.column(3).get<std::string>();
    e.submitted_at = s.column(4).get<std::string>();
    e.profile = s.column(5).is_string() ? s.column(5).get<std::string>() : "";
    e.state = state_of(s.column(6));
    if (s.column(7).is_string()) {
      e.verdict = s.column(7).get<std::string>();
      e.verdict_stage = e.verdict == "green" ? "" : s.column(8).get<std::string>();
      e.reason = e.verdict == "green" ? "" : s.column(9).get<std::string>();
    }
    e.promoted = s.column(10).get<std::int64_t>() != 0;
    e.base_origin = base_origin_from_json(s.column(11).get<std::string>(),
                                          nlohmann::json::parse(s.column(12).get<std::string>(), nullptr, false));
    for (const char* st : {"gate", "bench", "trace", "acceptance"}) {
      StageOutcome o;
      o.stage = st;
      e.stages.push_back(o);
    }
    index[e.id] = out.size();
    out.push_back(std::move(e));
  }
  if (out.empty()) return out;
  const std::int64_t lo = out.front().id, hi = out.back().id;
  Statement st(db_,
               "SELECT experiment_id, stage, verdict, failure_kind, failure_who, failure_signal, failure_exit_code, failure_output, "
               "failure_metric, reason, wall_s, recorded_at, failure_detail FROM stage_outcomes WHERE experiment_id BETWEEN ? AND ? ORDER BY id");
  st.bind(1, lo).bind(2, hi);
  while (st.step()) {
    const auto it = index.find(st.column(0).get<std::int64_t>());
    if (it == index.end()) continue;
    auto& e = out[it->second];
    const auto name = st.column(1).get<std::string>();
    for (auto& o : e.stages) {
      if (o.stage != name) continue;  // later rows (a re-run acceptance) replace earlier ones
      o.verdict = stage_verdict_from(st.column(2).get<std::string>());
      o.failure = Failure{};
      o.failure.kind = failure_kind_from(st.column(3).get<std::string>());
      o.failure.who = failure_who_from(st.column(4).get<std::string>());
      if (st.column(5).is_number_integer()) o.failure.signal = static_cast<int>(st.column(5).get<std::int64_t>());
      if (st.column(6).is_number_integer()) o.failure.exit_code = static_cast<int>(st.column(6).get<std::int64_t>());
      o.failure.output = st.column(7).get<std::string>();
      o.failure.metric = st.column(8).get<std::string>();
      o.reason = st.column(9).get<std::string>();
      o.wall_s = st.column(10).is_number() ? std::optional<double>(st.column(10).get<double>()) : std::nullopt;
      o.recorded_at = st.column(11).get<std::string>();
      o.failure.detail = st.column(12).get<std::string>();
    }
  }
  // Speedups only of a green bench stage on a green gate stage.
  Statement b(db_, "SELECT experiment_id, case_label, verdict, speedup, speedup_lo, speedup_hi FROM bench_cases "
                   "WHERE experiment_id BETWEEN ? AND ? ORDER BY id");
  b.bind(1, lo).bind(2, hi);
  while (b.step()) {
    const auto it = index.find(b.column(0).get<std::int64_t>());
    if (it == index.end()) continue;
    auto& e = out[it->second];
    if (e.stage("gate").verdict != StageVerdict::green || e.stage("bench").verdict != StageVerdict::green) continue;
    // NULL (migration 10): a case stopped before a round, or two, has none.
    const auto real = [&](int i) {
      const auto v = b.column(i);
      return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
    };
    e.speedups.push_back({b.column(1).get<std::string>(), b.column(2).get<std::string>(), real(3), real(4), real(5)});
  }
  return out;
}

nlohmann::ordered_json Ledger::list(const ListFilter& filter) const {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& e : summaries(filter)) out.push_back(to_json(e));
  return out;
}

nlohmann::ordered_json Ledger::export_tables() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  Statement tables(db_, "SELECT name FROM sqlite_schema WHERE type = 'table' AND lower(substr(name, 1, 7)) <> 'sqlite_' ORDER BY name");
  std::vector<std::string> names;
  while (tables.step()) names.push_back(tables.column(0).get<std::string>());
  for (const auto& name : names) {
    out[name] = nlohmann::ordered_json::array();
    Statement rows(db_, fmt::format("SELECT * FROM \"{}\" ORDER BY rowid", name).c_str());
    while (rows.step()) out[name].push_back(rows.row());
  }
  return out;
}

namespace {

void require_relation(sqlite3* db, const std::filesystem::path& path, const std::string& name) {
  Statement s(db, "SELECT COUNT(*) FROM sqlite_schema WHERE type IN ('table', 'view') AND name = ? AND lower(substr(name, 1, 7)) <> 'sqlite_'");
  s.bind(1, name);
  s.step();
  if (s.column(0).get<std::int64_t>() == 0) {
    throw InputError(path.string(), {}, "--table", fmt::format("no table or view named '{}' in the ledger (schemas/ledger.md lists them)", name));
  }
}

}  // namespace

std::vector<std::string> Ledger::columns(const std::string& name) const {
  require_relation(db_, path_, name);
  return columns_of(db_, name);
}

nlohmann::ordered_json Ledger::rows(const std::string& name) const {
  require_relation(db_, path_, name);
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  Statement s(db_, fmt::format("SELECT * FROM \"{}\"", name).c_str());
  while (s.step()) out.push_back(s.row());
  return out;
}

nlohmann::ordered_json Ledger::show(std::int64_t experiment_id) const {
  Statement e(db_, "SELECT * FROM experiments WHERE id = ?");
  e.bind(1, experiment_id);
  if (!e.step()) {
    throw InputError(path_.string(), {}, "", fmt::format("no experiment with id {} in the ledger", experiment_id));
  }
  nlohmann::ordered_json out = e.row();
  for (const char* k : {"risk", "candidate_params", "base_params", "acceptance", "trace", "base_origin_detail", "case_filter"}) {
    out[k] = parse_json_column(out[k]);
  }
  // Issue 30: the experiments that replay or narrow this one, oldest first.
  out["children"] = nlohmann::ordered_json::array();
  Statement ch(db_, "SELECT id, step FROM experiments WHERE parent_id = ? ORDER BY id");
  ch.bind(1, experiment_id);
  while (ch.step()) out["children"].push_back(ch.row());
  // What densefeed narrow concluded about it (v12), oldest first.
  out["narrowings"] = nlohmann::ordered_json::array();
  Statement nw(db_, "SELECT layer, conclusion, result, recorded_at FROM narrowings WHERE experiment_id = ? ORDER BY id");
  nw.bind(1, experiment_id);
  while (nw.step()) {
    auto n = nw.row();
    n["result"] = parse_json_column(n["result"]);
    out["narrowings"].push_back(n);
  }
  out["state"] = to_string(state(experiment_id));
  out["events"] = nlohmann::ordered_json::array();
  Statement ev(db_, "SELECT event, owner, owner_host, owner_pid, detail, at FROM experiment_events WHERE experiment_id = ? ORDER BY id");
  ev.bind(1, experiment_id);
  while (ev.step()) out["events"].push_back(ev.row());

  Statement g(db_, "SELECT * FROM gate_runs WHERE experiment_id = ?");
  g.bind(1, experiment_id);
  out["gate_run"] = nullptr;
  if (g.step()) {
    auto run = g.row();
    run["lock_problems"] = parse_json_column(run["lock_problems"]);
    run["provenance"] = parse_json_column(run["provenance"]);
    run["cases"] = nlohmann::ordered_json::array();
    Statement cs(db_, "SELECT * FROM gate_cases WHERE gate_run_id = ? ORDER BY case_index");
    cs.bind(1, run["id"].get<std::int64_t>());
    while (cs.step()) {
      auto c = cs.row();
      c["case_json"] = parse_json_column(c["case_json"]);
      c["output_capture"] = parse_json_column(c["output_capture"]);
      c["metrics"] = nlohmann::ordered_json::array();
      Statement ms(db_, "SELECT output, metric, value, bound, passed, violations, judged_relative, worst_index, first_failing_slice FROM gate_metrics WHERE gate_case_id = ? ORDER BY id");
      ms.bind(1, c["id"].get<std::int64_t>());
      while (ms.step()) {
        auto m = ms.row();
        m["worst_index"] = parse_json_column(m["worst_index"]);
        c["metrics"].push_back(m);
      }
      run["cases"].push_back(c);
    }
    out["gate_run"] = run;
  }
  out["environment"] = nullptr;
  Statement env(db_, "SELECT * FROM environments WHERE experiment_id = ? ORDER BY id DESC LIMIT 1");
  env.bind(1, experiment_id);
  if (env.step()) {
    out["environment"] = env.row();
    out["environment"]["gpus"] = parse_json_column(out["environment"]["gpus"]);
  }
  out["bench_cases"] = nlohmann::ordered_json::array();
  Statement b(db_, "SELECT * FROM bench_cases WHERE experiment_id = ? ORDER BY id");
  b.bind(1, experiment_id);
  while (b.step()) {
    auto row = b.row();
    row["case_json"] = parse_json_column(row["case_json"]);
    row["rounds_json"] = parse_json_column(row["rounds_json"]);
    row["timing_flags"] = parse_json_column(row["timing_flags"]);
    row["timing_checks"] = parse_json_column(row["timing_checks"]);
    row["guards"] = parse_json_column(row["guards"]);
    out["bench_cases"].push_back(row);
  }
  out["trace_findings"] = nlohmann::ordered_json::array();
  Statement tf(db_, "SELECT * FROM trace_findings WHERE experiment_id = ? ORDER BY id");
  tf.bind(1, experiment_id);
  while (tf.step()) {
    auto row = tf.row();
    row["check_json"] = parse_json_column(row["check_json"]);
    row["details"] = parse_json_column(row["details"]);
    row["passed"] = row["passed"].get<std::int64_t>() != 0;
    out["trace_findings"].push_back(row);
  }
  const auto review = review_state(experiment_id);
  for (const auto& [k, v] : review.items()) out[k] = v;
  out["record"] = to_json(summary(experiment_id));
  return out;
}

}  // namespace densefeed
