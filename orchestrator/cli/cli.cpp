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
#include <stdexcept>

namespace densefeed {

namespace {

// The project's configured chain key goes with its ledger, also when the
// ledger was named with --ledger (workers pass both); a key given on the
// command line or in the environment (`given`) comes first.
void register_ledger_key(const Project& p, const std::filesystem::path& ledger, const std::filesystem::path& given) {
  if (!given.empty()) set_ledger_key_file(ledger, given);
  else if (!p.ledger_key.empty() && std::filesystem::weakly_canonical(p.ledger) == std::filesystem::weakly_canonical(ledger)) {
    set_ledger_key_file(ledger, p.ledger_key);
  }
}

// --ledger-key, else DENSEFEED_LEDGER_KEY (absolute; '' for neither).
// Throws InputError when the file is inside the ledger's folder or the
// project folder (the agent's worktree): whoever can write there could
// re-seal the ledger with a key of their own (spec/project.cpp refuses
// densefeed.yaml's ledger_key in the ledger's folder alike).
std::filesystem::path given_ledger_key(const std::string& flag, const std::filesystem::path& ledger, const Project* worktree) {
  const char* env = std::getenv("DENSEFEED_LEDGER_KEY");
  const std::string text = !flag.empty() ? flag : env ? env : "";
  if (text.empty()) return {};
  const char* what = !flag.empty() ? "--ledger-key" : "DENSEFEED_LEDGER_KEY";
  const auto key = std::filesystem::weakly_canonical(std::filesystem::absolute(text));
  const auto inside = [&](const std::filesystem::path& folder) {
    const auto rel = key.lexically_relative(std::filesystem::weakly_canonical(folder));
    return !rel.empty() && *rel.begin() != "..";
  };
  if (!ledger.empty() && inside(ledger.parent_path())) {
    throw InputError(what, {}, text, fmt::format("{} is inside the ledger's folder {}: anyone who can edit the ledger could then "
                                                 "re-seal it; keep the key elsewhere (a CI secret written to a 0600 file outside "
                                                 "the checkout)", key.string(), ledger.parent_path().string()));
  }
  if (worktree && inside(worktree->dir)) {
    throw InputError(what, {}, text, fmt::format("{} is inside the project folder {}, which the agent can write: keep the key "
                                                 "outside it (a CI secret written to a 0600 file outside the checkout)",
                                                 key.string(), worktree->dir.string()));
  }
  return key;
}

}  // namespace

// The one resolution. Its order is fixed, whatever accessor comes first:
// worktree project, ledger, its key, then (as store_use says) the store.
void CliContext::resolve() {
  if (resolved_) return;
  try {
    worktree_project_ = find_project(std::filesystem::current_path(), project_text);
  } catch (const InputError&) {
    project_error_ = std::current_exception();
  }
  if (!ledger_text.empty()) ledger_ = std::filesystem::absolute(ledger_text);
  else if (worktree_project_) ledger_ = worktree_project_->ledger;
  given_key_ = given_ledger_key(ledger_key_text, ledger_, worktree_project_ ? &*worktree_project_ : nullptr);
  if (worktree_project_ && !ledger_.empty()) register_ledger_key(*worktree_project_, ledger_, given_key_);
  else if (!given_key_.empty() && !ledger_.empty()) set_ledger_key_file(ledger_, given_key_);
  resolved_ = true;
  // A key the checked-out densefeed.yaml names is the agent's to change: in a
  // repository it counts only as the trusted ref configures it (open_store
  // registers that one), also for verbs that read no gate.
  if (worktree_project_ && worktree_project_->in_git() && !trust_worktree && !worktree_project_->ledger_key.empty() &&
      given_key_.empty() && store_use != StoreUse::always) {
    forget_ledger_key_file(ledger_);
    open_store();
    return;
  }
  const bool exported = store_use == StoreUse::if_exported && worktree_project_ && !trust_worktree &&
                        worktree_project_->in_git() && std::filesystem::is_directory(Workspace{ledger_}.exports());
  if (store_use == StoreUse::always || exported) open_store();
}

void CliContext::open_store() {
  store_tried_ = true;
  try {
    if (!worktree_project_) std::rethrow_exception(project_error_);
    const Project& worktree = *worktree_project_;
    GateStore store = open_gate_store(worktree, Workspace{ledger_}, trust_worktree);
    // The export was altered and has been replaced: the ledger keeps what
    // was found (audit fails until a person acknowledges it). Only here, and
    // so once per process.
    if (!store.tampered.empty()) {
      Ledger ledger(ledger_);
      for (const auto& e : store.tampered) {
        const std::int64_t id = ledger.record_tamper(e);
        std::cerr << fmt::format("densefeed: tamper event {}: the export of {} was altered ({}: {}: {}); densefeed exported it again "
                                 "and uses the fresh export; `densefeed audit` fails until a person runs `densefeed audit "
                                 "acknowledge {} --by NAME --note TEXT`\n",
                                 id, store.describe(), to_string(e.kind), e.path, e.detail, id);
      }
    }
    // From here on the project is configured as its trusted ref says, not as
    // the checked-out densefeed.yaml (an agent's branch) says.
    if (!store.worktree) {
      Project trusted = [&] {
        try {
          return trusted_project(worktree, store.root);
        } catch (const InputError& e) {
          store.rethrow_shown(e);
        }
      }();
      // Later errors about the configuration name the file a person edits.
      if (trusted.config.path == (store.root / kProjectFile).string()) {
        trusted.config.path = worktree.config_file().string();
        trusted.config.origin = fmt::format("as committed on {} at {}: edit it and commit it on {}", store.ref,
                                            store.commit.substr(0, 12), store.ref);
      }
      if (trusted.trusted_ref != worktree.trusted_ref) {
        throw InputError(trusted.config_file().string(), {}, "trusted_ref",
                         fmt::format("the checked-out densefeed.yaml names trusted ref '{}', but that ref's own densefeed.yaml "
                                     "names '{}': refusing to trust a ref that does not trust itself",
                                     worktree.trusted_ref, trusted.trusted_ref));
      }
      store.gates = trusted.gates;
      // The key is the trusted configuration's, also when it names none (the
      // default then), never a key the worktree's densefeed.yaml named.
      forget_ledger_key_file(ledger_);
      register_ledger_key(trusted, ledger_, given_key_);
      // An edit to densefeed.yaml not committed yet changes nothing: say so
      // (the fresh-user trial's python settings were silently the trusted ref's).
      if (std::filesystem::is_regular_file(worktree.config_file()) && worktree.config.text != trusted.config.text) {
        std::cerr << fmt::format("densefeed: note: {} differs from its copy on {} ({}); densefeed uses the committed one: "
                                 "commit the change on {} for it to take effect\n",
                                 worktree.config_file().string(), store.ref, store.commit.substr(0, 12), store.ref);
      }
      trusted_project_ = std::move(trusted);
    }
    store_ = std::move(store);
  } catch (...) {
    store_error_ = std::current_exception();
  }
}

const Project& CliContext::project() {
  resolve();
  project_read_ = true;
  if (trusted_project_) return *trusted_project_;
  if (!worktree_project_) std::rethrow_exception(project_error_);
  return *worktree_project_;
}

std::filesystem::path CliContext::ledger_path() {
  resolve();
  if (ledger_.empty()) std::rethrow_exception(project_error_);
  return ledger_;
}

const GateStore& CliContext::store() {
  resolve();
  if (!store_tried_) {
    if (store_use != StoreUse::when_asked) {
      throw std::logic_error("the verb declared that it does not use the gate store, yet asked for it");
    }
    // A project already handed out must not change under its reader.
    if (project_read_) throw std::logic_error("the verb read the project before it opened the gate store (declare StoreUse::always)");
    open_store();
  }
  if (store_error_) std::rethrow_exception(store_error_);
  return *store_;
}

bool CliContext::store_opened() {
  resolve();
  return store_tried_;
}

GateStore CliContext::worktree() {
  resolve();
  if (!worktree_project_) std::rethrow_exception(project_error_);
  return worktree_store(*worktree_project_);
}

void add_executor_option(CLI::App* verb, std::string& name) {
  verb->add_option("--executor", name,
                   "where harness jobs run: local (this machine's cores and GPUs), slurm (sbatch jobs, a gate arm's "
                   "cases one job array; the gate's and project's resources and the SBATCH_* variables choose where) or "
                   "slurm-steps (inside a Slurm allocation: srun steps on its nodes)")
      ->check(CLI::IsMember({"local", "slurm", "slurm-steps"}))
      ->capture_default_str();
}

RunOptions run_options(CliContext& ctx) {
  RunOptions options;
  options.store = ctx.store();
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

void add_ledger_key_option(CLI::App* verb, CliContext& ctx) {
  verb->add_option("--ledger-key", ctx.ledger_key_text,
                   "the ledger's chain key file (default: DENSEFEED_LEDGER_KEY, else densefeed.yaml's ledger_key, else "
                   "~/.config/densefeed/keys/<ledger identity>.key); never inside the ledger's folder or the project");
}

void add_ledger_and_json(CLI::App* verb, CliContext& ctx) {
  verb->add_option("--ledger", ctx.ledger_text, "SQLite ledger (default: the project's, .densefeed/ledger.db)");
  add_ledger_key_option(verb, ctx);
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
