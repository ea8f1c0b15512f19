#include "audit_printers.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

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

namespace {

namespace pt = boost::property_tree;

std::string seconds_text(double s) { return fmt::format("{:.3f}", s < 0 ? 0.0 : s); }

// testsuites > testsuite "densefeed-audit" around `cases`, with the counts
// junit-10.xsd requires, written to `path`.
void write_suite(const std::filesystem::path& path, const std::vector<pt::ptree>& cases, std::size_t failures, std::size_t errors,
                 const AuditRun& run) {
  pt::ptree suites, suite;
  suite.put("<xmlattr>.name", "densefeed-audit");
  suite.put("<xmlattr>.tests", cases.size());
  suite.put("<xmlattr>.failures", failures);
  suite.put("<xmlattr>.errors", errors);
  suite.put("<xmlattr>.skipped", 0);
  suite.put("<xmlattr>.time", seconds_text(run.seconds));
  suite.put("<xmlattr>.timestamp", run.started_at);
  if (!run.hostname.empty()) suite.put("<xmlattr>.hostname", run.hostname);
  for (const auto& tc : cases) suite.add_child("testcase", tc);
  pt::ptree& top = suites.add_child("testsuites", pt::ptree());
  top.put("<xmlattr>.name", "densefeed audit");
  top.put("<xmlattr>.tests", cases.size());
  top.put("<xmlattr>.failures", failures);
  top.put("<xmlattr>.errors", errors);
  top.put("<xmlattr>.time", seconds_text(run.seconds));
  top.add_child("testsuite", suite);
  // Written beside it under a fresh name (O_EXCL | O_NOFOLLOW), then renamed
  // over it: a link planted at `path` is replaced, its target never written.
  std::ostringstream text;
  pt::write_xml(text, suites, pt::xml_writer_make_settings<std::string>(' ', 2));
  const std::string bytes = text.str();
  const auto tmp = path.parent_path() / fmt::format(".{}.{}.tmp", path.filename().string(), ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError(path.string(), {}, "--junit", fmt::format("cannot write the JUnit file here: {}", std::strerror(errno)));
  const bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, path, ec);
  if (!ok || ec) {
    std::filesystem::remove(tmp, ec);
    throw InputError(path.string(), {}, "--junit", "cannot write the JUnit file here");
  }
}

// Text fit for an XML attribute or element: XML 1.0 allows no control
// characters but tab, line feed and carriage return (a file name the agent
// chose could hold any), so they are written as printable() writes them.
std::string xml_text(const std::string& text) { return printable(text); }

pt::ptree testcase(const std::string& name, double seconds) {
  pt::ptree tc;
  tc.put("<xmlattr>.classname", "densefeed.audit");
  tc.put("<xmlattr>.name", xml_text(name));
  tc.put("<xmlattr>.time", seconds_text(seconds));
  return tc;
}

}  // namespace

void write_audit_junit(const std::filesystem::path& path, const AuditReport& report, const AuditRun& run) {
  std::vector<pt::ptree> cases;
  std::size_t failed = 0;
  for (const auto& c : report.checks) {
    pt::ptree tc = testcase(c.name, c.seconds);
    if (!c.failures.empty()) {
      ++failed;
      std::string text;
      for (const auto& f : c.failures) text += xml_text(f) + "\n";
      pt::ptree failure;
      failure.put("<xmlattr>.message", xml_text(c.failures.front()));
      failure.put("<xmlattr>.type", "audit");
      failure.put_value(text);
      tc.add_child("failure", failure);
    }
    cases.push_back(std::move(tc));
  }
  write_suite(path, cases, failed, 0, run);
}

void write_audit_junit_error(const std::filesystem::path& path, const std::string& kind, const std::string& why, const AuditRun& run) {
  pt::ptree tc = testcase("the ledger and its gate store can be audited", run.seconds);
  pt::ptree error;
  error.put("<xmlattr>.message", xml_text(why));
  error.put("<xmlattr>.type", kind);
  error.put_value(xml_text(why));
  tc.add_child("error", error);
  write_suite(path, {tc}, 0, 1, run);
}

}  // namespace densefeed
