#include "gate_reason.h"

#include <fmt/format.h>

#include "failure.h"

namespace densefeed {

std::string gate_reason(const std::vector<CaseResult>& cases) {
  std::size_t failing = 0, tolerance = 0, did_not_run = 0, timeout = 0, output = 0, error = 0, other = 0;
  const CaseResult* first_not_run = nullptr;
  for (const auto& c : cases) {
    if (c.verdict == Verdict::green) continue;
    ++failing;
    if (c.verdict == Verdict::error) {
      ++error;
    } else if (candidate_did_not_run(c.failure)) {
      ++did_not_run;
      if (!first_not_run) first_not_run = &c;
    } else if (c.failure.kind == FailureKind::tolerance || c.failure.kind == FailureKind::trend) {
      ++tolerance;
    } else if (c.failure.kind == FailureKind::timeout) {
      ++timeout;
    } else if (c.failure.kind == FailureKind::missing_output || c.failure.kind == FailureKind::malformed_output) {
      ++output;
    } else {
      ++other;
    }
  }
  if (failing == 0) return "";
  std::string parts;
  const auto add = [&](std::size_t n, const std::string& what) {
    if (n > 0) parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", n, what);
  };
  add(tolerance, "over tolerance");
  add(did_not_run, first_not_run ? fmt::format("where the candidate's process failed (error: {})", first_not_run->reason)
                                 : std::string("where the candidate's process failed"));
  add(timeout, "timed out");
  add(output, "with missing or malformed output");
  add(error, "where the reference or densefeed failed");
  add(other, "red otherwise");
  return fmt::format("{} of {} case(s) not green: {}", failing, cases.size(), parts);
}

std::vector<std::string> files_only_on_trusted_ref(const std::vector<std::string>& command, const ArmContext& candidate,
                                                   const ArmContext& reference) {
  std::vector<std::string> found;
  if (candidate.project.empty() || reference.project.empty()) return found;
  for (std::string token : command) {
    if (token.rfind("{project}/", 0) == 0) token = token.substr(10);
    if (token.empty() || token[0] == '-' || token[0] == '/' || token.find('{') != std::string::npos ||
        token.find('/') == std::string::npos) {
      continue;
    }
    const auto rel = std::filesystem::path(token).lexically_normal();
    if (rel.empty() || *rel.begin() == "..") continue;
    std::error_code ec;
    if (std::filesystem::is_regular_file(reference.project / rel, ec) && !std::filesystem::exists(candidate.project / rel, ec)) {
      found.push_back(rel.string());
    }
  }
  return found;
}

}  // namespace densefeed
