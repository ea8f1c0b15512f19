// compare: two tensor files judged with the gate's engine (compare_files.h).
#include <iostream>
#include <memory>

#include "cli.h"
#include "compare_files.h"
#include "exit_code.h"
#include "report.h"

namespace densefeed {
namespace {

void print_comparison(const CompareFilesRequest& request, const CompareFilesResult& r, bool json) {
  if (json) {
    auto doc = comparison_json(r.comparison);
    doc["reference"] = request.reference;
    doc["candidate"] = request.candidate;
    doc["tolerance"] = tolerance_to_json(r.tolerance);
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << request.candidate << " against " << request.reference << ": " << render_comparison_text(r.comparison);
  }
}

}  // namespace

std::vector<CliVerb> add_compare_verbs(CLI::App& app, CliContext& ctx) {
  auto* compare = app.add_subcommand("compare", "compare two tensor files (.npy or .safetensors) with the gate's engine");
  struct Args {
    CompareFilesRequest request;
    std::size_t partition_axis = 0;
    CLI::Option* axis = nullptr;
  };
  auto a = std::make_shared<Args>();
  CompareFilesRequest& r = a->request;
  Tolerance& compare_tol = r.tolerance;
  compare->add_option("REF", r.reference, "reference tensor file")->required();
  compare->add_option("CAND", r.candidate, "candidate tensor file")->required();
  compare->add_option("--ref-tensor", r.reference_tensor, "tensor name in a .safetensors reference");
  compare->add_option("--cand-tensor", r.candidate_tensor, "tensor name in a .safetensors candidate");
  compare->add_option("--dtype", r.candidate_dtype, "declared candidate dtype (needed for bfloat16/fp8 stored as raw records in .npy)");
  compare->add_option("--rel-l2", compare_tol.rel_l2, "bound on ||c - r|| / ||r||");
  compare->add_option("--max-abs", compare_tol.max_abs, "bound on max |c - r|");
  compare->add_option("--atol", compare_tol.atol, "elementwise |c - r| <= atol + rtol |r|");
  compare->add_option("--rtol", compare_tol.rtol, "elementwise |c - r| <= atol + rtol |r|");
  compare->add_option("--max-violation-fraction", compare_tol.max_violation_fraction, "elements allowed to break the elementwise bound")
      ->check(CLI::Range(0.0, 1.0));
  compare->add_option("--ulp", compare_tol.max_ulp, "bound on the ULP distance in the candidate's dtype");
  a->axis = compare->add_option("--partition-axis", a->partition_axis, "report each slice along this axis");
  compare->add_option("--partition-parts", r.partition_parts, "number of equal slices (default: one per position)");
  compare->add_flag("--json", ctx.json, "print JSON");
  return {{compare,
           [&ctx, a] {
             if (a->axis->count() > 0) a->request.partition_axis = a->partition_axis;
             const CompareFilesResult result = compare_files(a->request);
             print_comparison(a->request, result, ctx.json);
             return exit_code_of(result.comparison.verdict);
           },
           StoreUse::none}};
}

}  // namespace densefeed
