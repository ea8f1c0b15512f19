#include "process_json.h"

namespace densefeed {
namespace {

using J = nlohmann::json;

J capture(const CaptureCounts& c) { return {{"bytes", c.bytes}, {"dropped", c.dropped}}; }
CaptureCounts capture(const J& j) { return {j.at("bytes").get<std::uint64_t>(), j.at("dropped").get<std::uint64_t>()}; }

}  // namespace

nlohmann::json process_result_to_json(const ProcessResult& p) {
  return {{"started", p.started},
          {"start_error", p.start_error},
          {"exit_code", p.exit_code},
          {"signal", p.signal},
          {"timed_out", p.timed_out},
          {"cancelled", p.cancelled},
          {"timeout_s", p.timeout_s},
          {"kill_grace_s", p.kill_grace_s},
          {"sigkill_needed", p.sigkill_needed},
          {"strays_killed", p.strays_killed},
          {"stdout_capture", capture(p.stdout_capture)},
          {"stderr_capture", capture(p.stderr_capture)},
          {"wall_s", p.wall_s},
          {"resolved_exe", p.resolved_exe},
          {"ended_by", p.ended_by}};
}

ProcessResult process_result_from_json(const nlohmann::json& p) {
  ProcessResult q;
  q.started = p.at("started").get<bool>();
  q.start_error = p.at("start_error").get<std::string>();
  q.exit_code = p.at("exit_code").get<int>();
  q.signal = p.at("signal").get<int>();
  q.timed_out = p.at("timed_out").get<bool>();
  q.cancelled = p.at("cancelled").get<bool>();
  q.timeout_s = p.at("timeout_s").get<double>();
  q.kill_grace_s = p.at("kill_grace_s").get<double>();
  q.sigkill_needed = p.at("sigkill_needed").get<bool>();
  q.strays_killed = p.at("strays_killed").get<std::size_t>();
  q.stdout_capture = capture(p.at("stdout_capture"));
  q.stderr_capture = capture(p.at("stderr_capture"));
  q.wall_s = p.at("wall_s").get<double>();
  q.resolved_exe = p.at("resolved_exe").get<std::string>();
  q.ended_by = p.at("ended_by").get<std::string>();
  return q;
}

}  // namespace densefeed
