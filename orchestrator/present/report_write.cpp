// write_report (report_html.h): reads the ledger once, builds the pages (or
// the markdown) from its typed records and writes them. A report folder
// holds everything its pages link to, harness logs included, so that it can
// be zipped and handed over.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cctype>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "error.h"
#include "experiment_comparison.h"
#include "report_compare_page.h"
#include "report_html.h"
#include "report_markdown.h"
#include "utc_time.h"
#include "vega_bundle.h"
#include "workspace.h"

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

// Text to `out` through a temporary file of a fresh name (O_EXCL |
// O_NOFOLLOW: a link planted there is never written through) renamed over it.
std::uintmax_t write_atomically(const std::filesystem::path& out, const std::string& text) {
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  const auto tmp = std::filesystem::path(fmt::format("{}.{}.tmp", out.string(), ::getpid()));
  {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) throw InfraError(fmt::format("{}: cannot write the report: {}", tmp.string(), std::strerror(errno)));
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!ok) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw InfraError(fmt::format("{}: cannot write the report", tmp.string()));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, out, ec);
  if (ec) throw InfraError(fmt::format("{}: cannot write the report: {}", out.string(), ec.message()));
  return std::filesystem::file_size(out);
}

// What every page needs: the ledger's facts, libjs-vega, where runs are.
struct Context {
  const ReportRequest& request;
  const Ledger& ledger;
  LedgerFacts facts;
  std::string vega;
  std::filesystem::path runs;  // LEDGER-runs
};

std::vector<NextStep> next_of(const Context& c, const ExperimentRecord& record) {
  const std::optional<GateSpec> gate = c.request.gate_for ? c.request.gate_for(record.summary.gate) : std::nullopt;
  return next_steps(facts_from_record(record, gate ? &*gate : nullptr, c.runs / std::to_string(record.id())));
}

ReportAxes axes_of(const Context& c, const std::string& gate) { return c.request.axes_for ? c.request.axes_for(gate) : ReportAxes{}; }

// A gate's name as a file name: letters, digits, '.', '-' and '_' kept, the rest '_'.
std::string file_safe(const std::string& name) {
  std::string out;
  for (char ch : name) out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_' ? ch : '_';
  return out.empty() || out[0] == '.' ? "_" + out : out;
}

// The run folder's RUN/PROCESS/{stdout,stderr}.log (plain files, not links)
// copied into `dir`/logs/ID/PROCESS/: the last kLogCopyBytes of each.
std::vector<HarnessLog> copy_logs(const std::filesystem::path& run, const std::filesystem::path& dir, std::int64_t id) {
  std::vector<HarnessLog> logs;
  std::error_code ec;
  if (!std::filesystem::is_directory(run, ec)) return logs;
  std::vector<std::filesystem::path> processes;
  for (const auto& e : std::filesystem::directory_iterator(run, ec)) {
    if (e.is_directory(ec) && !e.is_symlink(ec)) processes.push_back(e.path());
  }
  std::sort(processes.begin(), processes.end());
  for (const auto& process : processes) {
    for (const char* stream : {"stdout", "stderr"}) {
      const auto from = process / (std::string(stream) + ".log");
      if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(from, ec))) continue;
      HarnessLog l;
      l.process = process.filename().string();
      l.stream = stream;
      l.href = fmt::format("logs/{}/{}/{}.log", id, file_safe(l.process), stream);
      l.original_bytes = std::filesystem::file_size(from, ec);
      std::ifstream in(from, std::ios::binary);
      const std::uintmax_t keep = std::min(l.original_bytes, kLogCopyBytes);
      l.truncated = keep < l.original_bytes;
      in.seekg(static_cast<std::streamoff>(l.original_bytes - keep));
      std::string text(keep, '\0');
      in.read(text.data(), static_cast<std::streamsize>(keep));
      text.resize(static_cast<std::size_t>(in.gcount()));
      l.bytes = write_atomically(dir / l.href, text);
      logs.push_back(l);
    }
  }
  return logs;
}

// The whole ledger (since --since) as a folder of linked pages.
ReportWritten write_folder(const Context& c) {
  const auto& dir = c.request.out;
  std::filesystem::create_directories(dir);
  Ledger::ListFilter filter;
  filter.since = c.request.since;
  const J list = c.ledger.list(filter);
  std::vector<ExperimentRecord> records;
  for (const auto& e : list) records.push_back(c.ledger.record(e["id"].get<std::int64_t>()));
  ReportLinks links;
  links.index = "index.html";
  std::map<std::string, std::vector<ExperimentRecord>> by_gate;
  NextStepsOf next;
  int logs = 0;
  // The logs folder is made afresh: a link planted in it (or as it) is
  // removed, never written through (remove_all does not follow links).
  {
    std::error_code ec;
    std::filesystem::remove_all(dir / "logs", ec);
    if (ec) throw InfraError(fmt::format("{}: cannot clear the report's logs folder: {}", (dir / "logs").string(), ec.message()));
  }
  for (const auto& r : records) {
    links.experiments[r.id()] = fmt::format("experiment-{}.html", r.id());
    links.gates[r.summary.gate] = "gate-" + file_safe(r.summary.gate) + ".html";
    by_gate[r.summary.gate].push_back(r);
    next[r.id()] = next_of(c, r);
    links.logs[r.id()] = copy_logs(c.runs / std::to_string(r.id()), dir, r.id());
    logs += static_cast<int>(links.logs[r.id()].size());
  }
  // Each experiment with a gate run against the one before it on its gate.
  for (const auto& [gate, rs] : by_gate) {
    const ExperimentRecord* previous = nullptr;
    for (const auto& r : rs) {
      if (!r.gate_run) continue;
      if (previous) links.compares[{previous->id(), r.id()}] = fmt::format("compare-{}-{}.html", previous->id(), r.id());
      previous = &r;
    }
  }
  ReportWritten w;
  w.kind = "index";
  w.path = std::filesystem::absolute(dir / links.index).lexically_normal();
  w.chain = c.facts.chain;
  w.logs = logs;
  const auto put = [&](const std::string& name, const ReportPage& page) {
    w.bytes += write_atomically(dir / name, page.html);
    w.charts += page.charts;
    w.pages.push_back(std::filesystem::absolute(dir / name).lexically_normal());
    for (const auto& n : page.notices) w.notices.push_back(name + ": " + n);
  };
  put(links.index, ledger_report(list, c.facts, c.vega, records, next, links));
  const J speedups = c.ledger.rows("gate_speedups"), reasons = c.ledger.rows("red_gates_by_reason");
  for (const auto& [gate, rs] : by_gate) {
    J of_gate = J::array();
    for (const auto& e : list) {
      if (e.value("gate", "") == gate) of_gate.push_back(e);
    }
    put(links.gates[gate], gate_report(gate, c.request.since, of_gate, speedups, reasons, c.facts, c.vega, rs, next, links));
  }
  for (const auto& r : records) {
    put(links.experiments[r.id()], experiment_report(r, c.facts, axes_of(c, r.summary.gate), c.vega, next[r.id()], links));
  }
  std::map<std::int64_t, const ExperimentRecord*> by_id;
  for (const auto& r : records) by_id[r.id()] = &r;
  for (const auto& [ab, name] : links.compares) {
    put(name, compare_report(*by_id[ab.first], *by_id[ab.second], compare_experiments(c.ledger, ab.first, ab.second), c.facts, c.vega, links));
  }
  return w;
}

