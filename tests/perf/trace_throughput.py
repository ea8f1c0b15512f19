#!/usr/bin/python3
"""Throughput and peak memory of `densefeed trace analyze` on generated
PyTorch-profiler-style traces (tests/perf/kineto_trace_gen.py: several ranks,
gemm and elementwise kernels on one stream, NCCL all-reduce kernels on
another, cpu ops, runtime calls with correlation ids, flows, annotations).
Prints figures; asserts nothing.

The goal (issue 5): at least 100 MB/s on one core, peak memory well under
the traces' size. densefeed analyses on one thread (--pin also pins it to
one core), and the files are read once beforehand so that the page cache,
not the disk, serves them. MB/cpu-s (user + system time) is the figure that
other processes on the machine do not move.
Peak memory is the maximum resident set size that /usr/bin/time -v reports.

usage: tests/perf/trace_throughput.py [--gb 0.1,1.0] [--ranks 4] [--runs 3] [--gzip] [--pin]
                                      [--build build] [--dir /tmp/densefeed-trace-perf]
"""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
sys.path.insert(0, here)
import kineto_trace_gen  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--gb", default="0.1,1.0", help="total sizes to measure, GB (1e9 bytes), comma-separated")
parser.add_argument("--ranks", type=int, default=4)
parser.add_argument("--runs", type=int, default=3)
parser.add_argument("--gzip", action="store_true", help="also measure one rank file compressed with gzip -1")
parser.add_argument("--pin", action="store_true", help="pin densefeed to core 0 (taskset); on a shared machine this can only slow it")
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--dir", default="/tmp/densefeed-trace-perf")
args = parser.parse_args()

exe = os.path.join(args.build, "bin", "densefeed")
pin = ["taskset", "-c", "0"] if args.pin and shutil.which("taskset") else []


def ensure_traces(gb):
    d = os.path.join(args.dir, "%gGB-%dranks" % (gb, args.ranks))
    marker = os.path.join(d, "done")
    if not os.path.exists(marker):
        os.makedirs(d, exist_ok=True)
        for r in range(args.ranks):
            kineto_trace_gen.write_rank(os.path.join(d, "rank%d.json" % r), r, args.ranks, int(gb * 1e9 / args.ranks), 3, 1)
        open(marker, "w").close()
    return d


def warm(paths):
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def measure(targets):
    """(wall s, user s, sys s, max RSS bytes, report) of the median run by wall time."""
    runs = []
    for _ in range(args.runs):
        out = subprocess.run(pin + ["/usr/bin/time", "-v", exe, "trace", "analyze"] + targets + ["--json"], capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit("densefeed trace analyze exited %d: %s" % (out.returncode, out.stderr[-2000:]))
        t = out.stderr
        m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", t)
        wall = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
        user = float(re.search(r"User time \(seconds\): ([\d.]+)", t).group(1))
        system = float(re.search(r"System time \(seconds\): ([\d.]+)", t).group(1))
        rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) * 1024
        runs.append((wall, user, system, rss, out.stdout))
    runs.sort(key=lambda r: r[0])
    return runs[len(runs) // 2]


def row(label, paths):
    size = sum(os.path.getsize(p) for p in paths)
    warm(paths)
    wall, user, system, rss, report = measure(paths)
    doc = json.loads(report)
    parsed = sum(f["bytes"] for f in doc["files"])
    print("%-34s %9.1f %10d %9d %8.2f %8.2f %8.1f %8.1f %9.1f %6.2f" % (
        label, size / 1e6, doc["counts"]["events"], doc["counts"]["slices"], wall, user + system, parsed / 1e6 / wall,
        parsed / 1e6 / (user + system), rss / 1e6, rss / size))
    return doc


cpu = open("/proc/cpuinfo").read()
model = re.search(r"model name\s*: (.*)", cpu)
print("machine: %s, %d cores; densefeed single-threaded%s; median of %d runs" % (
    model.group(1) if model else "?", os.cpu_count(), ", pinned to core 0" if pin else "", args.runs))
print("%-34s %9s %10s %9s %8s %8s %8s %8s %9s %6s" % ("input", "MB", "events", "slices", "wall s", "cpu s", "MB/s",
                                                      "MB/cpu-s", "peak MB", "RSS/in"))
for gb in [float(x) for x in args.gb.split(",")]:
    d = ensure_traces(gb)
    paths = sorted(glob.glob(os.path.join(d, "rank*.json")))
    doc = row("%g GB, %d ranks (all files)" % (gb, args.ranks), paths)
    row("%g GB, one rank file" % gb, paths[:1])
    if args.gzip:
        gz = paths[0] + ".gz"
        if not os.path.exists(gz):
            subprocess.run("gzip -1 -c '%s' > '%s'" % (paths[0], gz), shell=True, check=True)
        row("%g GB, one rank file, gzip -1" % gb, [gz])
    cc = doc["comm_comp_overlap"]
    print("    comm/comp overlap %.2f %% over %d ranks; warnings: %s" % (
        100 * cc["fraction"], len(cc["ranks"]), ", ".join("%s x%d" % (w["kind"], w["count"]) for w in doc["warnings"]) or "none"))
print("MB/s: MB of JSON parsed per second of wall time (for gzip: uncompressed MB); MB/cpu-s: per second of user + system time;")
print("RSS/in: peak resident memory over the input files' size on disk.")
