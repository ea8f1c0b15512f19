#include "pending_results.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "error.h"

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

J failure_json(const Failure& f) {
  J j = {{"kind", to_string(f.kind)}, {"who", to_string(f.who)}, {"output", f.output}, {"metric", f.metric}, {"detail", f.detail}};
  if (f.signal) j["signal"] = *f.signal;
  if (f.exit_code) j["exit_code"] = *f.exit_code;
  return j;
}

Failure failure_of(const J& j) {
  Failure f;
  f.kind = failure_kind_from(j.at("kind").get<std::string>());
  f.who = failure_who_from(j.at("who").get<std::string>());
  f.output = j.at("output").get<std::string>();
  f.metric = j.at("metric").get<std::string>();
  f.detail = j.at("detail").get<std::string>();
  if (j.contains("signal")) f.signal = j["signal"].get<int>();
  if (j.contains("exit_code")) f.exit_code = j["exit_code"].get<int>();
  return f;
}

// NaN and Inf are not JSON numbers: kept as text.
J number(double v) { return std::isfinite(v) ? J(v) : J(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"); }
double number_of(const J& j) {
  if (j.is_number()) return j.get<double>();
  const auto t = j.get<std::string>();
  return t == "inf" ? INFINITY : t == "-inf" ? -INFINITY : NAN;
}

Verdict verdict_of(const std::string& v) { return v == "green" ? Verdict::green : v == "red" ? Verdict::red : Verdict::error; }

}  // namespace

const char* to_string(PendingRefusal r) {
  switch (r) {
    case PendingRefusal::none: return "none";
    case PendingRefusal::malformed: return "malformed";
    case PendingRefusal::unsigned_file: return "unsigned";
    case PendingRefusal::altered: return "altered";
    case PendingRefusal::transplanted: return "transplanted";
    case PendingRefusal::never_started: return "never started";
  }
  return "?";
}

std::string pending_signed_message(const nlohmann::json& doc) {
  nlohmann::json rest = doc;
  if (rest.is_object()) rest.erase("signature");
  return "densefeed pending gate run v1\n" + rest.dump();
}

std::filesystem::path write_pending_gate_run(const std::filesystem::path& dir, std::int64_t experiment_id,
                                             const GateRunRecord& rec, const Ledger& ledger) {
  const std::string nonce = ledger.run_nonce(experiment_id);
  if (nonce.empty()) {
    throw InfraError(fmt::format("experiment {} has no run nonce in {}: it was never started, so its results cannot be kept "
                                 "for recover", experiment_id, ledger.path().string()));
  }
  const GateResult& r = *rec.result;
  J cases = J::array();
  for (const auto& c : r.cases) {
    J outputs = J::array();
    for (const auto& o : c.outputs) {
      J checks = J::array();
      for (const auto& m : o.comparison.checks) {
        checks.push_back({{"metric", m.metric}, {"value", number(m.value)}, {"bound", number(m.bound)}, {"passed", m.passed},
                          {"violations", m.violations}});
      }
      outputs.push_back({{"output", o.output}, {"checks", checks}, {"judged_relative", o.comparison.judged_relative},
                         {"worst_index", o.comparison.worst_index},
                         {"first_failing_slice", o.comparison.first_failing_slice ? J(*o.comparison.first_failing_slice) : J()},
                         {"passing_wrong_candidates", o.passing_wrong_candidates}});
    }
    cases.push_back({{"label", c.gate_case.label}, {"values", c.gate_case.values}, {"verdict", to_string(c.verdict)},
                     {"reason", c.reason}, {"failure", failure_json(c.failure)}, {"reference_wall_s", c.reference_wall_s},
                     {"candidate_wall_s", c.candidate_wall_s}, {"parts", c.parts ? J(*c.parts) : J()}, {"outputs", outputs}});
  }
  J doc = {{"experiment_id", experiment_id},
                 {"nonce", nonce},
                 {"gate", rec.gate},
                 {"gate_sha256", rec.gate_sha256},
                 {"lock_problems", rec.lock_problems},
                 {"profile", rec.profile},
                 {"seed", std::to_string(rec.seed)},
                 {"started_at", rec.started_at},
                 {"provenance", rec.provenance_json},
                 {"sandbox", rec.sandbox},
                 {"output_capture", rec.output_capture},
                 {"verdict", to_string(r.verdict)},
                 {"reason", r.reason},
                 {"failure", failure_json(r.failure)},
                 {"wall_s", r.wall_s},
                 {"harness_wall_s", r.harness_wall_s},
                 {"cases", cases}};
  // Signed as read back: the canonical form of what a reader parses.
  doc["signature"] = ledger.sign(pending_signed_message(nlohmann::json::parse(doc.dump())));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const auto file = dir / kPendingGateRunFile;
  const auto tmp = dir / (std::string(kPendingGateRunFile) + ".tmp");
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << doc.dump(1) << "\n";
    f.flush();
    if (!f) throw InfraError(fmt::format("{}: cannot keep the gate's results here", tmp.string()));
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) throw InfraError(fmt::format("{}: cannot keep the gate's results here: {}", file.string(), ec.message()));
  return file;
}

