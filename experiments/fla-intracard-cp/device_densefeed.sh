#!/usr/bin/env bash
# On an H200 (the device tool), the gate through densefeed itself: both
# experiments on the `precision` profile, at once, on one GPU. BUNDLE holds an
# installed densefeed (bin/, share/densefeed/) and lib/ with its shared
# libraries; the fla-core wheels are in .whl/ beside this script.
#   experiments/fla-intracard-cp/device_densefeed.sh BUNDLE OUTDIR [PROFILE]
# No git on the copy the device gets, so --trust-worktree; no bubblewrap
# there, and a sandboxed process would recompile every Triton kernel in its
# private /tmp (about 110 s each), so --no-sandbox; TRITON_CACHE_DIR is shared.
set -uo pipefail
bundle=$(realpath "$1"); out=$(realpath "$2"); profile=${3:-precision}
cd "$(dirname "$0")"
export PATH=$bundle/bin:$PATH LD_LIBRARY_PATH=$bundle/lib TRITON_CACHE_DIR=/tmp/triton-fla
./setup.sh --wheels .whl || exit 1
SECONDS=0
for v in ${VERSIONS:-0.5.2 0.6.0}; do
  ( s=$SECONDS
    timeout "${BUDGET:-470}" densefeed --trust-worktree run "experiments/fla-$v-intracard-cp.yaml" --profile "$profile" --no-bench --no-sandbox \
      --jobs "${JOBS:-5}" --seed 20261201 --json > "$out/run-$v.json" 2> "$out/run-$v.err"
    echo "fla $v: exit $? in $((SECONDS - s)) s" ) &
done
wait
echo "both experiments: $SECONDS s wall"
python3 - "$out" <<'PY'
import json, sys
for v in ("0.5.2", "0.6.0"):
    try:
        d = json.load(open(f"{sys.argv[1]}/run-{v}.json"))
    except Exception as e:
        print(v, "no report:", e); continue
    g = d["stages"]["gate"]
    print(f"fla {v}: verdict {d['verdict']}, gate wall {g['wall_s']:.1f} s, harness {g['harness_wall_s']:.1f} s")
    for c in g["cases"]:
        cells = []
        for o in c["outputs"]:
            m = {k["metric"]: k["value"] for k in o.get("metrics", [])}
            cells.append(f"{o['output']} rel_l2 {m.get('rel_l2', float('nan')):.2e} max_abs {m.get('max_abs', float('nan')):.2e}")
        print(f"  {c['verdict']:5} {c['case']:60} {'; '.join(cells) or c['reason'][:120]}")
PY
