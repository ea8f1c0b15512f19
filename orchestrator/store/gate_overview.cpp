#include "gate_overview.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error.h"
#include "gate_lock.h"

namespace densefeed {

GateOverview gate_overview(const GateStore& store, const std::string& name, const std::filesystem::path& ledger) {
  if (!std::filesystem::is_regular_file(store.path(store.gate_rel(name)))) {
    throw InputError("command line", {}, "NAME", missing_gate_message(store, name));
  }
  GateOverview o{load_gate(store, name), {}, std::nullopt, ""};
  const auto lock = read_lock(store);
  o.lock_problems = check_locked_file(store, lock, store.gate_rel(name));
  const auto frozen = check_frozen_files(store, lock, o.gate);
  o.lock_problems.insert(o.lock_problems.end(), frozen.begin(), frozen.end());
  // Whether the gate could fail is learnt from its recorded runs: a
  // ledger that cannot be read leaves it unknown, and says why.
  try {
    if (std::filesystem::is_regular_file(ledger)) {
      Ledger reader(ledger, Ledger::Mode::read_only);
      o.blind_spots = reader.blind_spots(name);
    } else {
      o.blind_spots_note = "no ledger yet";
    }
  } catch (const std::exception& e) {
    o.blind_spots_note = std::string("the ledger could not be read: ") + e.what();
  }
  return o;
}

}  // namespace densefeed
