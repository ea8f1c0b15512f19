// `densefeed gate show`: what a gate runs, accepts, checks and freezes, as a
// JSON document and as text for people.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gate_spec.h"
#include "ledger.h"

namespace densefeed {

// What a gate runs, accepts, checks and freezes, whether it matches the lock,
// and (from the ledger's latest run of the gate) the cases that a simple
// wrong candidate would pass; `blind_spots` null when no ledger could be read
// (`blind_spots_note` says why).
nlohmann::ordered_json gate_json(const GateSpec& gate, const std::vector<std::string>& lock_problems,
                                 const BlindSpots* blind_spots = nullptr, const std::string& blind_spots_note = "");

// gate_json's document for people.
std::string render_gate_text(const nlohmann::ordered_json& gate_doc);

}  // namespace densefeed
