#!/usr/bin/env bash
# Issue 30 ("densefeed narrow") on an H200 (the device tool): fla-core 0.5.2's
# intra-card CP through the session gate (profile quick, seed 777: red at
# T = 24576, the one case fla cuts, green at T = 8192), then
# `densefeed narrow` of that experiment: what layer it names, in how many
# experiments and seconds. Run from the repository root, carrying the wheels
# and densefeed's build dependencies:
#
#   bash experiments/fla-intracard-cp/device_narrow.sh
#   carry: experiments/fla-intracard-cp/.whl, experiments/fla-intracard-cp/.dfdeps
#
# A cold Triton cache makes the first run and the precision swap (0.6.0's CP
# kernels) take minutes each, so the work folder RUN lies in the repository's
# ignored runs/ and is kept between calls on the same warm machine: a second
# call (STEP=narrow) narrows again on warm caches with a fresh budget.
# Environment: OUT (the device tool's), RUN (default runs/narrow here), BUDGET
# (seconds for this call, default 560), STEP (all | narrow), JOBS (2), SEED (777).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
OUT=${OUT:-$here/runs/narrow-out}
RUN=${RUN:-$here/runs/narrow}
BUDGET=${BUDGET:-560}
STEP=${STEP:-all}
JOBS=${JOBS:-2}
SEED=${SEED:-777}
T0=$SECONDS
mkdir -p "$OUT"
LOG=$OUT/logs.txt
say() { echo "[$(( SECONDS - T0 )) s] $*" | tee -a "$LOG"; }
left() { echo $(( BUDGET - (SECONDS - T0) )); }
export PYTHONUNBUFFERED=1
unset TRITON_F32_DEFAULT || true
DF=$RUN/b/build/bin/densefeed
LEDGER=$RUN/ledger.db
cd "$here"
if [ "$STEP" = all ]; then
  rm -rf "$RUN"; mkdir -p "$RUN"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
  say "setup.sh --wheels .whl"
  ./setup.sh --wheels .whl >> "$LOG" 2>&1
  say "building densefeed"
  RUN=$RUN/b ONLY=build BUILD_JOBS=16 bash "$here/device_bench_verdict.sh" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 4; }
  say "densefeed built: $(tail -1 "$OUT/build.log")"
  say "run fla-0.5.2-intracard-cp-session, profile quick, seed $SEED"
  s=$SECONDS
  "$DF" --trust-worktree run experiments/fla-0.5.2-intracard-cp-session.yaml --profile quick --seed "$SEED" --no-bench --no-sandbox \
    --jobs "$JOBS" --ledger "$LEDGER" --json > "$OUT/run.json" 2> "$OUT/run.err" || true
  say "run ended in $(( SECONDS - s )) s"
  python3 - "$OUT/run.json" <<'PY' | tee -a "$LOG"
import json, sys
d = json.load(open(sys.argv[1]))
g = d["stages"]["gate"]
print(f"experiment {d['experiment_id']}: verdict {d['verdict']}, gate wall {g['wall_s']:.1f} s")
for c in g["cases"]:
    m = {f"{o['output']}.{k['metric']}": k["value"] for o in c["outputs"] for k in o.get("metrics", [])}
    print(f"  {c['verdict']:5} {c['case']:40} parts {c.get('parts')} o.rel_l2 {m.get('o.rel_l2', float('nan')):.3e} final_state.rel_l2 {m.get('final_state.rel_l2', float('nan')):.3e}")
for n in d.get("next", [])[:2]:
    print(f"  next [{n['kind']}] {n['suggestion']}\n    why: {n['why']}")
PY
fi
budget=$(( $(left) - 20 ))
say "narrow 1 --budget ${budget}s"
s=$SECONDS
"$DF" --trust-worktree narrow 1 --budget "${budget}s" --no-sandbox --jobs "$JOBS" --ledger "$LEDGER" --json > "$OUT/narrow-$STEP.json" 2> "$OUT/narrow-$STEP.err" || true
say "narrow ended in $(( SECONDS - s )) s"
python3 - "$OUT/narrow-$STEP.json" <<'PY' | tee -a "$LOG"
import json, sys
d = json.load(open(sys.argv[1]))
print(f"layer: {d['layer']}: {d['conclusion']}")
print(f"{d['experiments']} experiment(s), {d['seconds']:.1f} s of a {d['budget_s']:.0f} s budget ({d['stopped']}); reruns {d['reruns']['red']} of {d['reruns']['of']} red")
for s in d["steps"]:
    print(f"  #{s['experiment']} {s['step']}: {s['cases']} case(s), {s['red']} red, {s['seconds']:.1f} s: {s['shows']}")
PY
tail -5 "$OUT/narrow-$STEP.err" | tee -a "$LOG"
