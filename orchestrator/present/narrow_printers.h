// What densefeed narrow printed (pipeline/narrow.h NarrowResult): text for
// people, one JSON document for agents (schemas/narrow.schema.json), the
// same one the ledger keeps (narrowings.result) and MCP's narrow tool returns.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "narrow.h"

namespace densefeed {

// {experiment, gate, layer, conclusion, commit?, reruns, experiments,
//  seconds, budget_s, stopped, steps: [{experiment, step, kind, cases, red,
//  seconds, shows}]}; schemas/narrow.schema.json.
nlohmann::ordered_json narrow_json(const NarrowResult& result);

// "narrow experiment 12 (gate cp-affine-chain): ..." then one line per
// step and "layer: NAME: conclusion".
std::string render_narrow_text(const NarrowResult& result);

// One line while it runs: "densefeed: narrow step #13 rerun 1 ...: 12 case(s), 12 red, 8.1 s".
std::string narrow_step_line(const NarrowStep& step);

}  // namespace densefeed
