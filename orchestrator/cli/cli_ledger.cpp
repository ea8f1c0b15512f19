// ledger list|show|compare|export|verify and audit: what engineers and CI
// read from the ledger. All of them open it read-only except that an old
// ledger is migrated on open.
#include <unistd.h>

#include <chrono>
#include <iostream>

#include <fmt/format.h>

#include "audit_printers.h"
#include "chain_printers.h"
#include "cli.h"
#include "error.h"
#include "experiment_comparison.h"
#include "experiment_document.h"
#include "gate_spec.h"
#include "ledger.h"
#include "audit.h"
#include "ledger_printers.h"
#include "list_filter_check.h"
#include "pending_results.h"
#include "utc_time.h"
#include "workspace.h"

namespace densefeed {

// A readable ledger for ledger list/show/compare/export and status: its
// schema objects are checked on open (Ledger), and its chain here: a broken
// chain is refused as bad input (exit 2), naming the first broken link.
void require_intact_chain(const Ledger& ledger) {
  const ChainCheck c = ledger.verify();
  if (c.ok) return;
  throw InputError(ledger.path().string(), {}, "",
                   fmt::format("the hash chain is broken at link {} ({} row {}{}: {}); densefeed will not read an edited ledger "
                               "(densefeed audit says more)", c.first_broken_seq, c.table, c.row_id,
                               c.experiment_id ? fmt::format(", experiment {}", c.experiment_id) : "", c.problem));
}

namespace {

// ledger list|show|compare|export: what was recorded.
void add_ledger_read_verbs(CLI::App* ledger_cmd, CliContext& ctx, std::vector<CliVerb>& verbs) {
  auto* list = ledger_cmd->add_subcommand("list", "every recorded experiment with its state and verdicts");
  auto filter = std::make_shared<Ledger::ListFilter>();
  list->add_option("--gate", filter->gate, "only this gate");
  list->add_option("--verdict", filter->verdict, "only this overall verdict (green, red, error, unknown, pending) or state (queued, started, finished, interrupted, cancelled, ...)");
  list->add_option("--since", filter->since, "only submitted at or after this UTC time (ISO 8601 prefix, e.g. 2026-11-29 or 2026-11-29T20:00)");
  add_ledger_and_json(list, ctx);
  verbs.push_back({list, [&ctx, filter] {
                     check_list_filter(*filter);
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     require_intact_chain(ledger);
                     const auto rows = ledger.list(*filter);
                     if (ctx.json) std::cout << rows.dump(2) << "\n";
                     else print_ledger_list(std::cout, rows);
                     return 0;
                   }});

  auto* show = ledger_cmd->add_subcommand("show", "everything recorded for one experiment");
  auto show_id = std::make_shared<std::string>();
  show->add_option("ID", *show_id, "experiment id")->required();
  add_ledger_and_json(show, ctx);
  verbs.push_back({show, [&ctx, show_id] {
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     require_intact_chain(ledger);
                     const auto id = parse_experiment_id(*show_id);
                     if (ctx.json) {
                       auto doc = ledger.show(id);
                       const auto gate = locked_gate_for_next(ctx, doc["gate"].get<std::string>());
                       print_ledger_show_json(std::cout, std::move(doc), experiment_document(ledger.record(id), gate ? &*gate : nullptr, ctx.ledger_path()));
                     } else {
                       print_ledger_show(std::cout, ledger.record(id));
                     }
                     return 0;
                   }});

  auto* compare = ledger_cmd->add_subcommand("compare", "two experiments side by side: only what differs, with deltas");
  auto ids = std::make_shared<std::pair<std::string, std::string>>();
  compare->add_option("ID1", ids->first, "experiment id")->required();
  compare->add_option("ID2", ids->second, "experiment id")->required();
  add_ledger_and_json(compare, ctx);
  verbs.push_back({compare, [&ctx, ids] {
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     require_intact_chain(ledger);
                     const auto a_id = parse_experiment_id(ids->first), b_id = parse_experiment_id(ids->second);
                     print_comparison(std::cout, compare_experiments(ledger, a_id, b_id), ctx.json);
                     return 0;
                   }});

  auto* exp = ledger_cmd->add_subcommand("export", "the ledger's tables as JSON ({table: [rows]}), or one table or view as CSV");
  auto format = std::make_shared<std::string>("json");
  auto table = std::make_shared<std::string>("experiment_verdicts");
  exp->add_option("--format", *format, "json or csv")->check(CLI::IsMember({"json", "csv"}))->capture_default_str();
  exp->add_option("--table", *table, "csv: the table or view to write")->capture_default_str();
  exp->add_option("--ledger", ctx.ledger_text, "SQLite ledger (default ROOT/.densefeed/ledger.db)");
  add_ledger_key_option(exp, ctx);
  verbs.push_back({exp, [&ctx, format, table] {
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     if (*format == "json") {
                       std::cout << ledger.export_tables().dump(2) << "\n";
                       return 0;
                     }
                     const auto rows = ledger.rows(*table);
                     print_csv(std::cout, ledger.columns(*table), rows);
                     return 0;
                   }});

}

// ledger verify|head|backup|recover: the file, its chain and what runs kept for it.
void add_ledger_chain_verbs(CLI::App* ledger_cmd, CliContext& ctx, std::vector<CliVerb>& verbs) {
  auto* verify = ledger_cmd->add_subcommand("verify", "recompute the hash chain of every recorded row; report the first broken link");
  add_ledger_and_json(verify, ctx);
  verbs.push_back({verify, [&ctx] {
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::audit);
                     const ChainCheck c = ledger.verify();
                     print_chain_check(std::cout, ctx.ledger_path(), c, ctx.json);
                     return c.ok ? 0 : 1;
                   }});

