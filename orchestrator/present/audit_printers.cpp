#include "audit_printers.h"

#include <fstream>

#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <fmt/format.h>

#include "error.h"
#include "printable.h"

namespace densefeed {

void print_audit_checks(std::ostream& out, const AuditReport& report) {
  for (const auto& c : report.checks) {
    out << fmt::format("{:<4} {}\n", c.failures.empty() ? "ok" : "FAIL", c.name);
    for (const auto& f : c.failures) out << "       " << one_line(f) << "\n";
  }
}

void print_audit_end(std::ostream& out, const std::filesystem::path& ledger, const AuditReport& report, bool json) {
  if (!json) {
    if (!report.same_user.empty()) {
      std::string ids;
      for (const auto id : report.same_user) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
      out << fmt::format("note same-user: experiment(s) {} were recorded without a densefeed service (as this machine's user)\n", ids);
    }
    out << "head " << report.head.text() << "\n";
    return;
  }
  nlohmann::ordered_json doc = {{"ledger", ledger.string()}, {"checks", nlohmann::ordered_json::array()}};
  for (const auto& c : report.checks) doc["checks"].push_back({{"check", c.name}, {"ok", c.failures.empty()}, {"failures", c.failures}});
  doc["ok"] = report.ok();
  doc["head"] = report.head.text();
  doc["same_user"] = report.same_user;
  out << doc.dump(2) << "\n";
}

void write_audit_junit(const std::filesystem::path& path, const AuditReport& report) {
  namespace pt = boost::property_tree;
  pt::ptree suites, suite;
  std::size_t failed = 0;
  for (const auto& c : report.checks) failed += c.failures.empty() ? 0 : 1;
  suite.put("<xmlattr>.name", "densefeed-audit");
  suite.put("<xmlattr>.tests", report.checks.size());
  suite.put("<xmlattr>.failures", failed);
  for (const auto& c : report.checks) {
    pt::ptree tc;
    tc.put("<xmlattr>.classname", "densefeed.audit");
    tc.put("<xmlattr>.name", c.name);
    if (!c.failures.empty()) {
      std::string text;
      for (const auto& f : c.failures) text += f + "\n";
      pt::ptree failure;
      failure.put("<xmlattr>.message", c.failures.front());
      failure.put_value(text);
      tc.add_child("failure", failure);
    }
    suite.add_child("testcase", tc);
  }
  suites.add_child("testsuites.testsuite", suite);
  std::ofstream out(path);
  if (!out) throw InputError(path.string(), {}, "--junit", "cannot write the JUnit file here");
  pt::write_xml(out, suites, pt::xml_writer_make_settings<std::string>(' ', 2));
}

}  // namespace densefeed
