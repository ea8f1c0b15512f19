#!/usr/bin/env bash
# On a machine with GPUs (the H200s lent by `device`): shows that a worker
# finds the GPUs, spreads one experiment's gate cases across them (one
# CUDA_VISIBLE_DEVICES per case job) and, with two slots, gives each slot its
# own GPU; and that the sandbox binds the GPU device nodes in.
#   tests/perf/device_worker_gpus.sh BUNDLE OUTDIR
# BUNDLE holds bin/ (densefeed, the kda_decode and affine_chain harnesses,
# bwrap) and lib/ (their shared libraries); see kernels/RESULTS.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=$(realpath "$1"); out=$2
export PATH=$bundle/bin:$PATH LD_LIBRARY_PATH=$bundle/lib
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
# densefeed's own project, its gates as carried here (a copy of the checkout,
# not necessarily a git repository with a main branch); the harnesses are
# found on PATH (bundle/bin).
df=("$bundle/bin/densefeed" --project . --trust-worktree)
work=$(mktemp -d)
mk() {  # name gate candidate-params base-params
  printf 'experiment: %s\nhypothesis: h\npredicted_effect: p\ngate: %s\ncandidate: {revision: WORKTREE, params: %s}\nbase: {revision: WORKTREE, params: %s}\n' \
    "$1" "$2" "$3" "$4" > "$work/$1.yaml"
  echo "$work/$1.yaml"
}
a=$(mk kda-v3-cuda kda-decode "{version: v3, device: cuda}" "{version: v0, device: cuda}")
b=$(mk tf32x3-cuda cp-affine-chain "{precision: tf32x3, device: cuda}" "{precision: tf32, device: cuda}")
c=$(mk tf32-cuda cp-affine-chain "{precision: tf32, device: cuda}" "{precision: ieee, device: cuda}")
echo "== one slot over every GPU: the gate's cases spread across them"
"${df[@]}" submit "$a" --ledger "$work/one.db" --json
"${df[@]}" worker --once --slots 1 --gpus auto --ledger "$work/one.db" 2>&1 | tail -5
"${df[@]}" ledger show 1 --ledger "$work/one.db" --json > "$out/one-slot.json"
echo "== two slots: each experiment on its own GPU"
"${df[@]}" submit "$b" "$c" --ledger "$work/two.db" --json > /dev/null
"${df[@]}" worker --once --slots 2 --gpus auto --ledger "$work/two.db" 2>&1 | tail -5
for id in 1 2; do "${df[@]}" ledger show $id --ledger "$work/two.db" --json > "$out/two-slots-$id.json"; done
python3 - "$out" <<'PY'
import json, sys, collections
out = sys.argv[1]
for name in ["one-slot.json", "two-slots-1.json", "two-slots-2.json"]:
    e = json.load(open(f"{out}/{name}"))
    g = e["gate_run"]
    per_gpu = collections.Counter()
    for c in g["cases"]:
        per_gpu[c["output_capture"].get("candidate", {}).get("gpu", "-")] += 1
    print(f"{name}: {e['name']}: gate {g['verdict']} ({g['reason'] or 'all cases green'}), sandbox {g['sandbox']!r}, "
          f"cases per GPU {dict(per_gpu)}, bench {[(b['case_label'], b['verdict'], round(b['speedup'], 3)) for b in e['bench_cases']]}")
PY