  auto* head = ledger_cmd->add_subcommand("head", "the chain's head (SEQ:HASH of its last link): keep it outside the ledger, then 'audit --expect-head'");
  add_ledger_and_json(head, ctx);
  verbs.push_back({head, [&ctx] {
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     require_intact_chain(ledger);
                     print_chain_head(std::cout, ledger.head(), ledger.key_fingerprint(), ctx.json);
                     return 0;
                   }});

  auto* backup = ledger_cmd->add_subcommand("backup", "copy the ledger to FILE with SQLite's online backup API (consistent while workers write)");
  auto backup_file = std::make_shared<std::string>();
  backup->add_option("FILE", *backup_file, "where the copy goes (must not exist)")->required();
  add_ledger_and_json(backup, ctx);
  verbs.push_back({backup, [&ctx, backup_file] {
                     const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
                     require_intact_chain(ledger);
                     const ChainHead h = ledger.head();
                     ledger.backup(*backup_file);
                     print_backup(std::cout, *backup_file, ctx.ledger_path(), h, ctx.json);
                     return 0;
                   }});

  auto* recover = ledger_cmd->add_subcommand(
      "recover", "record the results a run kept in its run folder when the ledger's write lock was not free or it was killed while waiting");
  add_ledger_and_json(recover, ctx);
  verbs.push_back({recover, [&ctx] {
                     Ledger ledger(ctx.ledger_path());
                     require_intact_chain(ledger);
                     const auto runs = Workspace{ctx.ledger_path()}.runs();
                     const auto recovered = recover_pending(ledger, runs);
                     print_recovered(std::cout, ctx.ledger_path(), runs, recovered, ctx.json);
                     bool refused = false;
                     for (const auto& r : recovered) refused = refused || r.refusal != PendingRefusal::none;
                     return refused ? 1 : 0;
                   }});

}

// Runs `audit` (which returns the report) and writes --junit on every exit:
// the checks when it ran to its end, else one <error> naming why it could not
// (the exception is then rethrown: exit 2 or 3 as main maps it).
template <class Audit>
int audit_with_junit(const std::string& junit, Audit&& audit) {
  const auto start = std::chrono::steady_clock::now();
  AuditRun run{utc_now(), 0, ""};
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) run.hostname = host;
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const auto error = [&](const char* kind, const std::string& why) {
    run.seconds = elapsed();
    if (!junit.empty()) write_audit_junit_error(junit, kind, why, run);
  };
  AuditReport report;
  try {
    report = audit();
  } catch (const InputError& e) {
    error("bad-input", e.what());
    throw;
  } catch (const std::exception& e) {
    error("infrastructure-error", e.what());
    throw;
  }
  run.seconds = elapsed();
  if (!junit.empty()) write_audit_junit(junit, report, run);
  return report.ok() ? 0 : 1;
}

