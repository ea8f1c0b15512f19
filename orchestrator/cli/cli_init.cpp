// init: make a git repository a densefeed project (project_init.h).
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "project_init.h"

namespace densefeed {
namespace {

void print_init(const InitResult& r, bool json) {
  if (json) {
    std::cout << nlohmann::ordered_json{{"project", r.dir.string()}, {"trusted_ref", r.trusted_ref}, {"written", r.written}}.dump(2)
              << "\n";
    return;
  }
  std::cout << fmt::format("densefeed init: a project in {} (trusted ref: {})\n", r.dir.string(), r.trusted_ref);
  for (const auto& f : r.written) std::cout << "  wrote " << f << "\n";
  std::cout << fmt::format(
      "next: commit it on {0} (runs read gates from there), then run the samples:\n"
      "  git add densefeed.yaml gates harness experiments .densefeed/.gitignore && git commit -m 'densefeed: sample gate'\n"
      "  densefeed run experiments/scan-merge-float16.yaml   # red: the error grows with the shard count\n"
      "  densefeed run experiments/scan-merge-float32.yaml   # green, then a benchmark against float16\n",
      r.trusted_ref);
}

}  // namespace

std::vector<CliVerb> add_init_verbs(CLI::App& app, CliContext& ctx) {
  auto* init_cmd = app.add_subcommand("init", "make this git repository a densefeed project: densefeed.yaml, a sample gate "
                                               "with a Python/numpy harness pair, two sample experiments");
  auto dir = std::make_shared<std::string>(".");
  init_cmd->add_option("DIR", *dir, "the project folder (default: the current one)")->capture_default_str();
  init_cmd->add_flag("--json", ctx.json, "print JSON");
  return {{init_cmd,
           [&ctx, dir] {
             print_init(init_project(*dir), ctx.json);
             return 0;
           },
           StoreUse::none}};
}

}  // namespace densefeed
