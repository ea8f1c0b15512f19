#!/usr/bin/env bash
# Issue 29 ("Benchmarks that conclude", part "Measured, not asserted") on an
# H200 (the device tool): fla-core 0.6.0 (candidate) against 0.5.2 (base)
# through densefeed's bench, timed by the gates' frozen driver
# (harness/bench_driver.py), on the bench case T = 131072, H = 16; and, as
# what its verdict is checked against, the in-process ratio of the same two
# kernels (inprocess_bench.py: one Python process per version, CUDA events).
# Run from the repository root, carrying the fla-core wheels and densefeed's
# build dependencies (the device image has a compiler, CMake and ninja, but
# neither fla-core nor yaml-cpp, fmt, SQLite, Boost...):
#
#   bash experiments/fla-intracard-cp/device_bench_verdict.sh
#   carry: experiments/fla-intracard-cp/.whl     (pip download, README "Set up")
#          experiments/fla-intracard-cp/.dfdeps  (pack_build_deps.sh, on a Debian machine)
#
# Steps, everything under RUN and the figures under OUT:
#   1. fla-core 0.5.2 and 0.6.0 into .fla-sites (setup.sh --wheels .whl);
#   2. densefeed built from the working tree (Release, target densefeed only,
#      BUILD_JOBS jobs, CUDA off: the target needs none), in the background,
#      while
#   3. Triton compiles and fla autotunes every kernel the run needs, into one
#      TRITON_CACHE_DIR (RUN/triton), in processes started at once: the bench
#      case with CP on for each version (the driver's call), with CP off for
#      0.6.0 (the reference's), and the profile's gate cases for both paths;
#   4. once all are warm and the build has ended (nothing else loads the
#      machine), the two bench-case processes time ITERS calls each, one
#      after the other: the in-process ratio base / candidate;
#   5. densefeed's compile caches (RUN/ledger-caches: the reference's, both
#      arms' and both arms' drivers') start as copies of RUN/triton, unless
#      COLD=1: the warm-up call of each arm then compiles (minutes each);
#   6. densefeed --trust-worktree run experiments/fla-0.6.0-intracard-cp-session.yaml
#      --profile PROFILE (the gate stage, then the driven bench), a ledger of
#      its own in RUN;
#   7. the summary: densefeed's verdict line, rounds, interval, warm-up
#      times, the bench's and the whole run's wall time, the in-process
#      ratio, and the issue's three checks (slower; the interval holds the
#      in-process ratio; within 300 s of measurement after warm-up).
#
# Environment: ONLY (build: step 2 alone, in the foreground), OUT (the device tool's; default runs/bench-verdict here), RUN
# (work folder, emptied first; default /tmp/fla-bench-verdict), BUDGET (seconds
# for all steps, default 570; the device tool stops a command at 600), BUILD_JOBS
# (16), JOBS (densefeed --jobs, 2), PROFILE (quick), SEED (densefeed --seed,
# 20261207), ITERS (in-process timed calls per version, 30), DENSEFEED (an
# executable to use instead of building one), COLD (1: step 5 skipped),
# BENCH_SECONDS (run --bench-seconds: the measurement budget in place of the
# gate's 300 s; unset: the gate's), SANDBOX (1: densefeed's sandbox on; default off, --no-sandbox, as the
# device has no bubblewrap unless one is carried).
# Exit status: 0 every step ran and the three checks hold; 1 a check does
# not hold (the summary says which); 2 no GPU, wheels or tools; 3 fla-core's
# setup failed; 4 densefeed did not build or start;
# 5 densefeed gave a verdict but the in-process timing no ratio; 6 densefeed
# gave no bench verdict (its report and stderr are in OUT).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
OUT=${OUT:-$here/runs/bench-verdict}
RUN=${RUN:-/tmp/fla-bench-verdict}
BUDGET=${BUDGET:-570}
BUILD_JOBS=${BUILD_JOBS:-16}
JOBS=${JOBS:-2}
PROFILE=${PROFILE:-quick}
SEED=${SEED:-20261207}
ITERS=${ITERS:-30}
COLD=${COLD:-0}
SANDBOX=${SANDBOX:-0}
DEPS_TAR=${DEPS_TAR:-$here/.dfdeps/deps.tar.gz}
INPROCESS_BENCH=${INPROCESS_BENCH:-$here/inprocess_bench.py}   # a stand-in for dry runs of this script
BENCH_CASE='{"T": 131072, "H": 16}'         # the gates' bench case (gates/*.yaml, bench.cases)
MANIFEST=experiments/fla-0.6.0-intracard-cp-session.yaml   # candidate 0.6.0, base 0.5.2, the session gate
BENCH_BUDGET_S=300                          # the gates' bench.max_seconds_per_case: the issue's bound
T0=$SECONDS
DEADLINE=$(( T0 + BUDGET ))
mkdir -p "$OUT"
LOG=$OUT/logs.txt
: > "$LOG"
left() { local l=$(( DEADLINE - SECONDS )); (( l > 1 )) || l=1; echo "$l"; }
say() { echo "[$(( SECONDS - T0 )) s] $*" | tee -a "$LOG"; }
fail() { local code=$1; shift; say "FAILED ($code): $*"; exit "$code"; }

