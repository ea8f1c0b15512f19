#include "audit.h"

#include <fstream>

#include <fmt/format.h>

#include "error.h"
#include "gate_lock.h"
#include "gate_spec.h"
#include "gate_store.h"

namespace densefeed {
namespace {

// A promote killed during its acceptance run left it `started`.
AuditCheck interrupted_acceptances(const Ledger& ledger) {
  AuditCheck c{"no acceptance run left started by a promote that no longer runs (interrupted)", {}};
  for (const auto& r : ledger.running_acceptances()) {
    if (r.alive) continue;
    c.failures.push_back(fmt::format("experiment {}: its acceptance run started at {} was interrupted: {}; 'densefeed promote {}' "
                                     "runs it again", r.experiment_id, r.started_at, r.owner, r.experiment_id));
  }
  return c;
}

AuditCheck unacknowledged_tampering(const Ledger& ledger) {
  AuditCheck c{"no unacknowledged tamper event (an export or cached build densefeed found altered; "
               "'densefeed audit acknowledge ID --by NAME --note TEXT')", {}};
  for (const auto& e : ledger.tamper_events(true)) {
    c.failures.push_back(fmt::format("tamper event {} ({}, {}): {}: {} (commit {})", e.id, e.kind, e.detected_at, e.path, e.detail,
                                     e.commit.substr(0, 12)));
  }
  return c;
}

AuditCheck intact_chain(const Ledger& ledger) {
  const ChainCheck c = ledger.verify();
  AuditCheck chain{"hash chain intact", {}};
  if (!c.ok) {
    chain.failures.push_back(fmt::format("link {}: {} row {}{}: {}", c.first_broken_seq, c.table, c.row_id,
                                         c.experiment_id ? fmt::format(" (experiment {})", c.experiment_id) : "", c.problem));
  }
  return chain;
}

void audit_records(const Ledger& ledger, const std::string& trusted_ref, const AuditOptions& o, AuditReport& report) {
  auto& checks = report.checks;
  checks.push_back({"schema objects (tables, views, triggers, indexes) are the SQL compiled into densefeed", ledger.schema_differences()});
  checks.push_back({"no speedup, trace or acceptance result without a green gate", ledger.results_without_green_gate()});
  if (!o.allow_untrusted_gates) {
    checks.push_back({fmt::format("no green result whose gates came from elsewhere than the trusted ref '{}' "
                                  "(--allow-untrusted-gates accepts them)",
                                  trusted_ref),
                      ledger.green_results_not_from(trusted_ref)});
  }
  if (!o.allow_unsandboxed) {
    checks.push_back({"no green result whose untrusted commands ran without the sandbox (--allow-unsandboxed accepts them)",
                      ledger.unsandboxed_green_results()});
  }
  checks.push_back({"no promotion or acceptance run without a green gate and green bench and trace stages", ledger.promotion_violations()});
  checks.push_back(interrupted_acceptances(ledger));
  checks.push_back(unacknowledged_tampering(ledger));
  checks.push_back(intact_chain(ledger));
  report.head = ledger.head();
  AuditCheck extends{"the chain extends the head recorded earlier", {}};
  for (const auto& h : o.expected) {
    if (auto why = ledger.extends(h); !why.empty()) extends.failures.push_back(fmt::format("head {}: {}", h.text(), why));
  }
  if (!o.expected.empty()) checks.push_back(extends);
  if (o.expected.empty() && o.strict) {
    checks.push_back({"the chain extends a head recorded earlier (--strict)",
                      {"no head was ever recorded for this ledger: give --head-file FILE (kept outside the ledger's reach) or "
                       "--expect-head SEQ:HASH, or audit through the densefeed service, which checks its head log"}});
  }
  report.same_user = ledger.same_user_experiments();
  if (o.require_service) {
    AuditCheck served{"every experiment was submitted through a densefeed service (require_service: true)", {}};
    for (const auto id : report.same_user) {
      served.failures.push_back(fmt::format("experiment {} is same-user: recorded by densefeed on this machine as its user, not "
                                            "through the project's service",
                                            id));
    }
    checks.push_back(served);
  }
}

void audit_gates(const GateStore& store, AuditReport& report) {
  const auto lock = read_lock(store);
  const auto names = list_gates(store);
  if (names.empty()) throw InputError(store.gate_dir().string(), {}, "", fmt::format("no gates (*.yaml) in {}", store.describe()));
  for (const auto& name : names) {
    auto problems = check_locked_file(store, lock, store.gate_rel(name));
    if (problems.empty()) {
      const auto frozen = check_frozen_files(store, lock, load_gate(store, name));
      problems.insert(problems.end(), frozen.begin(), frozen.end());
    }
    report.checks.push_back({fmt::format("gate {} and its frozen files match {} ({})", name, store.lock_rel(), store.describe()), problems});
  }
}

}  // namespace

bool AuditReport::ok() const {
  for (const auto& c : checks) {
    if (!c.failures.empty()) return false;
  }
  return true;
}

std::vector<ChainHead> expected_heads(const std::string& expect_head, const std::string& head_file) {
  std::vector<ChainHead> expected;
  if (!expect_head.empty()) expected.push_back(ChainHead::parse(expect_head, "--expect-head"));
  if (!head_file.empty() && std::filesystem::exists(head_file)) {
    std::ifstream in(head_file);
    std::string text;
    std::getline(in, text);
    expected.push_back(ChainHead::parse(text, head_file));
  }
  return expected;
}

AuditReport audit_ledger(const std::filesystem::path& ledger_path, const GateStore& store, const AuditOptions& options) {
  AuditReport report;
  {
    const Ledger ledger(ledger_path, Ledger::Mode::audit);
    audit_records(ledger, store.ref, options, report);
  }
  audit_gates(store, report);
  return report;
}

void write_head_file(const std::filesystem::path& path, const ChainHead& head) {
  std::ofstream out(path, std::ios::trunc);
  out << head.text() << "\n";
  if (!out) throw InputError(path.string(), {}, "--head-file", "cannot write the head here");
}

}  // namespace densefeed