PendingGateRun read_pending_gate_run(const std::filesystem::path& file) {
  std::ifstream f(file);
  PendingGateRun p;
  try {
    const J d = J::parse(f);
    p.experiment_id = d.at("experiment_id").get<std::int64_t>();
    auto& rec = p.record;
    rec.gate = d.at("gate").get<std::string>();
    rec.gate_sha256 = d.at("gate_sha256").get<std::string>();
    rec.lock_problems = d.at("lock_problems").get<std::vector<std::string>>();
    rec.profile = d.at("profile").get<std::string>();
    rec.seed = std::stoull(d.at("seed").get<std::string>());
    rec.started_at = d.at("started_at").get<std::string>();
    rec.provenance_json = d.at("provenance").get<std::string>();
    rec.sandbox = d.at("sandbox").get<std::string>();
    for (const auto& c : d.at("output_capture")) rec.output_capture.push_back(c);
    auto& r = p.result;
    r.verdict = verdict_of(d.at("verdict").get<std::string>());
    r.reason = d.at("reason").get<std::string>();
    r.failure = failure_of(d.at("failure"));
    r.wall_s = d.at("wall_s").get<double>();
    r.harness_wall_s = d.at("harness_wall_s").get<double>();
    for (const auto& cj : d.at("cases")) {
      CaseResult c;
      c.gate_case.label = cj.at("label").get<std::string>();
      c.gate_case.values = cj.at("values");
      c.verdict = verdict_of(cj.at("verdict").get<std::string>());
      c.reason = cj.at("reason").get<std::string>();
      c.failure = failure_of(cj.at("failure"));
      c.reference_wall_s = cj.at("reference_wall_s").get<double>();
      c.candidate_wall_s = cj.at("candidate_wall_s").get<double>();
      if (cj.contains("parts") && cj["parts"].is_number_integer()) c.parts = cj["parts"].get<std::int64_t>();
      for (const auto& oj : cj.at("outputs")) {
        OutputResult o;
        o.output = oj.at("output").get<std::string>();
        for (const auto& m : oj.at("checks")) {
          o.comparison.checks.push_back({m.at("metric").get<std::string>(), number_of(m.at("value")), number_of(m.at("bound")),
                                         m.at("passed").get<bool>(), m.at("violations").get<std::size_t>()});
        }
        o.comparison.judged_relative = oj.at("judged_relative").get<bool>();
        o.comparison.worst_index = oj.at("worst_index").get<std::vector<std::size_t>>();
        if (!oj.at("first_failing_slice").is_null()) o.comparison.first_failing_slice = oj["first_failing_slice"].get<std::size_t>();
        o.passing_wrong_candidates = oj.at("passing_wrong_candidates").get<std::vector<std::string>>();
        c.outputs.push_back(std::move(o));
      }
      r.cases.push_back(std::move(c));
    }
  } catch (const std::exception& e) {
    throw InputError(file.string(), {}, "", fmt::format("not a pending gate run densefeed wrote: {}", e.what()));
  }
  return p;
}

