// The densefeed command line: each file cli_*.cpp adds one family of verbs to
// the CLI11 app and returns, per verb, what runs when it was given. Verbs
// print text, or one JSON document with --json, and return the exit code
// (STYLE.md: 0 green, 1 red, 2 bad input, 3 infrastructure error); they throw
// InputError / InfraError, which main() reports.
#pragma once

#include <cstdint>
#include <exception>
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

// How much of the gate store a verb needs. The context opens it, or not, in
// its one resolution, so that what one accessor returns never depends on
// which other accessor was called first.
enum class StoreUse {
  none,         // the project and its ledger only (the store is never opened)
  if_exported,  // the trusted ref's export, only when one was made before
                // (not --trust-worktree, the project in git, the workspace's
                // exports folder there): gate verify checks it without making one
  always,       // the gate store, and with it the trusted ref's configuration
  when_asked,   // opened by the first store() call: for verbs that read the
                // ledger and want the store only sometimes (a gate's report
                // axes); project() read before that call is refused
};

// What every verb may need, resolved once, at the first call of any accessor,
// in one fixed order (resolve() in cli.cpp): the worktree's project (from
// --project or by walking up from the current directory to densefeed.yaml),
// its ledger (--ledger or the project's) and the ledger's chain key, then,
// as store_use says, the gate store (the trusted ref's, or the worktree's with
// --trust-worktree) with the tamper events it found recorded once in the
// ledger and the trusted ref's densefeed.yaml put in force. Errors are kept and
// thrown by the accessors that need what failed: project() and worktree()
// throw InputError when there is no project or its densefeed.yaml is bad;
// ledger_path() and workspace() only when there is also no --ledger;
// store() throws what opening the store threw (InputError, InfraError).
struct CliContext {
  std::string project_text;     // --project ('' = walk up from the current directory)
  std::string ledger_text;      // --ledger ('' = the project's ledger)
  std::string ledger_key_text;  // --ledger-key ('' = DENSEFEED_LEDGER_KEY, else densefeed.yaml's ledger_key, else ledger_key.h's default)
  bool trust_worktree = false;  // --trust-worktree
  bool json = false;            // --json
  std::string service_text;     // --service ('' = densefeed.yaml's service:, if any)
  bool die_with_parent = false; // --die-with-parent (hidden: a service's children)
  std::string peer;             // --peer (hidden): "LOGIN (uid N)", whom a densefeed service runs the verb for
  // main() sets it from the verb it runs (CliVerb::store) before the verb
  // runs; a context made elsewhere resolves everything.
  StoreUse store_use = StoreUse::always;

  // The project in force: as the trusted ref's densefeed.yaml configures it
  // once the gate store is open from that ref, else as the worktree's does.
  const Project& project();
  // --ledger when given (no project needed), else the worktree project's
  // ledger (where the gate store is exported, whatever the trusted ref's
  // densefeed.yaml names).
  std::filesystem::path ledger_path();
  Workspace workspace() { return Workspace{ledger_path()}; }
  const GateStore& store();
  // Whether this verb's resolution opened (or tried to open) the gate store.
  bool store_opened();
  // The project folder as it is, configured by the checked-out densefeed.yaml
  // (gate lock, gate verify).
  GateStore worktree();

 private:
  void resolve();
  void open_store();

  bool resolved_ = false;
  std::filesystem::path given_key_;  // --ledger-key or DENSEFEED_LEDGER_KEY, absolute ('' for neither)
  bool store_tried_ = false;
  bool project_read_ = false;
  std::optional<Project> worktree_project_;  // the checked-out densefeed.yaml's
  std::optional<Project> trusted_project_;   // the trusted ref's, once the store is open from it
  std::exception_ptr project_error_, store_error_;
  std::filesystem::path ledger_;
  std::optional<GateStore> store_;
};

struct CliVerb {
  CLI::App* app;
  std::function<int()> run;
  StoreUse store = StoreUse::when_asked;
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
// Adds `--ledger-key FILE` (the ledger's chain key file) to a verb.
void add_ledger_key_option(CLI::App* verb, CliContext& ctx);
// Adds `--ledger`, `--ledger-key` and `--json` to a verb.
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
// run (one experiment, now, in this process)
std::vector<CliVerb> add_run_verbs(CLI::App& app, CliContext& ctx);
// init (a new project)
std::vector<CliVerb> add_init_verbs(CLI::App& app, CliContext& ctx);
// gate lock|verify|list|show
std::vector<CliVerb> add_gate_verbs(CLI::App& app, CliContext& ctx);
// bench calibrate (a gate's noise floor on this machine)
std::vector<CliVerb> add_bench_verbs(CLI::App& app, CliContext& ctx);
// compare (two tensor files)
std::vector<CliVerb> add_compare_verbs(CLI::App& app, CliContext& ctx);
// narrow ID (cli_narrow.cpp).
std::vector<CliVerb> add_narrow_verbs(CLI::App& app, CliContext& ctx);
// repro ID CASE (cli_repro.cpp).
std::vector<CliVerb> add_repro_verbs(CLI::App& app, CliContext& ctx);
// trace analyze
std::vector<CliVerb> add_trace_verbs(CLI::App& app, CliContext& ctx);
// serve (a densefeed service for agents and people, over a unix socket)
std::vector<CliVerb> add_serve_verbs(CLI::App& app, CliContext& ctx);

}  // namespace densefeed
