// `densefeed gate show`: a gate as its store holds it, whether it matches
// its lock, and (from the ledger's latest run of it) the cases a simple
// wrong candidate would pass.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gate_spec.h"
#include "gate_store.h"
#include "ledger.h"

namespace densefeed {

struct GateOverview {
  GateSpec gate;
  std::vector<std::string> lock_problems;  // the gate file's, then its frozen files' (gate_lock.h)
  std::optional<BlindSpots> blind_spots;   // none when no ledger could be read
  std::string blind_spots_note;            // why not: "no ledger yet", or the ledger's error
};

// Reads gate `name` from `store` and its blind spots from the ledger file
// `ledger` (read only; a ledger that is absent or unreadable leaves them
// unknown and says why, never throws). Throws InputError when the store has
// no such gate (naming the gates it has), and what load_gate and read_lock throw.
GateOverview gate_overview(const GateStore& store, const std::string& name, const std::filesystem::path& ledger);

}  // namespace densefeed