# densefeed from the working tree (step 2); ONLY=build: this alone, in the foreground.
build_densefeed() {
  local d args=(-S "$repo" -B "$RUN/build" -DCMAKE_BUILD_TYPE=Release -DDENSEFEED_CUDA=OFF -DBUILD_TESTING=OFF)
  command -v ninja > /dev/null && args+=(-G Ninja)
  if [ -f "$DEPS_TAR" ]; then
    mkdir -p "$RUN/deps" && tar -xzf "$DEPS_TAR" -C "$RUN/deps" || return 1
    d=$RUN/deps/usr
    # The packages' CMake files find themselves under d; OpenSSL's
    # configuration header sits in the multiarch folder, which no imported
    # target names; -include cstdint for a newer GCC than the packages'
    # (GCC 13 no longer includes it through other headers).
    args+=(-DCMAKE_PREFIX_PATH="$d" "-DCMAKE_CXX_FLAGS=-isystem $d/include/x86_64-linux-gnu -include cstdint" -DOPENSSL_ROOT_DIR="$d"
           -DZLIB_ROOT="$d" -DSQLite3_INCLUDE_DIR="$d/include" -DSQLite3_LIBRARY="$d/lib/x86_64-linux-gnu/libsqlite3.so"
           -DVALIJSON_INCLUDE_DIR="$d/include")
  else
    echo "no $DEPS_TAR: building against the machine's own packages"
  fi
  # Called in a list (|| below), where set -e does not hold: every step's status is checked.
  local t=$SECONDS
  cmake "${args[@]}" || return 1
  cmake --build "$RUN/build" -j "$BUILD_JOBS" --target densefeed || return 1
  echo "densefeed built in $(( SECONDS - t )) s"
}
if [ "${ONLY:-}" = build ]; then
  rm -rf "$RUN"; mkdir -p "$RUN"; build_densefeed; exit
fi
say "device_bench_verdict: repo $repo, run folder $RUN, out $OUT, budget $BUDGET s"
rm -rf "$RUN"
mkdir -p "$RUN/barrier"
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$RUN/triton
unset TRITON_F32_DEFAULT || true

# -- 0. the machine ------------------------------------------------------------------------
command -v nvidia-smi > /dev/null || fail 2 "no nvidia-smi: this needs a CUDA GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee -a "$LOG"
python3 -c 'import sys, torch, triton, numpy; print("python", sys.version.split()[0], sys.executable, "| torch", torch.__version__, "| triton", triton.__version__, "| numpy", numpy.__version__, "| cuda", torch.cuda.is_available())' 2>&1 | tee -a "$LOG"
python3 -c 'import torch; assert torch.cuda.is_available()' || fail 2 "torch sees no CUDA device"
echo "cpus $(nproc), cmake $(cmake --version 2> /dev/null | head -1), c++ $(c++ --version 2> /dev/null | head -1), ninja $(ninja --version 2> /dev/null || echo none)" | tee -a "$LOG"
df -h "$(dirname "$RUN")" | tail -1 | tee -a "$LOG"

