// The benchmark stage (runs only after a green gate): the candidate's and the
// base's harnesses on the gate's bench cases, in interleaved rounds (A B, B A,
// B A, A B, ...) so that drift and heat hit both arms alike, until the
// sequential decision of bench_statistics stops it (looks at 9, 15 and 25
// rounds) or the case's wall-time cap is reached. Rounds alternate the
// iteration count (iters, 2 x iters) so that densefeed can fit each arm's
// per-iteration wall time from outside (timing_checks.h). With a gate's
// trusted driver (gate_spec.h BenchDriver) the driver, run from the trusted
// tree, loads each arm's kernel and times it; without one each arm's harness
// times itself and the results say "timed by the candidate".
#pragma once

#include "failure.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_options.h"
#include "bench_result.h"
#include "bench_statistics.h"
#include "case_grid.h"
#include "arm_context.h"
#include "gate_spec.h"
#include "reference_run.h"
#include "sandbox.h"
#include "timing_checks.h"
#include "verdict.h"

namespace densefeed {

// Runs the gate's driver (or, without one, its candidate command) in bench
// mode for each arm (DENSEFEED_MODE=bench, DENSEFEED_WARMUP, DENSEFEED_ITERS)
// and reads samples.json (schemas/samples.schema.json); with a driver also
// timed.json, and every timed iteration's outputs are gated. Then the
// cross-checks of timing_checks.h: a candidate flagged by one makes the stage
// red (FailureKind::implausible_timing) and its case inconclusive; the base
// flagged makes it error; drift makes a case inconclusive (a slower case
// stays slower: no flag makes a candidate look better); a speedup above
// the gate's max_speedup is flagged beyond_bound (promotion then needs a
// person's acceptance). Throws InfraError only for densefeed's own failures.
BenchResult run_bench(const GateSpec& gate, const nlohmann::ordered_json& base_params,
                      const nlohmann::ordered_json& candidate_params, const BenchOptions& options);

}  // namespace densefeed
