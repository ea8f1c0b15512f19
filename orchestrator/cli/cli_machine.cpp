// machine calibrate: measure this machine's ceilings (machine_ceilings.h) and
// record them in the ledger, where the bench stage finds them.
#include <iostream>

#include <fmt/format.h>

#include "cli.h"
#include "error.h"
#include "ledger.h"
#include "machine_ceilings.h"
#include "process_runner.h"

namespace densefeed {

std::vector<CliVerb> add_machine_verbs(CLI::App& app, CliContext& ctx) {
  std::vector<CliVerb> verbs;
  auto* machine = app.add_subcommand("machine", "this machine's measured ceilings, against which speedups are checked");
  machine->require_subcommand(1);
  auto* calibrate = machine->add_subcommand(
      "calibrate", "measure the CPU's copy bandwidth and, with a GPU, its copy bandwidth and matrix rates (densefeed-gpu-ceilings); "
                   "record them in the ledger");
  struct Args {
    bool cpu_only = false;
  };
  auto args = std::make_shared<Args>();
  calibrate->add_flag("--cpu-only", args->cpu_only, "measure the CPU only, even where a GPU is found");
  add_ledger_and_json(calibrate, ctx);
  verbs.push_back({calibrate, [&ctx, args] {
                     Ledger ledger(ctx.ledger_path());
                     std::vector<MachineCeilings> measured{measure_cpu_ceilings()};
                     std::string gpu_why = "--cpu-only";
                     if (!args->cpu_only) {
                       if (auto g = measure_gpu_ceilings(self_dir() / "densefeed-gpu-ceilings", &gpu_why)) measured.push_back(*g);
                     }
                     nlohmann::ordered_json doc = {{"ledger", ctx.ledger_path().string()}, {"ceilings", nlohmann::ordered_json::array()}};
                     for (const auto& m : measured) {
                       const auto id = ledger.record_ceilings(m);
                       doc["ceilings"].push_back({{"id", id}, {"host", m.host}, {"device", m.device}, {"device_name", m.device_name},
                                                  {"bytes_per_s", m.bytes_per_s}, {"flops_per_s", m.flops_per_s}, {"tool", m.tool},
                                                  {"measured_at", m.measured_at}, {"figures", m.figures}});
                     }
                     if (measured.size() == 1) doc["gpu"] = gpu_why;
                     if (ctx.json) {
                       std::cout << doc.dump(2) << "\n";
                     } else {
                       for (const auto& m : measured) {
                         std::cout << fmt::format("{} {} ({}): copy {:.1f} GB/s{}\n", m.host, m.device, m.device_name, m.bytes_per_s / 1e9,
                                                  m.flops_per_s > 0 ? fmt::format(", matrix {:.1f} TFLOP/s", m.flops_per_s / 1e12) : "");
                       }
                       if (measured.size() == 1) std::cout << "GPU: not measured: " << gpu_why << "\n";
                       std::cout << "recorded in " << ctx.ledger_path().string() << "\n";
                     }
                     return 0;
                   },
                   StoreUse::none});
  return verbs;
}

}  // namespace densefeed