# -- 1. fla-core 0.5.2 and 0.6.0 -----------------------------------------------------------
[ -d "$here/.whl" ] || fail 2 "no $here/.whl: carry experiments/fla-intracard-cp/.whl (the fla-core wheels, README 'Set up')"
say "setup.sh --wheels .whl"
"$here/setup.sh" --wheels "$here/.whl" >> "$LOG" 2>&1 || fail 3 "setup.sh failed (logs.txt)"

# -- 2. densefeed, built in the background -------------------------------------------------
if [ -n "${DENSEFEED:-}" ]; then
  say "densefeed: $DENSEFEED (given, not built)"
  echo 0 > "$RUN/build.rc"
  build_pid=
else
  say "building densefeed in the background ($BUILD_JOBS jobs; RUN/build.log)"
  ( rc=0; build_densefeed > "$RUN/build.log" 2>&1 || rc=$?; echo "$rc" > "$RUN/build.rc" ) &
  build_pid=$!
  DENSEFEED=$RUN/build/bin/densefeed
fi

# -- 3. Triton's cache, all at once; 4. the in-process timing ------------------------------
# Step 3, warm-only processes (label|fla|cp|its case|a case it calls once
# first), all at once, beside the build: each compiles and autotunes into
# RUN/triton. fla's autotuning keys leave out H and T for some kernels, and
# concurrent processes each tune and write their own winner, so what a
# process picked while tuning may not be what the cache ends up holding.
# Step 4 therefore times in fresh processes, started once step 3 has ended,
# that read every kernel and autotuning result from the cache, as densefeed's
# processes (on copies of it) do: the same kernels. They time once both are
# warm (RUN/barrier/ready-*) and RUN/barrier/go exists (set once the build
# has ended: nothing else loads the machine), one after the other.
warm=("base-bench|0.5.2|on|$BENCH_CASE|"
      "candidate-bench|0.6.0|on|$BENCH_CASE|"
      "reference-bench|0.6.0|off|$BENCH_CASE|")
if [ "$PROFILE" = quick ]; then
  # Profile quick's cases (gates/*.yaml): H = 4, T = 8192 (not cut) and 24576 (cut into 3).
  warm+=('candidate-quick|0.6.0|on|{"T": 24576}|{"T": 8192}'
         'reference-quick|0.6.0|off|{"T": 24576}|{"T": 8192}')
else
  say "profile $PROFILE: its gate cases are not warmed here (the gate stage compiles them)"
fi
declare -A pid_of
inproc_rc=0
wait_label() {
  if ! wait "${pid_of[$1]}"; then
    inproc_rc=1
    say "in-process $1 failed: $(tail -n 3 "$RUN/inprocess-$1.err" | tr '\n' ' ')"
  fi
}
t_warm=$SECONDS
for spec in "${warm[@]}"; do
  IFS='|' read -r label fla cp case first <<< "$spec"
  extra=()
  [ -n "$first" ] && extra=(--warm "$first")
  timeout "$(left)" python3 "$INPROCESS_BENCH" --fla "$fla" --intracard-cp "$cp" --case "$case" "${extra[@]}" \
    --iters 0 --warmup 1 --label "warm-$label" > "$RUN/inprocess-warm-$label.json" 2> "$RUN/inprocess-warm-$label.err" &
  pid_of[warm-$label]=$!
done
say "step 3: warming Triton's cache, ${#warm[@]} processes at once (${!pid_of[*]})"
for label in "${!pid_of[@]}"; do wait_label "$label"; done
warm_s=$(( SECONDS - t_warm ))
say "step 3 done in $warm_s s: RUN/triton $(du -sh "$RUN/triton" 2> /dev/null | cut -f1)"
for v in 0.5.2 0.6.0; do
  label=$([ $v = 0.5.2 ] && echo base || echo candidate)-$v
  timeout "$(left)" python3 "$INPROCESS_BENCH" --fla "$v" --intracard-cp on --case "$BENCH_CASE" --iters "$ITERS" \
    --warmup 3 --barrier "$RUN/barrier" --parties 2 --label "$label" --wait-s "$(left)" \
    > "$RUN/inprocess-$label.json" 2> "$RUN/inprocess-$label.err" &
  pid_of[$label]=$!
