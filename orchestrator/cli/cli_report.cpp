// report: one self-contained HTML page of the ledger (report_html.h).
#include <cctype>
#include <iostream>

#include <fmt/format.h>

#include "cli.h"
#include "error.h"
#include "gate_spec.h"
#include "report_html.h"

namespace densefeed {

namespace {

// Which flags go together: one page kind at a time, md for one experiment.
template <class Args>
void check_report_args(const Args& a, bool json) {
  const int kinds = !a.id.empty() + !a.gate.empty() + !a.compare.empty() + a.folder;
  if (kinds > 1) throw InputError("command line", {}, "ID", "give either ID or --gate, or --compare A B, or --folder: one kind of report at a time");
  if (a.format == "md") {
    if (!a.gate.empty() || !a.compare.empty() || a.folder) {
      throw InputError("command line", {}, "--format", "md summarises one experiment (ID, or the latest): it takes no --gate, --compare or --folder");
    }
    if (json && a.out.empty()) throw InputError("command line", {}, "--json", "--format md --json needs -o FILE (the markdown is printed otherwise)");
    return;
  }
  if (a.out.empty()) throw InputError("command line", {}, "-o", "an HTML report needs -o FILE.html (--folder: -o FOLDER)");
}

}  // namespace

std::vector<CliVerb> add_report_verbs(CLI::App& app, CliContext& ctx) {
  std::vector<CliVerb> verbs;
  auto* report = app.add_subcommand("report", "write an HTML report (charts and tables, no network needed to view it): one experiment "
                                              "(ID), one gate's history (--gate), or the whole ledger");
  struct Args {
    std::string id, gate, since, out, format = "html";
    std::vector<std::string> compare;
    bool folder = false;
  };
  auto args = std::make_shared<Args>();
  report->add_option("ID", args->id, "experiment id (default: the whole ledger, or --gate; --format md: the latest experiment)");
  report->add_option("--gate", args->gate, "one gate's experiments over time");
  report->add_option("--since", args->since, "only experiments submitted at or after this ISO 8601 UTC time (gate, ledger and folder pages)");
  report->add_option("--compare", args->compare, "two experiments side by side: --compare A B")->expected(2);
  report->add_flag("--folder", args->folder,
                   "-o names a folder: index.html and a linked page per gate, experiment and compare, with the harness logs");
  report->add_option("--format", args->format, "html (default) or md: a markdown summary of one experiment for a PR comment or "
                                               "$GITHUB_STEP_SUMMARY (without -o: printed)");
  report->add_option("-o,--output", args->out, "the HTML file (--folder: the folder; md: the markdown file) to write");
  add_ledger_and_json(report, ctx);
  verbs.push_back({report, [&ctx, args] {
                     ReportRequest request;
                     request.ledger = ctx.ledger_path();
                     request.out = args->out;
                     request.format = args->format;
                     request.folder = args->folder;
                     check_report_args(*args, ctx.json);
                     if (!args->compare.empty()) request.compare = {{parse_experiment_id(args->compare[0]), parse_experiment_id(args->compare[1])}};
                     if (!args->id.empty()) {
                       if (!args->gate.empty() || !args->since.empty()) {
                         throw InputError("command line", {}, "--gate", "an experiment's page takes no --gate or --since; give either ID or --gate");
                       }
                       request.experiment_id = parse_experiment_id(args->id);
                     }
                     if (!args->since.empty() && (args->since.size() < 4 || !std::isdigit(static_cast<unsigned char>(args->since[0])))) {
                       throw InputError("command line", {}, "--since", "expected an ISO 8601 UTC time such as 2026-11-29 or 2026-11-29T20:00, got '" + args->since + "'");
                     }
                     request.gate = args->gate;
                     request.since = args->since;
                     // The gate's own report keys when a project is at hand; a bare --ledger infers them.
                     request.axes_for = [&ctx](const std::string& gate) {
                       try {
                         const GateSpec spec = load_gate(ctx.store(), gate);
                         return ReportAxes{spec.trend_rows, spec.trend_columns};
                       } catch (const std::exception&) {
                         return ReportAxes{};
                       }
                     };
                     request.gate_for = [&ctx](const std::string& gate) -> std::optional<GateSpec> {
                       try {
                         return load_gate(ctx.store(), gate);
                       } catch (const std::exception&) {
                         return std::nullopt;
                       }
                     };
                     const ReportWritten w = write_report(request);
                     if (request.format == "md" && args->out.empty()) {
                       std::cout << w.text;
                     } else if (ctx.json) {
                       std::cout << report_written_json(w).dump(2) << "\n";
                     } else {
                       std::cout << fmt::format("wrote {} ({} page, {} charts, {} bytes)\n", w.path.string(), w.kind, w.charts, w.bytes);
                       if (!w.pages.empty()) std::cout << fmt::format("  {} pages and {} harness logs in {}\n", w.pages.size(), w.logs, args->out);
                       for (const auto& n : w.notices) std::cout << "  " << n << "\n";
                       if (!w.chain.ok) std::cout << "  the ledger's hash chain is broken: " << w.chain.problem << "\n";
                     }
                     return 0;
                   }});
  return verbs;
}

}  // namespace densefeed
