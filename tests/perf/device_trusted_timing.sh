#!/usr/bin/env bash
# Issue 16 on an H200 (the device tool): the machine's ceilings
# (`densefeed machine calibrate`), the kda-decode experiment (v3 against v0,
# both on the CUDA path) gated on profile quick and benchmarked by the gate's
# trusted CUDA driver (kda_decode_driver: CUDA events, L2 flushed outside
# them), and an A/A calibration of the same driver (v0 against itself).
#   tests/perf/device_trusted_timing.sh BUNDLE OUTDIR [AA_COMPARISONS]
# BUNDLE: tools/device_bundle.sh's. Runs from the repository root; no git on
# the device's copy, so --trust-worktree; the gate's harness_path (build/bin)
# is a copy of BUNDLE/harness. Steps get at most BUDGET seconds in all
# (default 200).
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=$(realpath "$1"); out=$(realpath "$2"); aa=${3:-6}
export PATH=$bundle/bin:$PATH LD_LIBRARY_PATH=$bundle/lib
mkdir -p build && rm -rf build/bin && cp -a "$bundle/harness" build/bin
T0=$SECONDS; DEADLINE=$(( SECONDS + ${BUDGET:-200} ))
left() { local l=$(( DEADLINE - SECONDS )); (( l < 1 )) && l=1; echo $l; }
W=$(mktemp -d)
df() { timeout "$(left)" densefeed --project . --trust-worktree "$@"; }
echo "== machine calibrate (t=$(( SECONDS - T0 )) s)"
df machine calibrate --ledger "$W/l.db" --json > "$out/calibrate.json"; echo "exit $?"
python3 - "$out/calibrate.json" <<'PY'
import json, sys
for m in json.load(open(sys.argv[1])).get("ceilings", []):
    print(f"{m.get('device_name')}: copy {m.get('bytes_per_s', 0) / 1e12:.3f} TB/s, matrix {m.get('flops_per_s', 0) / 1e12:.1f} TFLOP/s ({m.get('tool')})")
PY
printf 'experiment: kda-v3-cuda\nhypothesis: h\npredicted_effect: p\npredicted_speedup: 1.17\ngate: kda-decode\ncandidate: {revision: WORKTREE, params: {version: v3, device: cuda}}\nbase: {revision: WORKTREE, params: {version: v0, device: cuda}}\n' > "$W/kda.yaml"
echo "== kda-decode v3 vs v0 on CUDA, profile quick, trusted driver (t=$(( SECONDS - T0 )) s)"
df run "$W/kda.yaml" --profile quick --ledger "$W/l.db" --seed 20261201 --json > "$out/kda-run.json" 2> "$W/kda.err"; echo "exit $?"; tail -3 "$W/kda.err"
python3 - "$out/kda-run.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"no report: {e}")
print("verdict", d["verdict"], "| gate", d["stages"]["gate"]["verdict"])
for c in d["stages"]["gate"]["cases"]:
    print(f"  {c['verdict']:5} {c['case']:12} {c.get('reason', '')[:200]}")
b = d["stages"].get("bench") or {}
print(json.dumps(b, indent=None)[:3000])
PY
(( aa > 0 )) || { echo "total $(( SECONDS - T0 )) s"; exit 0; }
echo "== A/A: kda-decode v0 on CUDA against itself, $aa comparisons (t=$(( SECONDS - T0 )) s)"
df bench calibrate kda-decode --param version=v0 --param device=cuda --comparisons "$aa" --ledger "$W/l.db" --json > "$out/kda-aa.json" 2> "$W/aa.err"; echo "exit $?"; tail -3 "$W/aa.err"
head -c 2500 "$out/kda-aa.json"; echo
echo "total $(( SECONDS - T0 )) s"
