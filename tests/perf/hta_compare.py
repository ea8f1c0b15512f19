#!/usr/bin/python3
"""densefeed's communication/computation overlap beside Holistic Trace
Analysis's (HTA, `HolisticTraceAnalysis` from PyPI, installed into a virtual
environment this script makes) on the same PyTorch-profiler-style traces
(tests/perf/kineto_trace_gen.py, several ranks). Prints both figures per rank
and both times; exits 1 when the figures differ by more than 1 % where the
definitions are the same.

Where the definitions are the same: HTA's get_comm_comp_overlap is
|U(comm) ∩ U(comp)| / |U(comm)| per rank over GPU kernels
(hta/analyzers/communication_analysis.py), which is densefeed's
comm_comp_overlap (class=communication;lane=gpu with class=compute;lane=gpu).
HTA also, by default, drops the last ProfilerStep and the kernels its CPU ops
launched (Trace._filter_irrelevant_gpu_kernels), and rounds nanosecond
timestamps to whole microseconds (ceil start, floor end; trace_parser.
round_down_time_stamps). So the comparison that must agree runs HTA with
include_last_profiler_step=True on traces with whole-microsecond times; the
other two rows (HTA's default; nanosecond times) are shown for information.

usage: tests/perf/hta_compare.py [--ranks 4] [--mb-per-rank 10] [--build build]
                                 [--venv /tmp/densefeed-hta-venv] [--dir /tmp/densefeed-hta-compare]
"""
import argparse
import json
import os
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
sys.path.insert(0, here)
import kineto_trace_gen  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--ranks", type=int, default=4)
parser.add_argument("--mb-per-rank", type=float, default=10)
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--venv", default="/tmp/densefeed-hta-venv")
parser.add_argument("--dir", default="/tmp/densefeed-hta-compare")
args = parser.parse_args()

HTA_RUN = r"""
import json, logging, sys, time
logging.disable(logging.WARNING)
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=sys.argv[2] == "1")
t2 = time.perf_counter()
df = a.get_comm_comp_overlap(visualize=False)
t3 = time.perf_counter()
print(json.dumps({"ranks": {int(r): float(p) for r, p in zip(df["rank"], df["comp_comm_overlap_pctg"])},
                  "import_s": t1 - t0, "load_s": t2 - t1, "overlap_s": t3 - t2}))
"""

python = os.path.join(args.venv, "bin", "python")
if not os.path.exists(python):
    subprocess.run([sys.executable, "-m", "venv", args.venv], check=True)
probe = subprocess.run([python, "-c", "import hta"], capture_output=True)
if probe.returncode != 0:
    # HTA 0.5.0 downcasts columns to int16 and then assigns larger values,
    # which pandas 3 refuses (TypeError: Invalid value ... for dtype 'int16').
    r = subprocess.run([os.path.join(args.venv, "bin", "pip"), "install", "-q", "HolisticTraceAnalysis", "pandas<3"])
    if r.returncode != 0:
        raise SystemExit("could not install HolisticTraceAnalysis from PyPI into %s" % args.venv)
hta_version = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('HolisticTraceAnalysis'))"],
                             capture_output=True, text=True).stdout.strip()
script = os.path.join(args.dir, "hta_run.py")
os.makedirs(args.dir, exist_ok=True)
with open(script, "w") as f:
    f.write(HTA_RUN)


def traces(decimals):
    d = os.path.join(args.dir, "%dranks-%gMB-%s" % (args.ranks, args.mb_per_rank, "us" if decimals == 0 else "ns"))
    if not os.path.exists(os.path.join(d, "done")):
        os.makedirs(d, exist_ok=True)
        for r in range(args.ranks):
            kineto_trace_gen.write_rank(os.path.join(d, "rank%d.json" % r), r, args.ranks, int(args.mb_per_rank * 1e6), decimals, 7)
        open(os.path.join(d, "done"), "w").close()
    return d


def ours(d):
    exe = os.path.join(args.build, "bin", "densefeed")
    start = time.perf_counter()
    out = subprocess.run([exe, "trace", "analyze", d, "--json"], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit("densefeed exited %d: %s" % (out.returncode, out.stderr))
    doc = json.loads(out.stdout)
    return {r["rank"]: 100 * r["fraction"] for r in doc["comm_comp_overlap"]["ranks"]}, wall


def hta(d, include_last):
    start = time.perf_counter()
    out = subprocess.run([python, script, d, "1" if include_last else "0"], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit("HTA failed: %s" % out.stderr[-3000:])
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    doc["ranks"] = {int(r): p for r, p in doc["ranks"].items()}  # JSON keys are strings
    return doc, wall


print("HolisticTraceAnalysis %s (venv %s) against %s; %d ranks x %g MB per trace set" % (
    hta_version, args.venv, os.path.join(args.build, "bin", "densefeed"), args.ranks, args.mb_per_rank))
agree = True
for decimals, include_last, must_agree, label in [
        (0, True, True, "whole-us times, HTA include_last_profiler_step=True  (same definition)"),
        (0, False, False, "whole-us times, HTA default (drops the last ProfilerStep)"),
        (3, True, False, "ns times, HTA include_last_profiler_step=True (HTA rounds to whole us)")]:
    d = traces(decimals)
    mine, my_wall = ours(d)
    theirs, their_wall = hta(d, include_last)
    print("\n" + label)
    print("  %4s %12s %12s %10s" % ("rank", "HTA %", "densefeed %", "diff"))
    for rank in sorted(mine):
        h = theirs["ranks"].get(rank)
        diff = None if h is None else mine[rank] - h
        # HTA prints percentages rounded to 2 decimals: within 1 % of the value means |diff| <= 0.01 * value.
        ok = h is not None and abs(diff) <= max(0.01 * max(abs(h), abs(mine[rank])), 0.005)
        if must_agree and not ok:
            agree = False
        print("  %4d %12s %12.4f %10s%s" % (rank, "-" if h is None else "%.2f" % h, mine[rank],
                                             "-" if diff is None else "%+.4f" % diff, "" if ok or not must_agree else "  DISAGREE"))
    print("  time: densefeed %.2f s (whole process); HTA %.2f s (process), of which import %.2f s, load %.2f s, overlap %.2f s" % (
        my_wall, their_wall, theirs["import_s"], theirs["load_s"], theirs["overlap_s"]))
print("\nagreement within 1 %% where the definitions are the same: %s" % ("yes" if agree else "NO"))
sys.exit(0 if agree else 1)
