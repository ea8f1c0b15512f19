#include "experiment_summary.h"

namespace densefeed {

const char* to_string(StageVerdict v) {
  switch (v) {
    case StageVerdict::pending: return "pending";
    case StageVerdict::green: return "green";
    case StageVerdict::red: return "red";
    case StageVerdict::error: return "error";
    case StageVerdict::skipped: return "skipped";
    case StageVerdict::unknown: return "unknown";
    case StageVerdict::started: return "started";
    case StageVerdict::interrupted: return "interrupted";
  }
  return "unknown";
}

StageVerdict stage_verdict_from(const std::string& text) {
  for (auto v : {StageVerdict::pending, StageVerdict::green, StageVerdict::red, StageVerdict::error, StageVerdict::skipped,
                 StageVerdict::started, StageVerdict::interrupted}) {
    if (text == to_string(v)) return v;
  }
  return StageVerdict::unknown;
}

const StageOutcome& ExperimentSummary::stage(const std::string& name) const {
  for (const auto& s : stages) {
    if (s.stage == name) return s;
  }
  static const StageOutcome none;
  return none;
}

nlohmann::ordered_json to_json(const Failure& f) {
  nlohmann::ordered_json j = {{"kind", to_string(f.kind)}, {"who", to_string(f.who)}};
  if (f.signal) j["signal"] = *f.signal;
  if (f.exit_code) j["exit_code"] = *f.exit_code;
  if (!f.output.empty()) j["output"] = f.output;
  if (!f.metric.empty()) j["metric"] = f.metric;
  if (f.rank) j["rank"] = *f.rank;
  return j;
}

nlohmann::ordered_json to_json(const ExperimentSummary& s) {
  nlohmann::ordered_json stages = nlohmann::ordered_json::object();
  for (const auto& st : s.stages) {
    stages[st.stage] = {{"verdict", to_string(st.verdict)}, {"failure", to_json(st.failure)}, {"reason", st.reason},
                        {"wall_s", st.wall_s ? nlohmann::ordered_json(*st.wall_s) : nlohmann::ordered_json()}};
  }
  nlohmann::ordered_json speedups = nlohmann::ordered_json::array();
  for (const auto& b : s.speedups) {
    speedups.push_back({{"case", b.case_label}, {"verdict", b.verdict}, {"speedup", b.speedup}, {"speedup_lo", b.lo}, {"speedup_hi", b.hi}});
  }
  return {{"id", s.id}, {"name", s.name}, {"gate", s.gate}, {"author", s.author}, {"submitted_at", s.submitted_at},
          {"profile", s.profile.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(s.profile)}, {"state", to_string(s.state)},
          {"verdict", s.verdict}, {"verdict_stage", s.verdict_stage}, {"reason", s.reason}, {"stages", stages},
          {"speedups", speedups}, {"promoted", s.promoted}, {"base_origin", to_json(s.base_origin)}};
}

int exit_code_of(const ExperimentSummary& s) {
  if (is_running(s.state)) return kExitNotEnded;
  if (s.state == ExperimentState::rejected) return kExitUsage;
  if (s.verdict == to_string(Verdict::green)) return exit_code_of(Verdict::green);
  if (s.verdict == to_string(Verdict::red)) return exit_code_of(Verdict::red);
  return kExitError;
}

}  // namespace densefeed
