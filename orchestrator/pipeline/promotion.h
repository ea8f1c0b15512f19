// promote: a green, reviewed experiment moves to the end-to-end acceptance
// run its manifest pre-registered. The database refuses a promotion that its
// invariants forbid; check_promotion only says why in words first.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gate_store.h"
#include "ledger.h"
#include "project.h"
#include "workspace.h"

namespace densefeed {

// What a person accepted after checking it (each recorded with the promotion).
struct PromotionAccepts {
  bool candidate_timing = false;  // a benchmark the candidate's own harness timed (no trusted bench.driver)
  bool beyond_bound = false;      // a speedup above the gate's bench.max_speedup
  bool agent_base = false;        // a benchmark against a base the agent wrote
};

struct PromotionCheck {
  ExperimentRecord record;            // Ledger::record of it
  std::vector<std::string> blockers;  // why it cannot be promoted, one sentence each; empty: it can
};

// Reads experiment `id` and says what stands in the way of its promotion: a
// verdict or gate not green, a slower bench case, unaccepted candidate
// timing, speedup beyond bound or agent base, an unapproved risk category,
// a promotion already done (one whose acceptance run was started or
// interrupted may run again), no pre-registered acceptance criteria, a gate
// run whose gates came from a ref other than `trusted_ref` (the one this
// promote's gate store is read from). Throws InputError for an unknown id.
PromotionCheck check_promotion(const Ledger& ledger, std::int64_t id, const PromotionAccepts& accepts, const std::string& trusted_ref);

// Where a promotion's acceptance runs from: the trusted ref's configuration.
struct PromotionSetting {
  Workspace workspace;
  GateStore store;
  Project project;
};

// Records the promotion of `check`'s experiment by `by` (unless one is
// recorded already) and runs its acceptance command from the candidate's
// own build, in the sandbox, recorded `started` first and beaten while it
// runs; returns the acceptance run as recorded. Throws InputError when the
// gate no longer matches its lock, InfraError when the candidate's build
// fails, the sandbox cannot start, or another promote took the run for dead.
AcceptanceRecord run_promotion(Ledger& ledger, const PromotionCheck& check, const std::string& by, const PromotionAccepts& accepts,
                               const PromotionSetting& setting);

}  // namespace densefeed
