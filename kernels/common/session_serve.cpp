#include "session_serve.h"

#include <unistd.h>

#include <cstdlib>
#include <ext/stdio_filebuf.h>
#include <iostream>
#include <ostream>

#include <nlohmann/json.hpp>

namespace densefeed {
namespace {

SessionCase case_of(const nlohmann::json& j, const char* what) {
  if (!j.is_object()) throw HarnessEnvError(std::string(what) + ": expected a JSON object of the case's keys");
  SessionCase c;
  for (const auto& [k, v] : j.items()) c[k] = v.is_string() ? v.get<std::string>() : v.dump();
  return c;
}

}  // namespace

int serve(const SessionHandler& handler, std::istream& in, std::ostream& answers) {
  const char* session = std::getenv("DENSEFEED_SESSION");
  if (!session || std::string(session) != "1") {
    const char* text = std::getenv("DENSEFEED_CASE");
    const auto doc = nlohmann::json::parse(text && *text ? text : "{}", nullptr, false);
    if (doc.is_discarded()) throw HarnessEnvError("DENSEFEED_CASE: not JSON");
    handler(read_harness_env(), case_of(doc, "DENSEFEED_CASE"));
    return 1;
  }
  int handled = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto req = nlohmann::json::parse(line, nullptr, false);
    if (req.is_discarded() || !req.is_object() || !req.contains("id") || !req.contains("case") || !req.contains("seed") ||
        !req.contains("out") || !req.contains("mode")) {
      throw HarnessEnvError("session request '" + line.substr(0, 200) + "': not a densefeed request");
    }
    const auto id = req["id"];
    try {
      const std::map<std::string, std::string> vars = {
          {"DENSEFEED_MODE", req["mode"].get<std::string>()},
          {"DENSEFEED_SEED", req["seed"].get<std::string>()},
          {"DENSEFEED_OUT", req["out"].get<std::string>()},
          {"DENSEFEED_WARMUP", std::to_string(req.value("warmup", 1))},
          {"DENSEFEED_ITERS", std::to_string(std::max(1, req.value("iters", 5)))}};
      const HarnessEnv env = read_harness_env([&](const char* name) -> std::optional<std::string> {
        const auto it = vars.find(name);
        return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
      });
      handler(env, case_of(req["case"], "the request's case"));
      answers << nlohmann::json{{"id", id}, {"status", "ok"}}.dump() << std::endl;
    } catch (const std::exception& e) {
      answers << nlohmann::json{{"id", id}, {"status", "error"}, {"message", e.what()}}.dump() << std::endl;
    }
    ++handled;
  }
  return handled;
}

int serve(const SessionHandler& handler) {
  const char* session = std::getenv("DENSEFEED_SESSION");
  if (!session || std::string(session) != "1") return serve(handler, std::cin, std::cout);
  // The answers get descriptor 1 to themselves: whatever else writes there
  // (std::cout, printf, a library, a child process) goes to stderr.
  std::cout.flush();
  const int fd = ::dup(1);
  if (fd < 0 || ::dup2(2, 1) < 0) throw HarnessEnvError("session: cannot keep stdout for the answers");
  __gnu_cxx::stdio_filebuf<char> buffer(fd, std::ios::out);
  std::ostream answers(&buffer);
  return serve(handler, std::cin, answers);
}

std::vector<std::string> case_args(std::vector<std::string> args, const SessionCase& case_values,
                                   const std::vector<std::pair<std::string, std::string>>& flags) {
  const auto given = [&args](const std::string& flag) {
    for (const auto& a : args) {
      if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
    }
    return false;
  };
  std::vector<std::pair<std::string, std::string>> added;
  for (const auto& [key, flag] : flags) {
    const auto it = case_values.find(key);
    if (it != case_values.end() && !given(flag)) added.emplace_back(flag, it->second);
  }
  for (auto& [flag, value] : added) {
    args.push_back(std::move(flag));
    args.push_back(std::move(value));
  }
  return args;
}

int serve_case_flags(int argc, const char* const* argv, const std::vector<std::pair<std::string, std::string>>& flags,
                     const std::function<void(const std::vector<std::string>& args, const HarnessEnv& env)>& run_case) {
  const std::vector<std::string> own(argv + (argc > 0 ? 1 : 0), argv + (argc > 0 ? argc : 0));
  return serve([&](const HarnessEnv& env, const SessionCase& c) { run_case(case_args(own, c, flags), env); });
}

}  // namespace densefeed
