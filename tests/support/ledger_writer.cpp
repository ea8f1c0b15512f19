// Records N experiments, each with a green gate run, into a ledger as fast as
// it can: the ledger's concurrency test starts several at once.
//
//   ledger_writer LEDGER MANIFEST PROJECT N TAG   (PROJECT: the folder holding densefeed.yaml)
#include <iostream>
#include <string>

#include "gate_store.h"
#include "ledger.h"
#include "manifest.h"
#include "project.h"

int main(int argc, char** argv) {
  if (argc != 6) return 2;
  try {
    const densefeed::Project project = densefeed::load_project(argv[3]);
    densefeed::Manifest m = densefeed::load_manifest(argv[2], densefeed::worktree_store(project), project);
    const int n = std::stoi(argv[4]);
    const std::string tag = argv[5];
    densefeed::GateResult green;
    densefeed::CaseResult c;
    c.gate_case.label = "c";
    c.gate_case.values = {{"n", 1}};
    green.cases.push_back(c);
    for (int i = 0; i < n; ++i) {
      // A fresh connection per experiment, as separate densefeed processes would open one.
      densefeed::Ledger ledger(argv[1]);
      const auto id = ledger.record_experiment({&m, {{"tag", tag}, {"i", i}}, {{"precision", "ieee"}}});
      ledger.record_gate_run(id, {"cp-affine-chain", std::string(64, 'a'), {}, "quick", static_cast<std::uint64_t>(i),
                                  densefeed::utc_now(), &green});
      ledger.record_event(id, densefeed::ExperimentEvent::finished, "run");
    }
  } catch (const std::exception& e) {
    std::cerr << "ledger_writer: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
