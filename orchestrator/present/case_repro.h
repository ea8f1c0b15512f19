// densefeed repro ID CASE (issue 30): what a person runs by hand to see one
// gate case of a recorded experiment as densefeed ran it: both sides of the
// comparison (the gate's reference from the trusted ref's export, and the
// candidate from where it ran), each with its folder, environment and argv,
// the recorded seed, and the compare commands with the gate's tolerance.
// Built from the record (the gate run's provenance: arm_replay.h) and the
// gate, never from anything the candidate wrote. Outside densefeed's
// sandbox: the commands run as the person who runs them, and say so.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiment_record.h"
#include "gate_spec.h"

namespace densefeed {

// One side's command: `arm` is "reference" or "candidate"; `cwd` the folder
// it runs from; `env` what it adds to the environment (the harness
// protocol's DENSEFEED_* and the arm's own, PYTHONPATH); `argv` rendered as
// densefeed rendered it (argv[0] resolved in the arm's bin folders).
struct ReproCommand {
  std::string arm;
  std::string cwd;
  std::map<std::string, std::string> env;
  std::vector<std::string> argv;
  std::string out;  // its output folder, cwd/out (DENSEFEED_OUT and {out} say "out", relative to cwd)
};

struct CaseRepro {
  std::int64_t experiment_id = 0;
  std::string case_label;
  nlohmann::ordered_json case_values;  // object
  std::string seed;                    // decimal u64, as recorded
  std::string profile;
  std::string verdict;                 // the case's, as recorded (green | red | error)
  std::vector<ReproCommand> commands;  // reference, then candidate
  // Per gate output: `densefeed compare REF CAND` with the gate's bounds.
  std::vector<std::vector<std::string>> compare;
  std::vector<std::string> notes;  // what a person should know (sandbox off, a revision's build)
};

// The repro of the one case of `record`'s gate run that `case_filter`
// (case_filter.h: a label or key=value pairs) names, each side run from
// `dir`/reference and `dir`/candidate (as given: relative stays relative,
// so the script runs wherever it is pasted), outputs in their out/. Throws InputError (field
// "CASE") when the record has no gate run, the filter matches no case or
// more than one (naming them), or the record lacks the arms' provenance
// (recorded before issue 30 for the reference).
CaseRepro case_repro(const ExperimentRecord& record, const GateSpec& gate, const std::string& case_filter,
                     const std::filesystem::path& dir);

// {experiment_id, case, case_values, seed, profile, verdict, sandbox: "off",
// commands: [{arm, cwd, env, argv, out}], compare: [argv], notes: []}.
nlohmann::ordered_json case_repro_json(const CaseRepro& r);

// A POSIX shell script a person can paste: mkdir of the folders, each
// command in a subshell (cd, env, argv; every word single-quoted), then the
// compare commands, with comments saying what each is.
std::string render_case_repro(const CaseRepro& r);

}  // namespace densefeed
