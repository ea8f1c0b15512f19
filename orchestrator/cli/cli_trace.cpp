// trace analyze: where the time went, what overlapped what (trace_query.h),
// printed as trace_report.h renders it.
#include <iostream>
#include <memory>

#include "cli.h"
#include "trace_query.h"
#include "trace_report.h"

namespace densefeed {
namespace {

void print_trace_query(const TraceQueryResult& r, bool json) {
  const auto* with_checks = r.checked ? &r.checks : nullptr;
  // Names come from the trace as written, UTF-8 or not.
  if (json) std::cout << trace_analysis_json(r.analysis, with_checks).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  else std::cout << render_trace_analysis_text(r.analysis, with_checks);
}

}  // namespace

std::vector<CliVerb> add_trace_verbs(CLI::App& app, CliContext& ctx) {
  auto* trace_cmd = app.add_subcommand("trace", "execution traces: where the time went, what overlapped what");
  trace_cmd->require_subcommand(1);
  auto* trace_analyze = trace_cmd->add_subcommand(
      "analyze", "lanes, where the time went, overlaps, top names, launch delay (Chrome JSON, .json.gz, nsys .sqlite)");
  struct Args {
    std::vector<std::string> files;
    std::string window, checks;
    TraceQuery query;
    CLI::Option* window_opt = nullptr;
    CLI::Option* checks_opt = nullptr;
  };
  auto a = std::make_shared<Args>();
  trace_analyze->add_option("FILE", a->files, "trace file(s), one per rank, or a folder of them")->required();
  a->window_opt = trace_analyze->add_option("--window", a->window, "analyse only the span of the slice(s) with this name");
  trace_analyze->add_option("--overlap", a->query.overlaps, "A B: overlap of selection A with selection B, e.g. 'name=nccl;lane=gpu' "
                                                           "'class=compute' (repeatable)")
      ->expected(2)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  trace_analyze->add_option("--top", a->query.top, "names per lane kind by exclusive time")->check(CLI::Range(1, 100000))->capture_default_str();
  a->checks_opt = trace_analyze->add_option(
      "--checks", a->checks, "YAML file: a list of checks (overlap, exposed, share), or a manifest's trace.checks; red (exit 1) if one fails");
  trace_analyze->add_flag("--json", ctx.json, "print one JSON document (schemas/trace-report.schema.json)");
  return {{trace_analyze,
           [&ctx, a] {
             TraceQuery& query = a->query;
             query.files.assign(a->files.begin(), a->files.end());
             if (a->window_opt->count() > 0) query.window = a->window;
             if (a->checks_opt->count() > 0) query.checks_file = a->checks;
             const TraceQueryResult result = analyze_trace_files(query);
             print_trace_query(result, ctx.json);
             return result.red() ? 1 : 0;
           },
           StoreUse::none}};
}

}  // namespace densefeed
