// The densefeed command line: each file cli_*.cpp adds one family of verbs to
// the CLI11 app and returns, per verb, what runs when it was given. Verbs
// print text, or one JSON document with --json, and return the exit code
// (STYLE.md: 0 green, 1 red, 2 bad input, 3 infrastructure error); they throw
// InputError / InfraError, which main() reports.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gate_store.h"
#include "project.h"
#include "workspace.h"

namespace densefeed {

// What every verb may need, found once and only when asked: the project (from
// --project or by walking up from the current directory to densefeed.yaml),
// its ledger and workspace, and the gate store (the trusted ref's, or the
// worktree's with --trust-worktree). Throws InputError from the getters when
// there is no project or its densefeed.yaml is bad.
struct CliContext {
  std::string project_text;     // --project ('' = walk up from the current directory)
  std::string ledger_text;      // --ledger ('' = the project's ledger)
  bool trust_worktree = false;  // --trust-worktree
  bool json = false;            // --json

  const Project& project();
  // --ledger when given (no project needed), else the project's.
  std::filesystem::path ledger_path();
  Workspace workspace() { return Workspace{ledger_path()}; }
  const GateStore& store();
  // The project folder as it is (gate lock, gate verify).
  GateStore worktree() { return worktree_store(project()); }

 private:
  std::optional<Project> project_;
  std::optional<GateStore> store_;
};

struct CliVerb {
  CLI::App* app;
  std::function<int()> run;
};

// --executor local|slurm on `verb` (executor.h); executor_factory.h
// make_executor makes the chosen one for RunOptions::executor (slurm:
// InfraError when sbatch, squeue or scancel are missing).
void add_executor_option(CLI::App* verb, std::string& name);

struct RunOptions;
// RunOptions with the context's project, gate store and workspace filled in.
RunOptions run_options(CliContext& ctx);
// The arguments that make a densefeed child process see the same project,
// ledger and gate store as this one (--project DIR [--trust-worktree]).
std::vector<std::string> context_args(CliContext& ctx);

// Decimal digits only, no sign, no wrap-around. Throws InputError naming `what`.
std::uint64_t parse_unsigned(const std::string& what, const std::string& text, std::uint64_t max);
// An experiment id given on the command line.
std::int64_t parse_experiment_id(const std::string& text);
// Adds `--ledger` and `--json` to a verb.
void add_ledger_and_json(CLI::App* verb, CliContext& ctx);

struct GateSpec;
// The gate named `name` from the context's gate store, for the trend axes and
// the rerun command of `next` (experiment_document.h): nullopt when it is
// gone, unreadable or no longer matches its lock (so not what ran). Never throws.
std::optional<GateSpec> locked_gate_for_next(CliContext& ctx, const std::string& name);

class Ledger;
// Throws InputError (exit 2) naming the first broken link when the ledger's
// hash chain does not verify: readers never print an edited ledger.
void require_intact_chain(const Ledger& ledger);

// ledger list|show|compare|export|verify, audit
std::vector<CliVerb> add_ledger_verbs(CLI::App& app, CliContext& ctx);
// review approve|reject, promote
std::vector<CliVerb> add_review_verbs(CLI::App& app, CliContext& ctx);
// submit, worker, status, cancel
std::vector<CliVerb> add_queue_verbs(CLI::App& app, CliContext& ctx);
// report (an HTML page of an experiment, a gate or the ledger)
std::vector<CliVerb> add_report_verbs(CLI::App& app, CliContext& ctx);
// machine calibrate (the machine's ceilings)
std::vector<CliVerb> add_machine_verbs(CLI::App& app, CliContext& ctx);
// mcp (the Model Context Protocol server)
std::vector<CliVerb> add_mcp_verbs(CLI::App& app, CliContext& ctx);

}  // namespace densefeed
