// Trend bounds (gate_spec.h TrendBound): an error may be under its bound at
// every point of a sweep and still grow too fast along it (Triton's 3xTF32
// error grows with K far faster than CUTLASS's; each point passes). A gate
// that declares `trend: {along: K, max_exponent: X}` on an output makes
// every case of a row red when its fitted exponent exceeds X.
#pragma once

#include "gate_result.h"
#include "gate_spec.h"

namespace densefeed {

// Judges every trend bound of `gate` over `result`'s compared cases and
// fills result.trends. A row is the cases whose values differ only in the
// bound's `along` key (a numeric value); along the gate's partition key
// (gate_structure.h) only the partitioned cases (key > 1) count; its points are (along, metric),
// metric = the output's comparison rel_l2 or max_abs. A row is judged when it
// has at least 3 points with a finite error > 0 whose largest is at least
// 1.5x the smallest (below that the values are a level, not a law:
// error_trend.cpp prints such rows "flat"); its exponent is fit_power_law's.
// Over max_exponent: each case of the row that was green turns red with
// FailureKind::trend (output, metric, detail: the fit); the reason is
// appended to red ones. result's verdict and failure are updated; its reason
// is left to the caller.
void judge_trend_bounds(const GateSpec& gate, GateResult& result);

}  // namespace densefeed
