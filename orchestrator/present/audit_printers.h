// How audit prints its checks: "ok"/"FAIL" lines and the head for people,
// one JSON document with --json, and JUnit XML for CI.
#pragma once

#include <filesystem>
#include <ostream>

#include "audit.h"

namespace densefeed {

// Text: one "ok   NAME" / "FAIL NAME" line per check, then its failures indented.
void print_audit_checks(std::ostream& out, const AuditReport& report);
// After the head file is written: {ledger, checks: [{check, ok, failures}], ok, head} with
// --json, else "head SEQ:HASH".
void print_audit_end(std::ostream& out, const std::filesystem::path& ledger, const AuditReport& report, bool json);
// A JUnit XML file (one testsuite "densefeed-audit", one testcase per
// check). Throws InputError (--junit) when `path` cannot be written.
void write_audit_junit(const std::filesystem::path& path, const AuditReport& report);

}  // namespace densefeed
