#include "audit.h"

#include <chrono>
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

// --fail-on: every green-gated experiment's bench cases.
AuditCheck bench_verdicts(const Ledger& ledger, const std::vector<FailOn>& fail_on) {
  std::string words;
  for (const FailOn f : fail_on) words += (words.empty() ? "" : ", ") + std::string(to_string(f));
  AuditCheck c{fmt::format("no green-gated experiment with a bench case that is {} (--fail-on)", words), {}};
  Ledger::ListFilter green;
  green.verdict = "green";
  for (const auto& s : ledger.summaries(green)) {
    const auto found = fail_on_findings(ledger.record(s.id), fail_on);
    c.failures.insert(c.failures.end(), found.begin(), found.end());
  }
  return c;
}

// Appends make()'s check with the seconds it took.
template <class Make>
void add_check(std::vector<AuditCheck>& checks, Make&& make) {
  const auto start = std::chrono::steady_clock::now();
  AuditCheck c = make();
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  checks.push_back(std::move(c));
}

void audit_records(const Ledger& ledger, const std::string& trusted_ref, const AuditOptions& o, AuditReport& report) {
  auto& checks = report.checks;
  add_check(checks, [&] {
    return AuditCheck{"schema objects (tables, views, triggers, indexes) are the SQL compiled into densefeed", ledger.schema_differences()};
  });
  add_check(checks, [&] { return AuditCheck{"no speedup, trace or acceptance result without a green gate", ledger.results_without_green_gate()}; });
  if (!o.allow_untrusted_gates) {
    add_check(checks, [&] {
      return AuditCheck{fmt::format("no green result whose gates came from elsewhere than the trusted ref '{}' "
                                    "(--allow-untrusted-gates accepts them)",
                                    trusted_ref),
                        ledger.green_results_not_from(trusted_ref)};
    });
  }
  if (!o.allow_unsandboxed) {
    add_check(checks, [&] {
      return AuditCheck{"no green result whose untrusted commands ran without the sandbox (--allow-unsandboxed accepts them)",
                        ledger.unsandboxed_green_results()};
    });
  }
  add_check(checks, [&] {
    return AuditCheck{"no promotion or acceptance run without a green gate and green bench and trace stages", ledger.promotion_violations()};
  });
  if (!o.fail_on.empty()) add_check(checks, [&] { return bench_verdicts(ledger, o.fail_on); });
  add_check(checks, [&] { return interrupted_acceptances(ledger); });
  add_check(checks, [&] { return unacknowledged_tampering(ledger); });
  add_check(checks, [&] { return intact_chain(ledger); });
  report.head = ledger.head();
  if (!o.expected.empty()) {
    add_check(checks, [&] {
      AuditCheck extends{"the chain extends the head recorded earlier", {}};
      for (const auto& h : o.expected) {
        if (auto why = ledger.extends(h); !why.empty()) extends.failures.push_back(fmt::format("head {}: {}", h.text(), why));
      }
      return extends;
    });
  }
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
    add_check(report.checks, [&] {
      auto problems = check_locked_file(store, lock, store.gate_rel(name));
      if (problems.empty()) {
        const auto frozen = check_frozen_files(store, lock, load_gate(store, name));
        problems.insert(problems.end(), frozen.begin(), frozen.end());
      }
      return AuditCheck{fmt::format("gate {} and its frozen files match {} ({})", name, store.lock_rel(), store.describe()), problems};
    });
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
