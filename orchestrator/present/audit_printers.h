// How audit prints its checks: "ok"/"FAIL" lines and the head for people,
// one JSON document with --json, and JUnit XML for CI.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>

#include "audit.h"

namespace densefeed {

// Text: one "ok   NAME" / "FAIL NAME" line per check, then its failures indented.
void print_audit_checks(std::ostream& out, const AuditReport& report);
// After the head file is written: {ledger, checks: [{check, ok, failures}], ok, head} with
// --json, else "head SEQ:HASH".
void print_audit_end(std::ostream& out, const std::filesystem::path& ledger, const AuditReport& report, bool json);
// When the audit started and how long it ran: JUnit's timestamp and time.
struct AuditRun {
  std::string started_at;  // ISO 8601 UTC ("2026-11-29T19:05:57Z", utc_time.h)
  double seconds = 0;      // wall time of the whole audit
  std::string hostname;    // the machine it ran on ('' leaves the attribute out)
};

// A JUnit XML file valid against Jenkins' junit-10.xsd (jenkinsci/xunit-plugin,
// src/main/resources/org/jenkinsci/plugins/xunit/types/model/xsd/junit-10.xsd;
// tests/data/junit/ holds the rules the test checks it against): testsuites
// (tests, failures, errors, time) holding one testsuite "densefeed-audit"
// (name, tests, failures, errors = 0, skipped = 0, time in seconds,
// timestamp, hostname), one testcase per check (classname densefeed.audit,
// name, time in seconds) with a <failure> per failed check (message: its
// first failure; text: all of them). Throws InputError (--junit) when `path`
// cannot be written.
void write_audit_junit(const std::filesystem::path& path, const AuditReport& report, const AuditRun& run);

// The JUnit file of an audit that could not run to its end (exit 2 or 3: a
// bad or edited ledger, a missing or wrong key, a bad gate store): the same
// suite with one testcase "the ledger and its gate store can be audited"
// holding an <error> whose type is `kind` ("bad-input" or
// "infrastructure-error", as densefeed's error documents name them) and whose
// message is `why`; errors = 1. Throws InputError (--junit) when `path`
// cannot be written.
void write_audit_junit_error(const std::filesystem::path& path, const std::string& kind, const std::string& why, const AuditRun& run);

}  // namespace densefeed
