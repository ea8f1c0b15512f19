// repro ID CASE (issue 30): the commands that replay one gate case of a
// recorded experiment by hand (case_repro.h).
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "case_repro.h"
#include "cli.h"
#include "error.h"
#include "ledger.h"
#include "sha256.h"

namespace densefeed {

std::vector<CliVerb> add_repro_verbs(CLI::App& app, CliContext& ctx) {
  auto* repro = app.add_subcommand("repro", "print the commands that replay one case of an experiment by hand: the reference and "
                                            "the candidate with their environment and seed, then the gate's comparison "
                                            "(sandbox off, said so)");
  struct Args {
    std::string id, case_filter, dir;
  };
  auto a = std::make_shared<Args>();
  repro->add_option("ID", a->id, "experiment id")->required();
  repro->add_option("CASE", a->case_filter, "the case: its whole label, or key=value pairs only it has (e.g. 'T=24576')")->required();
  repro->add_option("--dir", a->dir, "where the script runs each side (DIR/reference, DIR/candidate; default densefeed-repro-ID)");
  add_ledger_and_json(repro, ctx);
  return {{repro, [&ctx, a] {
             const Ledger ledger(ctx.ledger_path(), Ledger::Mode::read_only);
             require_intact_chain(ledger);
             const auto id = parse_experiment_id(a->id);
             const ExperimentRecord record = ledger.record(id);
             const GateStore& store = ctx.store();
             const GateSpec gate = load_gate(store, record.summary.gate);
             CaseRepro r = case_repro(record, gate, a->case_filter, a->dir.empty() ? fmt::format("densefeed-repro-{}", id) : a->dir);
             if (record.gate_run && !record.gate_run->gate_sha256.empty() && sha256_file(gate.file) != record.gate_run->gate_sha256) {
               r.notes.push_back(fmt::format("the gate file {} changed since experiment {} ran (sha256 {} then): these commands are "
                                             "today's gate's", gate.file.string(), id, record.gate_run->gate_sha256.substr(0, 12)));
             }
             if (ctx.json) std::cout << case_repro_json(r).dump(2) << "\n";
             else std::cout << render_case_repro(r);
             return 0;
           },
           StoreUse::always}};
}

}  // namespace densefeed