// audit, audit acknowledge: CI's checks, and a person's word on what they found.
void add_audit_verbs(CLI::App& app, CliContext& ctx, std::vector<CliVerb>& verbs) {
  auto* audit = app.add_subcommand("audit", "CI: exit 1 if a result lacks a green gate, a gate or frozen file differs from gates/gates.lock, the hash chain is broken, or a tamper event is unacknowledged");
  // A person's verb: what densefeed found altered (and replaced) was seen.
  auto* acknowledge = audit->add_subcommand("acknowledge", "a person acknowledges a tamper event (an altered export or cached build densefeed replaced)");
  auto ack_id = std::make_shared<std::string>();
  auto ack_by = std::make_shared<std::string>();
  auto ack_note = std::make_shared<std::string>();
  acknowledge->add_option("ID", *ack_id, "the tamper event's id (densefeed audit names it)")->required();
  acknowledge->add_option("--by", *ack_by, "who acknowledges it")->required();
  acknowledge->add_option("--note", *ack_note, "what was found out about it")->required();
  add_ledger_and_json(acknowledge, ctx);
  verbs.push_back({acknowledge, [&ctx, ack_id, ack_by, ack_note] {
                     const std::int64_t id = parse_experiment_id(*ack_id);
                     Ledger ledger(ctx.ledger_path());
                     require_intact_chain(ledger);
                     ledger.acknowledge_tamper(id, *ack_by, *ack_note);
                     print_tamper_acknowledged(std::cout, id, *ack_by, *ack_note, ctx.json);
                     return 0;
                   }});
  auto junit = std::make_shared<std::string>();
  auto allow_unsandboxed = std::make_shared<bool>(false);
  auto allow_untrusted_gates = std::make_shared<bool>(false);
  auto expect_head = std::make_shared<std::string>();
  auto head_file = std::make_shared<std::string>();
  audit->add_option("--junit", *junit, "also write JUnit XML here");
  audit->add_flag("--allow-untrusted-gates", *allow_untrusted_gates,
                  "accept green results whose gates came from another ref than the trusted one");
  audit->add_flag("--allow-unsandboxed", *allow_unsandboxed,
                  "accept green results whose untrusted commands ran without the sandbox (--no-sandbox)");
  audit->add_option("--expect-head", *expect_head, "fail unless the chain still holds this head (SEQ:HASH from 'ledger head')");
  audit->add_option("--head-file", *head_file, "like --expect-head with the head kept in FILE (when it exists); on success the current head is written there");
  auto fail_on = std::make_shared<std::vector<std::string>>();
  audit->add_option("--fail-on", *fail_on,
                    "also fail (exit 1) when a green-gated experiment has a bench case with one of these verdicts (slower, "
                    "inconclusive; comma-separated or repeated)")
      ->allow_extra_args(false)
      ->delimiter(',')
      ->check(CLI::IsMember({"slower", "inconclusive"}));
  auto strict = std::make_shared<bool>(false);
  audit->add_flag("--strict", *strict, "fail when no head recorded earlier is given to check the chain against (what CI should use)");
  add_ledger_and_json(audit, ctx);
  verbs.push_back({audit, [&ctx, junit, allow_unsandboxed, allow_untrusted_gates, expect_head, head_file, strict, fail_on] {
                     AuditOptions options;
                     options.allow_untrusted_gates = *allow_untrusted_gates;
                     options.allow_unsandboxed = *allow_unsandboxed;
                     options.strict = *strict;
                     return audit_with_junit(*junit, [&] {
                       options.expected = expected_heads(*expect_head, *head_file);
                       options.fail_on = parse_fail_on(*fail_on);
                       // Nothing to audit is not a pass: a mistyped --ledger would make a fresh, empty ledger.
                       if (!std::filesystem::exists(ctx.ledger_path())) {
                         throw InputError(ctx.ledger_path().string(), {}, "--ledger",
                                          "no ledger here: audit checks an existing ledger (the project's, or --ledger PATH)");
                       }
                       const GateStore& store = ctx.store();
                       options.require_service = ctx.project().require_service;
                       const AuditReport report = audit_ledger(ctx.ledger_path(), store, options);
                       if (!ctx.json) print_audit_checks(std::cout, report);
                       if (report.ok() && !head_file->empty()) write_head_file(*head_file, report.head);
                       print_audit_end(std::cout, ctx.ledger_path(), report, ctx.json);
                       return report;
                     });
                   }, StoreUse::always});
}

}  // namespace

std::vector<CliVerb> add_ledger_verbs(CLI::App& app, CliContext& ctx) {
  std::vector<CliVerb> verbs;
  auto* ledger_cmd = app.add_subcommand("ledger", "read the ledger");
  ledger_cmd->require_subcommand(1);
  add_ledger_read_verbs(ledger_cmd, ctx, verbs);
  add_ledger_chain_verbs(ledger_cmd, ctx, verbs);
  add_audit_verbs(app, ctx, verbs);
  return verbs;
}

}  // namespace densefeed
