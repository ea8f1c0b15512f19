// report: one self-contained HTML page of the ledger (report_html.h).
#include <cctype>
#include <iostream>

#include <fmt/format.h>

#include "cli.h"
#include "error.h"
#include "gate_spec.h"
#include "report_html.h"

namespace densefeed {

std::vector<CliVerb> add_report_verbs(CLI::App& app, CliContext& ctx) {
  std::vector<CliVerb> verbs;
  auto* report = app.add_subcommand("report", "write an HTML report (charts and tables, no network needed to view it): one experiment "
                                              "(ID), one gate's history (--gate), or the whole ledger");
  struct Args {
    std::string id, gate, since, out;
  };
  auto args = std::make_shared<Args>();
  report->add_option("ID", args->id, "experiment id (default: the whole ledger, or --gate)");
  report->add_option("--gate", args->gate, "one gate's experiments over time");
  report->add_option("--since", args->since, "only experiments submitted at or after this ISO 8601 UTC time (gate and ledger pages)");
  report->add_option("-o,--output", args->out, "the HTML file to write")->required();
  add_ledger_and_json(report, ctx);
  verbs.push_back({report, [&ctx, args] {
                     ReportRequest request;
                     request.ledger = ctx.ledger_path();
                     request.out = args->out;
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
                     if (ctx.json) {
                       std::cout << report_written_json(w).dump(2) << "\n";
                     } else {
                       std::cout << fmt::format("wrote {} ({} page, {} charts, {} bytes)\n", w.path.string(), w.kind, w.charts, w.bytes);
                       for (const auto& n : w.notices) std::cout << "  " << n << "\n";
                       if (!w.chain.ok) std::cout << "  the ledger's hash chain is broken: " << w.chain.problem << "\n";
                     }
                     return 0;
                   }});
  return verbs;
}

}  // namespace densefeed