// One page (experiment, gate, ledger or compare) into `out`.
ReportPage one_page(const Context& c) {
  const ReportRequest& request = c.request;
  if (request.compare) {
    const auto [a, b] = *request.compare;
    return compare_report(c.ledger.record(a), c.ledger.record(b), compare_experiments(c.ledger, a, b), c.facts, c.vega);
  }
  if (request.experiment_id) {
    const ExperimentRecord record = c.ledger.record(*request.experiment_id);
    return experiment_report(record, c.facts, axes_of(c, record.summary.gate), c.vega, next_of(c, record));
  }
  Ledger::ListFilter filter;
  filter.since = request.since;
  if (request.gate.empty()) return ledger_report(c.ledger.list(filter), c.facts, c.vega);
  filter.gate = request.gate;
  const J list = c.ledger.list(filter);
  std::vector<ExperimentRecord> records;
  NextStepsOf next;
  for (const auto& e : list) {
    records.push_back(c.ledger.record(e["id"].get<std::int64_t>()));
    next[records.back().id()] = next_of(c, records.back());
  }
  return gate_report(request.gate, request.since, list, c.ledger.rows("gate_speedups"), c.ledger.rows("red_gates_by_reason"), c.facts, c.vega, records,
                     next);
}

// The markdown summary of the experiment asked for, or the latest one.
ReportWritten write_markdown(const Context& c) {
  std::int64_t id = 0;
  if (c.request.experiment_id) {
    id = *c.request.experiment_id;
  } else {
    const J list = c.ledger.list();
    if (list.empty()) throw InputError(c.request.ledger.string(), {}, "ID", "the ledger holds no experiment to summarise");
    id = list.back()["id"].get<std::int64_t>();
  }
  const ExperimentRecord record = c.ledger.record(id);
  ReportWritten w;
  w.kind = "markdown";
  w.chain = c.facts.chain;
  const std::string text = experiment_markdown(record, next_of(c, record));
  if (c.request.out.empty()) {
    w.text = text;
    w.bytes = text.size();
  } else {
    w.bytes = write_atomically(c.request.out, text);
    w.path = std::filesystem::absolute(c.request.out).lexically_normal();
  }
  return w;
}

}  // namespace

ReportWritten write_report(const ReportRequest& request) {
  if (request.format != "html" && request.format != "md") {
    throw InputError("command line", {}, "--format", fmt::format("expected html or md, got '{}'", request.format));
  }
  const Ledger ledger(request.ledger, Ledger::Mode::read_only);
  Workspace workspace;
  workspace.ledger = std::filesystem::absolute(request.ledger);
  Context c{request, ledger, {}, {}, workspace.runs()};
  c.facts.ledger_file = std::filesystem::absolute(request.ledger).lexically_normal().string();
  c.facts.chain = ledger.verify();
  c.facts.written_at = utc_now();
  if (request.format == "md") return write_markdown(c);
  c.vega = vega_inline_scripts(request.vega_dir.empty() ? default_vega_dir() : request.vega_dir);
  if (request.folder) return write_folder(c);
  const ReportPage page = one_page(c);
  ReportWritten w;
  w.kind = page.kind;
  w.bytes = write_atomically(request.out, page.html);
  w.path = std::filesystem::absolute(request.out).lexically_normal();
  w.charts = page.charts;
  w.notices = page.notices;
  w.chain = c.facts.chain;
  return w;
}

J report_written_json(const ReportWritten& w) {
  J doc = {{"kind", w.kind},
           {"path", w.path.string()},
           {"bytes", w.bytes},
           {"charts", w.charts},
           {"notices", w.notices},
           {"chain", {{"ok", w.chain.ok}, {"head", w.chain.head.empty() ? J(nullptr) : J(w.chain.head)}, {"links", w.chain.links},
                      {"problem", w.chain.problem}}}};
  if (w.kind == "index") {
    J pages = J::array();
    for (const auto& p : w.pages) pages.push_back(p.string());
    doc["pages"] = pages;
    doc["logs"] = w.logs;
  }
  return doc;
}

}  // namespace densefeed
