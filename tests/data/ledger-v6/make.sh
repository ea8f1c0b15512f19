#!/bin/bash
# Makes ledger.db, a version-6 ledger holding a promotion with two bench
# acceptances (candidate_timing, speedup_beyond_bound) and an experiment that
# is not promoted, and ledger.key, its chain key, with the densefeed given
# (one built from a commit before ledger version 7, e.g. c2faf2b):
#   tests/data/ledger-v6/make.sh OLD_DENSEFEED OUT_DIR
# LedgerEndToEnd.AVersion6LedgerWithBenchAcceptancesIsMigratedIntact opens
# the copy committed here.
set -euo pipefail
df=$(realpath "$1"); out=$(realpath "$2")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export XDG_CONFIG_HOME=$work/config HOME=$work/home GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME" "$work/p/gates" && cd "$work/p"
cat > densefeed.yaml <<'Y'
gates: gates
experiments: experiments
ledger: .densefeed/ledger.db
Y
echo .densefeed/ > .gitignore
cat > h.py <<'P'
import argparse, json, os, time
import numpy as np
p = argparse.ArgumentParser(); p.add_argument('--ms', type=float); p.add_argument('--seed', type=int); p.add_argument('--out')
a = p.parse_args()
if os.environ.get('DENSEFEED_MODE', 'gate') == 'bench':
    warm, iters = int(os.environ['DENSEFEED_WARMUP']), int(os.environ['DENSEFEED_ITERS'])
    samples = []
    for k in range(warm + iters):
        t = time.perf_counter(); time.sleep(a.ms / 1e3)
        if k >= warm: samples.append((time.perf_counter() - t) * 1e3)
    json.dump({'unit': 'ms', 'samples': samples}, open(os.path.join(a.out, 'samples.json'), 'w'))
np.save(os.path.join(a.out, 'y.npy'), 2 * np.random.default_rng(a.seed).standard_normal(100))
P
cat > gates/self.yaml <<'G'
gate: self
description: y = 2 x
reference:
  command: [python3, "{project}/h.py", --ms, "1", --seed, "{seed}", --out, "{out}"]
candidate:
  command: [python3, "{project}/h.py", --ms, "{param.ms}", --seed, "{seed}", --out, "{out}"]
params:
  ms: {type: number, default: 10}
outputs:
  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}
cases:
  grid:
    - {n: [100]}
profiles: {quick: {}, full: {}}
timeout_s: 60
bench:
  warmup: 1
  iters: 4
  max_speedup: 2
  max_seconds_per_case: 60
  cases: [{n: 100}]
freezes: [h.py]
G
: > gates/gates.lock
git init -q -b main . && git config user.email t@e && git config user.name t
git add -A && git commit -qm gates
"$df" gate lock >/dev/null && git add -A && git commit -qm lock
manifest() {  # name candidate-ms
  cat > "$work/$1.yaml" <<M
experiment: $1
hypothesis: h
predicted_effect: p
gate: self
candidate: {revision: WORKTREE, params: {ms: $2}}
base: {revision: WORKTREE, params: {ms: 20}}
acceptance:
  command: [python3, -c, "import json, os; json.dump(dict(t=1), open(os.environ['DENSEFEED_OUT'] + '/metrics.json', 'w'))"]
  criteria: ["t <= 2"]
M
}
manifest promoted 2; manifest kept 10
"$df" run "$work/promoted.yaml" --json > "$work/promoted.json" || true
"$df" run "$work/kept.yaml" --json > "$work/kept.json" || true
"$df" promote 1 --by carol --accept-candidate-timing --accept-speedup-beyond-bound
test "$(sqlite3 .densefeed/ledger.db 'SELECT MAX(version) FROM schema_info')" = 6
test "$(sqlite3 .densefeed/ledger.db 'SELECT group_concat(concern) FROM bench_acceptances')" = "candidate_timing,speedup_beyond_bound"
"$df" ledger verify
mkdir -p "$out"
sqlite3 .densefeed/ledger.db ".backup '$out/ledger.db'"
cp "$XDG_CONFIG_HOME"/densefeed/keys/*.key "$out/ledger.key"
"$df" ledger head > "$out/head.txt"
echo "wrote $out/ledger.db, ledger.key, head.txt"
