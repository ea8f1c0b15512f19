#!/usr/bin/env bash
# Issue 17, benchmark 2, on an H200 (the device tool): the fla-intracard-cp
# gate through densefeed with harness sessions and the sandbox on, on a cold
# and then a warm compile cache, against the in-process floor
# (inprocess_floor.py: one Python process looping over the same cases).
#   experiments/fla-intracard-cp/device_sessions.sh BUNDLE OUTDIR
# BUNDLE: tools/device_bundle.sh's (densefeed, bwrap, their libraries); the
# fla-core wheels in .whl/ beside this script. No git on the device's copy:
# --trust-worktree. Environment: JOBS (default 1: one session per arm, the
# fair match for the floor's one process), PROFILE (default quick; the cold
# run of a profile pays Triton's compile and fla's autotuning per shape, on
# the H200 minutes for precision's 11), VERSIONS (default 0.6.0: the first
# is timed cold and warm, the others after it), BUDGET (seconds for all
# steps, default 540), COLD_JOBS (jobs of the cold run, default JOBS),
# FLOOR_COLD (1: also time the floor on an empty Triton cache; default 0:
# the floor runs once, warm, on a copy of what the gate's two revisions
# compiled, so both start from the same compiled kernels and autotuning
# results), REPEAT (default 1: how many times the warm gate and the warm
# floor are timed, in turn). Every 30 s it prints each session's last
# stderr line.
set -uo pipefail
bundle=$(realpath "$1"); out=$(realpath "$2")
cd "$(dirname "$0")"
export PATH=$bundle/bin:$PATH LD_LIBRARY_PATH=$bundle/lib PYTHONUNBUFFERED=1
profile=${PROFILE:-quick}; jobs=${JOBS:-1}; versions=(${VERSIONS:-0.6.0})
T0=$SECONDS; DEADLINE=$(( SECONDS + ${BUDGET:-540} ))
left() { local l=$(( DEADLINE - SECONDS )); (( l < 1 )) && l=1; echo $l; }
step() { echo; echo "=== $1 (t=$(( SECONDS - T0 )) s)"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -c "import sys, torch, triton; print(sys.executable, sys.prefix, torch.__version__, torch.__file__, triton.__version__)"
bwrap --ro-bind /usr /usr --symlink usr/lib64 /lib64 --symlink usr/lib /lib --symlink usr/bin /bin --proc /proc --dev /dev \
  --unshare-pid --unshare-net -- /usr/bin/true && echo "bwrap: starts a sandbox here" || echo "bwrap: cannot start a sandbox here"
./setup.sh --wheels .whl > "$out/setup.log" 2>&1 || { echo "setup.sh failed"; tail -5 "$out/setup.log"; exit 1; }

# Every densefeed run below: the project's own workspace (.densefeed), so
# each revision's compile cache (.densefeed/.../caches) persists from the
# cold run to the warm one; nothing is shared with the floor's cache.
rm -rf .densefeed /tmp/floor-triton
( while sleep 30; do
    echo "--- t=$(( SECONDS - T0 )) s: $(ps -eo etimes=,rss=,args= | awk '/harness\/(reference|candidate)\.py|inprocess_floor/ && !/awk/ {printf "[%ss %.1fGiB %s] ", $1, $2/1048576, $4}')"
    for f in .densefeed/ledger-runs/*/session-*/stderr.log; do [ -s "$f" ] && echo "    $f: $(tail -c 300 "$f" | tail -1 | cut -c1-200)"; done
  done ) &
monitor=$!
run_gate() {  # label version [jobs]
  local s=$SECONDS
  timeout "$(left)" densefeed --trust-worktree run "experiments/fla-$2-intracard-cp-session.yaml" --profile "$profile" \
    --no-bench --jobs "${3:-$jobs}" --seed 20261201 --json > "$out/$1.json" 2> "$out/$1.err"
  echo "$1: fla $2, exit $? in $(( SECONDS - s )) s"
}
floor() {  # label version
  local s=$SECONDS
  TRITON_CACHE_DIR=/tmp/floor-triton timeout "$(left)" python3 inprocess_floor.py --fla "$2" --profile "$profile" \
    > "$out/$1.jsonl" 2> "$out/$1.err"
  echo "$1: exit $? in $(( SECONDS - s )) s; $(tail -1 "$out/$1.jsonl")"
}

step "densefeed, sessions, sandbox on, cold cache: fla ${versions[0]}, ${COLD_JOBS:-$jobs} job(s)"
run_gate gate-cold "${versions[0]}" "${COLD_JOBS:-$jobs}"
if [ "${FLOOR_COLD:-0}" = 1 ]; then
  step "in-process floor, cold Triton cache: fla ${versions[0]}"
  floor floor-cold "${versions[0]}"
else
  mkdir -p /tmp/floor-triton
  for c in .densefeed/ledger-caches/*/triton; do cp -r "$c/." /tmp/floor-triton/; done
fi
# Warm gate and warm floor in turn, REPEAT times, so that both see the same
# state of the machine.
for i in $(seq "${REPEAT:-1}"); do
  step "densefeed, sessions, sandbox on, warm cache: fla ${versions[0]} ($i of ${REPEAT:-1})"
  run_gate "gate-warm-$i" "${versions[0]}"
  step "in-process floor, warm Triton cache: fla ${versions[0]} ($i of ${REPEAT:-1})"
  floor "floor-warm-$i" "${versions[0]}"
done
for v in "${versions[@]:1}"; do
  step "densefeed, sessions, sandbox on: fla $v (its first run: the cache holds 0.6.0's reference kernels only)"
  run_gate "gate-$v" "$v"
done
kill $monitor 2> /dev/null
du -sh .densefeed/ledger-caches/* 2> /dev/null | head

step "summary"
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
for path in sorted(glob.glob(f"{out}/gate-*.json")):
    label = os.path.basename(path)[:-5]
    try:
        d = json.load(open(path))
    except Exception as e:
        print(label, "no report:", e, open(path[:-5] + ".err").read()[-600:]); continue
    g = d["stages"]["gate"]
    print(f"{label}: verdict {d['verdict']}, gate wall {g.get('wall_s') or 0:.1f} s, harness {g.get('harness_wall_s') or 0:.1f} s, "
          f"sandbox {d['sandbox']['text']}, caches {[(c['arm'], round(c['bytes'] / 2**20, 1)) for c in d.get('caches', [])]} MiB")
    for c in g["cases"]:
        cells = []
        for o in c["outputs"]:
            m = {k["metric"]: k["value"] for k in o.get("metrics", [])}
            cells.append(f"{o['output']} rel_l2 {m.get('rel_l2', float('nan')):.2e}")
        rs, cs = c.get("reference_session") or {}, c.get("candidate_session") or {}
        sess = (f"ref s{rs.get('session')}r{rs.get('request')} {rs.get('wall_s', 0):.2f} s {rs.get('rss_bytes', 0) / 2**30:.2f} GiB | "
                f"cand s{cs.get('session')}r{cs.get('request')} {cs.get('wall_s', 0):.2f} s {cs.get('rss_bytes', 0) / 2**30:.2f} GiB")
        print(f"  {c['verdict']:5} {c['case']:42} {sess} | {'; '.join(cells) or c.get('reason', '')[:160]}")
PY
for f in "$out"/floor-*.jsonl; do [ -s "$f" ] && echo "$(basename "$f" .jsonl): $(tail -1 "$f")"; done
echo "total: $(( SECONDS - T0 )) s"
