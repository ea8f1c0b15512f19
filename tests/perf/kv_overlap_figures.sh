#!/usr/bin/env bash
# Figures of the KV-transfer case (issue 5): the kv_overlap harness, hold
# against release, at its defaults (20 steps of 1 ms, 16 chunks of 0.4 ms).
# Prints, per variant:
#   - acceptance: RUNS invocations of DENSEFEED_MODE=acceptance (--reps REPS
#     each); per invocation the medians of prefill_ms and prefill_kv_ms and
#     their ratio, the median of the per-round ratios (a round runs prefill
#     then prefill_kv back to back, so slow drifts of the load cancel) and the
#     ratio of the minima (the runs load disturbed least),
#     then the median ratio, and the rule written in
#     experiments/kv-transfer-release-lock.yaml: median(prefill_kv) <= 1.05 *
#     median(prefill);
#   - trace: one DENSEFEED_MODE=trace run: where the kv_submit intervals fell
#     (inside a dispatch_wait, at a lock_handoff between steps, after the
#     prefill window), the overlap |U(kv_submit) ∩ U(dispatch_wait)| /
#     |U(kv_submit)|, and when the last chunk's copy ended after the window.
# Nothing is asserted: wall times depend on the machine and its load (printed).
#   tests/perf/kv_overlap_figures.sh [BIN_DIR] [RUNS] [REPS]
# BIN_DIR holds kv_overlap (default build/bin). Needs python3 (stdlib only).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build/bin}
runs=${2:-5}
reps=${3:-9}
exe="$bin/kv_overlap"
[[ -x "$exe" ]] || { echo "no $exe: build the kv_overlap target first" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "machine: $(uname -srm), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "harness: $exe --variant V (defaults), acceptance x $runs invocations of --reps $reps, one trace"
for variant in hold release; do
  for run in $(seq 1 "$runs"); do
    DENSEFEED_MODE=acceptance "$exe" --variant "$variant" --reps "$reps" --out "$work/$variant/acceptance-$run"
  done
  DENSEFEED_MODE=trace "$exe" --variant "$variant" --out "$work/$variant/trace"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$work" "$runs" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])

def union(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out

def length(u):
    return sum(b - a for a, b in u)

def intersect(u, v):
    i = j = 0
    total = 0
    while i < len(u) and j < len(v):
        a, b = max(u[i][0], v[j][0]), min(u[i][1], v[j][1])
        if a < b:
            total += b - a
        if u[i][1] < v[j][1]:
            i += 1
        else:
            j += 1
    return total

print()
print(f"{'variant':8} {'run':>3} {'prefill ms':>11} {'prefill_kv ms':>14} {'ratio':>7} {'loop in kv ms':>14} {'paired':>7} {'min ratio':>10}")
summary = {}
for variant in ("hold", "release"):
    ratios, pairs, mins = [], [], []
    for run in range(1, runs + 1):
        m = json.load(open(f"{work}/{variant}/acceptance-{run}/metrics.json"))
        p = statistics.median(m["prefill_ms"])
        kv = statistics.median(m["prefill_kv_ms"])
        loop = statistics.median(m["prefill_kv_loop_ms"])
        ratios.append(kv / p)
        min_ratio = min(m["prefill_kv_ms"]) / min(m["prefill_ms"])
        mins.append(min_ratio)
        paired = statistics.median(b / a for a, b in zip(m["prefill_ms"], m["prefill_kv_ms"]))
        pairs.append(paired)
        print(f"{variant:8} {run:>3} {p:>11.2f} {kv:>14.2f} {kv / p:>7.3f} {loop:>14.2f} {paired:>7.3f} {min_ratio:>10.3f}")
    summary[variant] = (ratios, pairs, mins)
print()
for variant, (ratios, pairs, mins) in summary.items():
    med = statistics.median(ratios)
    rule = "passes" if med <= 1.05 else "fails"
    print(f"{variant:8} median ratio prefill_kv / prefill = {med:.3f} (min {min(ratios):.3f}, max {max(ratios):.3f} "
          f"over {len(ratios)} invocations): rule <= 1.05 {rule}; paired {statistics.median(pairs):.3f}; "
          f"ratio of minima {statistics.median(mins):.3f}")

print()
print(f"{'variant':8} {'submits':>7} {'in wait':>7} {'handoff':>7} {'after':>6} {'overlap':>8} {'window ms':>10} {'copies end +ms':>15}")
for variant in ("hold", "release"):
    doc = json.load(open(f"{work}/{variant}/trace/trace.json"))
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    def named(n):
        return sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in xs if e["name"] == n)
    window = named("prefill")[0]
    submits, waits, handoffs = named("kv_submit"), named("dispatch_wait"), named("lock_handoff")
    inside = lambda s, spans: any(a <= s[0] and s[1] <= b for a, b in spans)
    in_wait = sum(inside(s, waits) for s in submits)
    at_handoff = sum(inside(s, handoffs) for s in submits)
    after = sum(s[0] >= window[1] for s in submits)
    us = union(submits)
    overlap = intersect(us, union(waits)) / length(us)
    copies_end = max(b for a, b in named("kv_transfer"))
    print(f"{variant:8} {len(submits):>7} {in_wait:>7} {at_handoff:>7} {after:>6} {overlap:>8.3f} "
          f"{(window[1] - window[0]) / 1000:>10.2f} {(copies_end - window[1]) / 1000:>+15.2f}")
PY
