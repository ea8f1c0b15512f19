#include "cli.h"

#include <cstdlib>

#include "executor.h"
#include "process_runner.h"
#include "slurm_executor.h"

#include <charconv>

#include <fmt/format.h>

#include "error.h"
#include "experiment_runner.h"
#include "gate_lock.h"
#include "ledger.h"
#include "ledger_key.h"

#include <iostream>

namespace densefeed {

const Project& CliContext::project() {
  if (!project_) project_ = find_project(std::filesystem::current_path(), project_text);
  return *project_;
}

std::filesystem::path CliContext::ledger_path() {
  const auto path = ledger_text.empty() ? project().ledger : std::filesystem::absolute(ledger_text);
  // The project's configured chain key goes with its ledger, also when the
  // ledger was named with --ledger (workers pass both).
  std::optional<Project> p;
  if (ledger_text.empty()) {
    p = project();
  } else {
    try {
      p = project();
    } catch (const InputError&) {
    }
  }
  if (p && !p->ledger_key.empty() && std::filesystem::weakly_canonical(p->ledger) == std::filesystem::weakly_canonical(path)) {
    set_ledger_key_file(path, p->ledger_key);
  }
  return path;
}

const GateStore& CliContext::store() {
  if (!store_) {
    store_ = open_gate_store(project(), workspace(), trust_worktree);
    // The export was altered and has been replaced: the ledger keeps what
    // was found (audit fails until a person acknowledges it).
    if (!store_->tampered.empty()) {
      Ledger ledger(ledger_path());
      for (const auto& e : store_->tampered) {
        const std::int64_t id = ledger.record_tamper(e);
        std::cerr << fmt::format("densefeed: tamper event {}: the export of {} was altered ({}: {}: {}); densefeed exported it again "
                                 "and uses the fresh export; `densefeed audit` fails until a person runs `densefeed audit "
                                 "acknowledge {} --by NAME --note TEXT`\n",
                                 id, store_->describe(), to_string(e.kind), e.path, e.detail, id);
      }
    }
    // From here on the project is configured as its trusted ref says, not as
    // the checked-out densefeed.yaml (an agent's branch) says.
    if (!store_->worktree) {
      const std::string ref = project_->trusted_ref;
      const auto ledger = ledger_path();
      project_ = trusted_project(*project_, store_->root);
      if (project_->trusted_ref != ref) {
        throw InputError(project_->config_file().string(), {}, "trusted_ref",
                         fmt::format("the checked-out densefeed.yaml names trusted ref '{}', but that ref's own densefeed.yaml "
                                     "names '{}': refusing to trust a ref that does not trust itself",
                                     ref, project_->trusted_ref));
      }
      if (ledger_text.empty()) ledger_text = ledger.string();  // the workspace stays where the gate store was exported
      store_->gates = project_->gates;
    }
  }
  return *store_;
}

void add_executor_option(CLI::App* verb, std::string& name) {
  verb->add_option("--executor", name,
                   "where harness jobs run: local (this machine's cores and GPUs) or slurm (each job an sbatch job; "
                   "SBATCH_PARTITION and the other SBATCH_* variables choose where)")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
}

RunOptions run_options(CliContext& ctx) {
  RunOptions options;
  options.store = ctx.store();  // first: it puts the trusted ref's configuration in force
  options.project = ctx.project();
  options.workspace = ctx.workspace();
  return options;
}

std::vector<std::string> context_args(CliContext& ctx) {
  std::vector<std::string> args = {"--project", ctx.project().dir.string()};
  if (ctx.trust_worktree) args.push_back("--trust-worktree");
  return args;
}

std::uint64_t parse_unsigned(const std::string& what, const std::string& text, std::uint64_t max) {
  std::uint64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || text[0] == '+' || ec != std::errc() || ptr != end || value > max) {
    throw InputError("command line", {}, what, fmt::format("expected an integer from 0 to {}, got '{}'", max, text));
  }
  return value;
}

std::int64_t parse_experiment_id(const std::string& text) {
  return static_cast<std::int64_t>(parse_unsigned("ID", text, INT64_MAX));
}

void add_ledger_and_json(CLI::App* verb, CliContext& ctx) {
  verb->add_option("--ledger", ctx.ledger_text, "SQLite ledger (default: the project's, .densefeed/ledger.db)");
  verb->add_flag("--json", ctx.json, "print one JSON document");
}

}  // namespace densefeed

namespace densefeed {

std::optional<GateSpec> locked_gate_for_next(CliContext& ctx, const std::string& name) {
  try {
    const GateStore& store = ctx.store();
    if (check_locked_file(store, read_lock(store), store.gate_rel(name)).empty()) return load_gate(store, name);
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace densefeed
