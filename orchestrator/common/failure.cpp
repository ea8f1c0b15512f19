#include "failure.h"

#include <cstring>

#include <fmt/format.h>


namespace densefeed {

const char* to_string(FailureKind k) {
  switch (k) {
    case FailureKind::none: return "none";
    case FailureKind::crash: return "crash";
    case FailureKind::exit_code: return "exit_code";
    case FailureKind::timeout: return "timeout";
    case FailureKind::no_start: return "no_start";
    case FailureKind::missing_output: return "missing_output";
    case FailureKind::malformed_output: return "malformed_output";
    case FailureKind::tolerance: return "tolerance";
    case FailureKind::trend: return "trend";
    case FailureKind::lock: return "lock";
    case FailureKind::sandbox: return "sandbox";
    case FailureKind::limit: return "limit";
    case FailureKind::implausible_timing: return "implausible_timing";
    case FailureKind::infrastructure: return "infrastructure";
    case FailureKind::unknown: return "unknown";
  }
  return "unknown";
}

const char* to_string(FailureWho w) {
  switch (w) {
    case FailureWho::none: return "";
    case FailureWho::reference: return "reference";
    case FailureWho::candidate: return "candidate";
    case FailureWho::base: return "base";
    case FailureWho::driver: return "driver";
    case FailureWho::densefeed: return "densefeed";
  }
  return "";
}

FailureKind failure_kind_from(const std::string& text) {
  for (auto k : {FailureKind::none, FailureKind::crash, FailureKind::exit_code, FailureKind::timeout, FailureKind::no_start,
                 FailureKind::missing_output, FailureKind::malformed_output, FailureKind::tolerance, FailureKind::trend, FailureKind::lock,
                 FailureKind::sandbox, FailureKind::limit, FailureKind::implausible_timing, FailureKind::infrastructure}) {
    if (text == to_string(k)) return k;
  }
  return FailureKind::unknown;
}

FailureWho failure_who_from(const std::string& text) {
  for (auto w : {FailureWho::reference, FailureWho::candidate, FailureWho::base, FailureWho::driver, FailureWho::densefeed}) {
    if (text == to_string(w)) return w;
  }
  return FailureWho::none;
}

std::string describe(const Failure& f) {
  const std::string who = f.who == FailureWho::none ? std::string("it") : std::string("the ") + to_string(f.who);
  std::string s;
  switch (f.kind) {
    case FailureKind::none: return "";
    case FailureKind::crash: {
      const int sig = f.signal.value_or(0);
      const char* name = sig > 0 ? sigabbrev_np(sig) : nullptr;
      s = fmt::format("{} was killed by signal {}{}", who, sig, name ? fmt::format(" (SIG{})", name) : "");
      break;
    }
    case FailureKind::exit_code: s = fmt::format("{} exited with code {}", who, f.exit_code.value_or(-1)); break;
    case FailureKind::timeout: s = fmt::format("{} timed out", who); break;
    case FailureKind::no_start: s = fmt::format("{} could not start", who); break;
    case FailureKind::missing_output: s = fmt::format("{} wrote no output {}", who, f.output); break;
    case FailureKind::malformed_output: s = fmt::format("{}'s output {} is malformed", who, f.output); break;
    case FailureKind::tolerance: s = fmt::format("{}: {} over its bound", f.output, f.metric); break;
    case FailureKind::trend: s = fmt::format("{}: {} grows faster along the sweep than the gate allows", f.output, f.metric); break;
    case FailureKind::lock: s = "the gate's lock does not hold"; break;
    case FailureKind::sandbox: s = fmt::format("the sandbox could not start {}", who); break;
    case FailureKind::limit: s = fmt::format("{} ran into a resource limit", who); break;
    case FailureKind::implausible_timing: s = fmt::format("{}'s timings contradict what densefeed measured", who); break;
    case FailureKind::infrastructure: s = "densefeed itself failed"; break;
    case FailureKind::unknown: s = "failed (how was not recorded)"; break;
  }
  if (!f.detail.empty()) s += "; " + f.detail;
  return s;
}

bool candidate_did_not_run(const Failure& f) {
  if (f.who != FailureWho::candidate) return false;
  switch (f.kind) {
    case FailureKind::no_start:
    case FailureKind::sandbox:
    case FailureKind::exit_code:
    case FailureKind::crash: return true;
    default: return false;
  }
}

std::string case_label(const std::string& verdict, const Failure& f) {
  return verdict != "green" && candidate_did_not_run(f) ? "error" : verdict;
}

}  // namespace densefeed
