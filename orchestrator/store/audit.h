// audit (the verb's library; the ledger's own invariant queries are ledger_audit.cpp): what CI checks of a ledger and its gate store, each check a name and
// its failures (none: it passed).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fail_on.h"
#include "ledger.h"

namespace densefeed {

struct GateStore;

struct AuditCheck {
  std::string name;                   // what holds when it passes, in words
  std::vector<std::string> failures;  // one line each; empty: passed
  double seconds = 0;                 // how long the check took (JUnit's testcase time)
};

struct AuditOptions {
  bool allow_untrusted_gates = false;  // accept green results whose gates came from another ref
  bool allow_unsandboxed = false;      // accept green results whose untrusted commands ran without the sandbox
  std::vector<ChainHead> expected;     // heads the chain must still extend (--expect-head, --head-file)
  // --strict: an audit with no head recorded earlier to check the chain
  // against fails (a cut-off tail or a re-sealed copy is then invisible).
  bool strict = false;
  // The project's require_service: every experiment must have been
  // submitted through a densefeed service (none same-user).
  bool require_service = false;
  // --fail-on: a green-gated experiment with a bench case of one of these
  // verdicts fails the audit (fail_on.h); empty: bench verdicts are not audited.
  std::vector<FailOn> fail_on;
};

struct AuditReport {
  std::vector<AuditCheck> checks;  // ledger checks, then one per gate of the store
  ChainHead head;                  // the chain's head now
  // Experiments recorded without a service (Ledger::same_user_experiments):
  // labelled same-user; a failure only under require_service.
  std::vector<std::int64_t> same_user;
  bool ok() const;
};

// The heads an audit expects: `expect_head` ("SEQ:HASH"; '' for none), then
// the first line of `head_file` when it is given and exists. Throws
// InputError naming --expect-head or the file when one does not parse.
std::vector<ChainHead> expected_heads(const std::string& expect_head, const std::string& head_file);

// Audits the ledger at `ledger_path` (opened in Mode::audit: schema
// differences are reported, not thrown) and every gate of `store` against
// its lock. Throws InputError when the store has no gate.
AuditReport audit_ledger(const std::filesystem::path& ledger_path, const GateStore& store, const AuditOptions& options);

// Writes `head`'s text and a newline to `path`; throws InputError (--head-file) when it cannot.
void write_head_file(const std::filesystem::path& path, const ChainHead& head);

}  // namespace densefeed