done
build_rc=0
if [ -n "$build_pid" ]; then
  wait "$build_pid" || true
  build_rc=$(cat "$RUN/build.rc" 2> /dev/null || echo 1)
  tail -n 3 "$RUN/build.log" | tee -a "$LOG"
  say "build ended: exit $build_rc"
fi
touch "$RUN/barrier/go"
for label in base-0.5.2 candidate-0.6.0; do wait_label "$label"; done
say "step 4: in-process timing done"
cat "$RUN"/inprocess-*.json > "$OUT/inprocess.jsonl" 2> /dev/null || true
for f in "$RUN"/inprocess-*.err; do echo "--- $(basename "$f")"; cat "$f"; done >> "$LOG"
python3 - "$OUT/inprocess.jsonl" <<'PY' | tee -a "$LOG" || true
import json, sys
rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line:
        d = json.loads(line)
        rows[d["label"]] = d
for label, d in sorted(rows.items()):
    warm = " ".join(f"{k} {v:.1f}s" for k, v in d.get("warm_s", {}).items())
    med = (f"median {d['median_ms']:.3f} ms [p10 {d['p10_ms']:.3f}, p90 {d['p90_ms']:.3f}], host {d['host_median_ms']:.3f} ms"
           if "median_ms" in d else "warm only")
    print(f"in-process {label}: fla {d['fla']} cp {'on' if d['intracard_cp'] else 'off'}: import {d['import_s']:.1f}s, "
          f"first call {d.get('first_call_s')}s, {warm}; {med}")
PY
(( inproc_rc == 0 )) || say "WARNING: an in-process process failed (logs.txt); densefeed runs all the same"
if [ "$build_rc" != 0 ]; then
  tail -n 40 "$RUN/build.log" >> "$LOG"
  cp "$RUN/build.log" "$OUT/build.log" 2> /dev/null || true
  fail 4 "densefeed did not build (exit $build_rc): build.log"
fi
missing=$(ldd "$DENSEFEED" 2> /dev/null | grep "not found" || true)
[ -z "$missing" ] || fail 4 "densefeed's libraries are not found: $missing"
"$DENSEFEED" --version 2>&1 | tee -a "$LOG" || fail 4 "$DENSEFEED does not start (logs.txt)"

# -- 5. densefeed's compile caches ---------------------------------------------------------
# One ledger of this run's own (RUN/ledger.db): its experiment is 1, so its
# arms' caches are worktree-1-* (arm_context.h); with --trust-worktree the
# reference's is trusted-worktree. Hard links: Triton replaces a cache file,
# never writes into one.
caches=$RUN/ledger-caches
if [ "$COLD" = 1 ]; then
  say "COLD=1: densefeed's caches start empty (each arm's warm-up call compiles)"
else
  for c in trusted-worktree worktree-1-candidate worktree-1-base worktree-1-candidate-driver worktree-1-base-driver; do
    mkdir -p "$caches/$c"
    cp -al "$RUN/triton" "$caches/$c/triton" 2> /dev/null || cp -a "$RUN/triton" "$caches/$c/triton"
  done
  say "densefeed's caches seeded from RUN/triton ($(du -sh "$RUN/triton" | cut -f1)): $(ls "$caches" | tr '\n' ' ')"
fi

