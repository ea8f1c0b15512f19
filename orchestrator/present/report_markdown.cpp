#include "report_markdown.h"

#include <cmath>

#include <fmt/format.h>

#include "failure.h"
#include "printable.h"
#include "report_context.h"
#include "shell_words.h"

namespace densefeed {
namespace {

std::string sci(double v) { return std::isnan(v) ? "NaN" : fmt::format("{:.3e}", v); }
std::string fixed3(double v) { return std::isnan(v) ? "—" : fmt::format("{:.3f}", v); }
std::string general(double v) { return std::isnan(v) ? "—" : fmt::format("{:.4g}", v); }

// A verdict as a word with a mark a reader sees at a glance.
std::string badge(const std::string& verdict) {
  if (verdict == "green" || verdict == "faster") return ":white_check_mark: **" + verdict + "**";
  if (verdict == "red" || verdict == "error" || verdict == "slower") return ":x: **" + verdict + "**";
  return "**" + markdown_escape(verdict) + "**";
}

std::string verdict_line(const ExperimentRecord& r) {
  const ExperimentSummary& s = r.summary;
  // A gate run the summary has not judged yet (no stage outcome) speaks for itself.
  const std::string verdict = !r.gate_run ? "pending" : s.verdict == "pending" ? r.gate_verdict() : s.verdict;
  std::string line = fmt::format("### densefeed: experiment {} {}: {}", r.id(), markdown_escape(s.name), badge(verdict));
  if (!s.verdict_stage.empty() && verdict != "green" && verdict != "pending") line += fmt::format(" ({})", markdown_escape(s.verdict_stage));
  line += fmt::format("\n\ngate {}: {}", markdown_escape(s.gate), badge(r.gate_verdict()));
  if (!r.gate_run) line += fmt::format(" (state {}: no stage has run)", to_string(s.state));
  const std::string reason = r.gate_run && !r.gate_run->reason.empty() ? r.gate_run->reason : s.reason;
  if (!reason.empty() && verdict != "green") line += " — " + markdown_escape(reason);
  return line + "\n\n";
}

std::string gate_table(const GateRunRow& run) {
  std::size_t red = 0, listed = 0;
  for (const auto& c : run.cases) red += c.verdict != "green";
  std::string s = fmt::format("**Gate** (profile {}, seed {}): {} case(s), {} green, {} not green.\n\n", markdown_escape(run.profile),
                              markdown_escape(run.seed), run.cases.size(), run.cases.size() - red, red);
  for (const auto& p : run.lock_problems) s += "- lock: " + markdown_escape(p) + "\n";
  if (!red) return s;
  s += "| case | verdict | output.metric | error | tolerance | error / tolerance | reason |\n| --- | --- | --- | ---: | ---: | ---: | --- |\n";
  for (const auto& c : run.cases) {
    if (c.verdict == "green") continue;
    if (listed++ == kMarkdownRedCases) break;
    bool any = false;
    for (const auto& m : c.metrics) {
      if (m.passed) continue;
      // The case's reason once, on its first failing metric's row.
      const std::string reason = any ? "" : markdown_escape(c.reason);
      any = true;
      const std::string ratio = m.bound > 0 && !std::isnan(m.value) ? fmt::format("{:.3g}", m.value / m.bound) : "—";
      s += fmt::format("| {} | {} | {}.{} | {} | {} | {} | {} |\n", markdown_escape(c.label), case_label(c.verdict, c.failure), markdown_escape(m.output),
                       markdown_escape(m.metric), sci(m.value), sci(m.bound), ratio, reason);
    }
    if (!any) s += fmt::format("| {} | {} | | | | | {} |\n", markdown_escape(c.label), case_label(c.verdict, c.failure), markdown_escape(c.reason));
  }
  if (red > kMarkdownRedCases) s += fmt::format("\n…and {} more red case(s) (the HTML report lists them all).\n", red - kMarkdownRedCases);
  return s + "\n";
}

std::string bench_table(const ExperimentRecord& r) {
  if (r.bench_cases.empty()) {
    if (r.gate_run && r.gate_run->verdict != "green") return "**Bench**: not run: a speedup is never measured for a gate that is not green.\n\n";
    const StageOutcome& bench = r.summary.stage("bench");
    if (bench.verdict == StageVerdict::red || bench.verdict == StageVerdict::error) {
      return fmt::format("**Bench**: {} — {}\n\n", to_string(bench.verdict), markdown_escape(bench.reason));
    }
    return "**Bench**: none recorded.\n\n";
  }
  std::string s = "**Bench**\n\n| bench case | base median | candidate median | speedup | interval | verdict |\n| --- | ---: | ---: | ---: | --- | --- |\n";
  for (const auto& b : r.bench_cases) {
    s += fmt::format("| {} | {} {} | {} {} | {}x | [{}, {}] at {:.4g} % | {} |\n", markdown_escape(b.label), general(b.base_median), markdown_escape(b.unit),
                     general(b.candidate_median), markdown_escape(b.unit), fixed3(b.speedup), fixed3(b.lo), fixed3(b.hi),
                     std::isnan(b.ci_confidence) ? 0.0 : 100 * b.ci_confidence, badge(b.verdict));
  }
  return s + "\n";
}

std::string next_list(const std::vector<NextStep>& next) {
  if (next.empty()) return "";
  std::string s = "**Next** (cheapest first)\n\n";
  int i = 0;
  for (const auto& n : next) {
    // Quoted as a shell reads it: "--case 'cols=1000 chunks=1'" stays one argument when pasted.
    std::vector<std::string> words;
    for (const auto& a : n.command) words.push_back(one_line(a));
    const std::string command = shell_line(words);
    // A code span that holds a backtick needs a longer fence: use two and pad.
    s += fmt::format("{}. [{}] {}{}\n", ++i, markdown_escape(n.kind), markdown_escape(n.suggestion),
                     command.empty() ? "" : command.find('`') == std::string::npos ? " `" + command + "`" : " `` " + command + " ``");
  }
  return s + "\n";
}

}  // namespace

std::string markdown_escape(const std::string& raw) {
  const std::string text = one_line(raw);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\\': case '`': case '*': case '_': case '[': case ']': case '|': case '#': case '~':
        out += '\\';
        out += c;
        break;
      default: out += c;
    }
  }
  return out;
}

std::string experiment_markdown(const ExperimentRecord& record, const std::vector<NextStep>& next) {
  std::string s = verdict_line(record);
  const ProvenanceLine p = provenance_line(record.gate_run ? record.gate_run->provenance : nlohmann::ordered_json());
  if (p.known && !p.clean) s += "> [!WARNING]\n> Provenance: " + markdown_escape(p.text) + "\n\n";
  if (record.gate_run) s += gate_table(*record.gate_run);
  s += bench_table(record);
  s += next_list(next);
  s += fmt::format("<sub>environment: {}; provenance: {}</sub>\n", markdown_escape(environment_line(record)), markdown_escape(p.text));
  return s;
}

}  // namespace densefeed