std::vector<std::filesystem::path> pending_gate_runs(const std::filesystem::path& runs_dir) {
  std::vector<std::pair<long long, std::filesystem::path>> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(runs_dir, ec)) {
    const auto file = e.path() / kPendingGateRunFile;
    if (!std::filesystem::is_regular_file(file, ec)) continue;
    long long id = 0;
    try {
      id = std::stoll(e.path().filename().string());
    } catch (...) {
      continue;
    }
    found.emplace_back(id, file);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::filesystem::path> out;
  for (auto& [id, f] : found) out.push_back(f);
  return out;
}

std::vector<RecoveredRun> recover_pending(Ledger& ledger, const std::filesystem::path& runs_dir) {
  std::vector<RecoveredRun> out;
  for (const auto& file : pending_gate_runs(runs_dir)) {
    RecoveredRun r;
    r.file = file.string();
    r.experiment_id = std::stoll(file.parent_path().filename().string());  // pending_gate_runs lists numbered folders only
    const auto refuse = [&](PendingRefusal why, std::string reason) {
      r.outcome = "refused";
      r.refusal = why;
      r.reason = std::move(reason);
      out.push_back(r);
    };
    nlohmann::json raw;
    try {
      std::ifstream f(file);
      raw = nlohmann::json::parse(f);
      if (!raw.is_object()) throw std::runtime_error("not a JSON object");
    } catch (const std::exception& e) {
      refuse(PendingRefusal::malformed, fmt::format("not JSON densefeed wrote: {}", e.what()));
      continue;
    }
    if (!raw.contains("signature") || !raw["signature"].is_string()) {
      refuse(PendingRefusal::unsigned_file, "it carries no signature: densefeed signs every pending gate run it keeps");
      continue;
    }
    if (raw["signature"].get<std::string>() != ledger.sign(pending_signed_message(raw))) {
      refuse(PendingRefusal::altered, "its signature does not verify under the ledger's key: it was changed after densefeed wrote it");
      continue;
    }
    PendingGateRun p;
    try {
      p = read_pending_gate_run(file);
    } catch (const InputError& e) {
      refuse(PendingRefusal::malformed, e.message());
      continue;
    }
    p.record.result = &p.result;
    const std::string nonce = raw.value("nonce", std::string());
    if (p.experiment_id != r.experiment_id) {
      refuse(PendingRefusal::transplanted, fmt::format("it lies in the run folder of experiment {} but is experiment {}'s",
                                                       r.experiment_id, p.experiment_id));
      continue;
    }
    if (!ledger.nonce_issued(p.experiment_id, nonce)) {
      if (ledger.run_nonce(p.experiment_id).empty()) {
        refuse(PendingRefusal::never_started, fmt::format("experiment {} was never started: the ledger issued it no run nonce",
                                                          p.experiment_id));
      } else {
        refuse(PendingRefusal::transplanted, fmt::format("its nonce {} was never issued to experiment {}", nonce, p.experiment_id));
      }
      continue;
    }
    r.cases = p.result.cases.size();
    const ExperimentSummary before = ledger.summary(p.experiment_id);
    if (before.stage("gate").verdict != StageVerdict::pending) {
      r.outcome = "already recorded";
    } else {
      ledger.record_gate_run(p.experiment_id, p.record);
      for (const char* stage : {"bench", "trace"}) {
        StageOutcome o;
        o.stage = stage;
        o.verdict = StageVerdict::skipped;
        o.reason = "not run: the run stopped when the ledger's write lock was not free; its gate results were recorded by "
                   "`densefeed ledger recover`";
        ledger.record_stage(p.experiment_id, o);
      }
      r.outcome = "recorded";
    }
    if (ledger.summary(p.experiment_id).verdict == "pending") ledger.record_finished(p.experiment_id, "recover");
    r.verdict = ledger.summary(p.experiment_id).verdict;
    std::error_code ec;
    std::filesystem::remove(file, ec);
    out.push_back(r);
  }
  return out;
}

}  // namespace densefeed
