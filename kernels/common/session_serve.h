// The serving side of harness sessions for C++ harnesses (orchestrator/
// session.h; schemas/session-request.schema.json and session-answer): the
// same loop as densefeed_harness.serve in Python.
#pragma once

#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness_env.h"

namespace densefeed {

// A case's key -> value, as JSON text per value ("4096", "\"tf32\"", "true"):
// what the request's "case" object (or DENSEFEED_CASE) holds.
using SessionCase = std::map<std::string, std::string>;

// A handler does one case: reads its inputs from env.seed, writes its
// outputs into *env.out (and samples.json in bench mode). Throwing fails the
// case: in a session the answer is {"status": "error", "message": what()}
// and the session goes on; outside one the exception propagates.
using SessionHandler = std::function<void(const HarnessEnv& env, const SessionCase& case_values)>;

// In a session (DENSEFEED_SESSION=1): for each request line on `in`, calls
// `handler` with that request's mode, seed, out, warmup and iters and case,
// then answers {"id": N, "status": "ok"} on `answers` (flushed). Returns at
// the end of input. Outside a session: calls `handler` once with the
// process's own environment (read_harness_env) and DENSEFEED_CASE. Returns
// how many cases it handled. Throws HarnessEnvError for a line that is not a
// request, or a malformed DENSEFEED_CASE.
int serve(const SessionHandler& handler, std::istream& in, std::ostream& answers);
// Same on stdin and stdout. In a session the answers keep descriptor 1 to
// themselves: std::cout, printf and anything else writing to descriptor 1
// (a library, a child process) go to stderr from then on. Throws
// HarnessEnvError if descriptor 1 cannot be duplicated.
int serve(const SessionHandler& handler);

// The arguments a case stands for, for a harness that takes its case as
// flags: `args` (its own, argv[1..] in order) followed by "--FLAG" "VALUE"
// for each (case key, --FLAG) of `flags` whose key the case holds and whose
// flag `args` does not give already (as "--FLAG" or "--FLAG=..."), in the
// order of `flags`. A session's command names no case (with protocol:
// session a gate's commands may not use {case.*}), so each request's case
// comes in here; outside a session DENSEFEED_CASE does the same for a
// command without case flags, and one that gives them keeps its own. A key
// the case lacks adds nothing (the harness's own check of a required flag
// names it). Throws nothing.
std::vector<std::string> case_args(std::vector<std::string> args, const SessionCase& case_values,
                                   const std::vector<std::pair<std::string, std::string>>& flags);

// serve() for a harness that takes its case as flags (the bundled ones):
// for each case, run_case(case_args(argv[1..argc), case, flags), env), with
// env the request's (or the process's) protocol variables. Returns how many
// cases it ran. Throws what serve() throws (HarnessEnvError outside a
// request) and, outside a session, what run_case throws.
int serve_case_flags(int argc, const char* const* argv, const std::vector<std::pair<std::string, std::string>>& flags,
                     const std::function<void(const std::vector<std::string>& args, const HarnessEnv& env)>& run_case);

}  // namespace densefeed