# -- 6. the run ----------------------------------------------------------------------------
bench_seconds=()
[ -n "${BENCH_SECONDS:-}" ] && bench_seconds=(--bench-seconds "$BENCH_SECONDS")
sandbox=(--no-sandbox)
[ "$SANDBOX" = 1 ] && sandbox=()
budget=$(( $(left) - 75 ))
(( budget > 60 )) || fail 6 "only $budget s left for densefeed's run"
say "densefeed run $MANIFEST --profile $PROFILE ${sandbox[*]} --jobs $JOBS --seed $SEED (at most $budget s)"
t_run=$SECONDS
run_rc=0
( cd "$here" && timeout -k 60 "$budget" "$DENSEFEED" --trust-worktree run "$MANIFEST" --profile "$PROFILE" "${sandbox[@]}" \
    --jobs "$JOBS" --seed "$SEED" --ledger "$RUN/ledger.db" "${bench_seconds[@]}" --json ) > "$OUT/run.json" 2> >(tee "$OUT/run.err" >&2) || run_rc=$?
run_s=$(( SECONDS - t_run ))
# What the run saw, round by round (densefeed's progress events), and any
# harness or driver left behind by a run the timeout stopped.
find "$RUN/ledger-runs" -name progress.jsonl -exec cp {} "$OUT/progress.jsonl" \; 2> /dev/null || true
pgrep -af "densefeed|bench_driver|kda" >> "$LOG" || true
say "densefeed run: exit $run_rc in $run_s s"
( cd "$here" && timeout 30 "$DENSEFEED" --trust-worktree ledger show 1 --ledger "$RUN/ledger.db" ) >> "$LOG" 2>&1 || true
du -sh "$caches"/* 2> /dev/null | tee -a "$LOG" || true

# -- 7. the summary ------------------------------------------------------------------------
set +e
python3 - "$OUT" "$run_rc" "$run_s" "$(( SECONDS - T0 ))" "$BENCH_BUDGET_S" <<'PY' | tee "$OUT/summary.txt"
import json, math, sys
out, run_rc, run_s, total_s, bench_budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
summary = {"densefeed_exit": run_rc, "densefeed_wall_s": run_s, "total_wall_s": total_s}
inproc = {}
for line in open(f"{out}/inprocess.jsonl"):
    if line.strip():
        d = json.loads(line)
        inproc[d["label"]] = d
base, cand = inproc.get("base-0.5.2", {}), inproc.get("candidate-0.6.0", {})
ratio = host_ratio = None
if "median_ms" in base and "median_ms" in cand:
    ratio = base["median_ms"] / cand["median_ms"]
    host_ratio = base["host_median_ms"] / cand["host_median_ms"]
    print(f"in-process (CUDA events, {cand['iters']} calls each): base 0.5.2 {base['median_ms']:.3f} ms, candidate 0.6.0 "
          f"{cand['median_ms']:.3f} ms: ratio base/candidate {ratio:.4f}  (host clock: {base['host_median_ms']:.3f} / "
          f"{cand['host_median_ms']:.3f} ms = {host_ratio:.4f})")
summary["inprocess"] = {"base_ms": base.get("median_ms"), "candidate_ms": cand.get("median_ms"), "ratio": ratio,
                        "host_base_ms": base.get("host_median_ms"), "host_candidate_ms": cand.get("host_median_ms"),
                        "host_ratio": host_ratio}
try:
    doc = json.load(open(f"{out}/run.json"))
except Exception as e:
    print(f"densefeed: no report ({e}); its stderr: run.err")
    json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
    sys.exit(6)
stages = doc.get("stages", {})
gate, bench = stages.get("gate") or {}, stages.get("bench") or {}
print(f"densefeed: experiment {doc.get('experiment_id')} verdict {doc.get('verdict')}; gate {gate.get('verdict')} "
      f"({len(gate.get('cases', []))} cases, wall {gate.get('wall_s')} s); bench {bench.get('status') or bench.get('verdict')}"
      f"{': ' + bench.get('reason', '') if bench.get('reason') else ''}")
summary.update({"verdict": doc.get("verdict"), "gate": gate.get("verdict"), "bench_status": bench.get("status"),
                "bench_reason": bench.get("reason"), "bench_wall_s": bench.get("wall_s")})
cases = bench.get("cases") or []
if not cases:
    for c in gate.get("cases", []):
        if c.get("verdict") != "green":
            print(f"  gate {c.get('verdict')} {c.get('case')}: {str(c.get('reason'))[:300]}")
    json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
    sys.exit(6)
c = cases[0]
checks = c.get("timing_checks") or {}
lo, hi = (c.get("speedup_ci") or [None, None])[:2]
print(f"bench case {c['case']}: {c['verdict']} (timed by: {c.get('timing')}); speedup {c.get('speedup')} "
      f"[{lo}, {hi}] at {c.get('ci_confidence')}, {c.get('rounds')} rounds, p {c.get('p_value')}")
print(f"  verdict line: {c.get('reason')}")
print(f"  medians: base {c.get('base_median')} ms, candidate {c.get('candidate_median')} ms; capped {c.get('capped')}")
print(f"  timing checks reported: {', '.join(checks) or 'none'}")
warm = {k: v for k, v in checks.items() if "warm" in k.lower()}
# The measurement (timed rounds, warm-ups apart): timing_checks.budget.timed_s.
budget_check = checks.get("budget") if isinstance(checks.get("budget"), dict) else {}
measured = budget_check.get("timed_s") if isinstance(budget_check.get("timed_s"), (int, float)) else None
if budget_check:
    print(f"  budget: {json.dumps(budget_check)[:400]}")
wu = checks.get("warmup") if isinstance(checks.get("warmup"), dict) else {}
print(f"  warm-up calls: base {wu.get('base_s')} s, candidate {wu.get('candidate_s')} s" if wu else
      f"  warm-up: {json.dumps(warm)[:600] if warm else 'not in the report'}")
print(f"  measurement (timed rounds): {measured} s of the {budget_check.get('budget_s', bench_budget)} s budget")
for k in ("wall_fit", "inputs", "outside_clock", "late_rounds"):
    if k in checks:
        print(f"  {k}: {json.dumps(checks[k])[:400]}")
for f in c.get("timing_flags") or []:
    print(f"  flag: {json.dumps(f)[:300]}")
print(f"densefeed wall {run_s} s (gate stage, warm-ups, rounds, reference runs); bench stage wall {bench.get('wall_s')} s; "
      f"this script {total_s} s")
if ratio is None:
    print("checks: the in-process timing gave no ratio (logs.txt): the interval cannot be checked")
ok_slower = c["verdict"] == "slower"
ok_interval = ratio is not None and all(isinstance(v, (int, float)) for v in (lo, hi)) and lo <= ratio <= hi
ok_time = measured is not None and measured <= bench_budget and not c.get("capped")
if measured is None:
    ok_time = not c.get("capped") and c["verdict"] in ("slower", "faster", "same")
    why_time = "the report names no measurement time; not capped by the 300 s budget" if ok_time else "capped or undecided"
else:
    why_time = f"{measured:.1f} s of measurement"
print("checks:")
print(f"  {'PASS' if ok_slower else 'FAIL'} verdict slower ({c['verdict']})")
print(f"  {'PASS' if ok_interval else 'FAIL'} interval [{lo}, {hi}] contains the in-process ratio {ratio}")
print(f"  {'PASS' if ok_time else 'FAIL'} within {bench_budget:.0f} s of measurement after warm-up ({why_time})")
summary.update({"case": c["case"], "bench_verdict": c["verdict"], "speedup": c.get("speedup"), "speedup_ci": [lo, hi],
                "ci_confidence": c.get("ci_confidence"), "rounds": c.get("rounds"), "reason": c.get("reason"),
                "base_median_ms": c.get("base_median"), "candidate_median_ms": c.get("candidate_median"), "warmup": warm,
                "measured_s": measured, "capped": c.get("capped"),
                "checks": {"slower": ok_slower, "interval_contains_inprocess_ratio": ok_interval, "within_budget": ok_time}})
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
sys.exit(5 if ratio is None else 0 if ok_slower and ok_interval and ok_time else 1)
PY
rc=${PIPESTATUS[0]}
set -e
say "done in $(( SECONDS - T0 )) s: exit $rc (summary.txt, summary.json, run.json, run.err, progress.jsonl, inprocess.jsonl, logs.txt)"
exit "$rc"
