// The one builder of a harness command (DESIGN.md, harness protocol): every
// stage that runs a manifest's harness (the gate's references and
// candidates, the bench's arms or their driver, the trace and acceptance
// commands, each as a process or as a session) describes it as a
// HarnessCall, and harness_command turns that into the UntrustedCommand the
// executor launches. What differs between the stages is data in the call;
// how a call becomes argv, environment, folders, logs and limits is decided
// here only, so that a harness of any stage is told the protocol the same
// way. Revision builds are not harness commands (revision_build.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arm_context.h"
#include "command_template.h"
#include "harness_protocol.h"
#include "process_limits.h"
#include "untrusted_launch.h"

namespace densefeed {

struct HarnessCall {
  ProtocolMode mode = ProtocolMode::gate;  // DENSEFEED_MODE
  // Where it runs from (arm_context.h); must outlive the command. Required.
  const ArmContext* arm = nullptr;
  std::vector<std::string> command;  // the argv template (command_template.h), rendered by arm_command
  TemplateValues values;             // its {case.K}, {param.K}, {seed}, {out}; values.seed is DENSEFEED_SEED too
  // DENSEFEED_CASE: the case as the harness is told it. Not always
  // values.case_values: a reference is told only the keys it is keyed by
  // (gate_runner.cpp reference_case); {} for trace and acceptance.
  nlohmann::ordered_json case_values = nlohmann::ordered_json::object();
  std::filesystem::path dir;  // its run folder: the cwd (shown read-only), dir/stdout.log and dir/stderr.log
  std::filesystem::path out;  // DENSEFEED_OUT, the one folder it may write (a session: its exchange folder)
  // A session (session.h) is told only its mode: each request carries its
  // case, seed, out and iterations.
  bool session = false;
  int warmup = 0, iters = 0;  // bench mode only: DENSEFEED_WARMUP, DENSEFEED_ITERS (iterations)
  std::string gpu;            // CUDA_VISIBLE_DEVICES densefeed sets ('' = none: the launcher's rule, untrusted_launch.h)
  // A driver's round (input_sets.h): the input sets it draws, warm-up
  // first, as DENSEFEED_INPUT_SEEDS; unset: none.
  std::optional<std::vector<std::uint64_t>> input_seeds;
  // A driver's outside-clock socket (outside_clock.h): inherited as
  // descriptor 3 and named in DENSEFEED_CLOCK_FD; -1: none.
  int clock_fd = -1;
  // What else the stage tells it: a driver's DENSEFEED_KERNEL..., a rank's
  // variables (rank_group.h). The protocol's variables above win over these.
  std::map<std::string, std::string> extra_env;
  // A multi-rank command: what each rank adds (UntrustedCommand::rank_env).
  std::vector<std::map<std::string, std::string>> rank_env;
  std::chrono::milliseconds timeout{static_cast<long long>(kDefaultHarnessTimeoutS * 1000)};
  CommandLimits limits;  // the gate's for an arm's code; the defaults for the trusted reference
  bool sandbox = true;   // false only for --no-sandbox
  std::vector<std::filesystem::path> readable;  // shown beside the arm's own folders (revision folders)
};

// The UntrustedCommand of `call`: argv = arm_command(command, values, *arm);
// env = extra_env, then the protocol's (protocol_environment, or
// bench_environment in bench mode; only DENSEFEED_MODE for a session), then
// DENSEFEED_INPUT_SEEDS, CUDA_VISIBLE_DEVICES, DENSEFEED_CLOCK_FD where set;
// cwd = dir; writable = {out}; logs dir/stdout.log and dir/stderr.log; the
// call's timeout, limits, sandbox, readable, rank_env and clock fd. Throws
// std::invalid_argument when the call has no arm, and as arm_command does
// (a python3 command with no interpreter resolved).
UntrustedCommand harness_command(const HarnessCall& call);

// `call` as a session serving its requests from `dir` (session.h): told its
// mode only, writing dir/exchange, its logs in dir, alive for the run (a
// week: each request has its own timeout). Its argv is the call's.
HarnessCall session_call(HarnessCall call, const std::filesystem::path& dir);

// Where the command of `call` writes `stream` ("stdout", "stderr").
std::filesystem::path harness_log(const HarnessCall& call, const char* stream);

// A timeout of `seconds` (a gate's timeout_s, a manifest's) in milliseconds,
// truncated as every stage has cast it.
std::chrono::milliseconds harness_timeout(double seconds);

}  // namespace densefeed
