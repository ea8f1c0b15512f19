#!/usr/bin/env python3
"""How long `densefeed run` takes beyond its harness processes' own time.

Runs an experiment with --jobs 1 (processes one after another, so wall times
add up) and --no-bench, several times, and prints per run:
  total wall (measured here, around the whole CLI process),
  harness wall (sum over harness processes, as densefeed measured each from spawn to reap),
  overhead = total - harness, per case and per harness process.
The overhead holds CLI start-up, manifest/schema validation, lock hashing,
process set-up and reaping, .npy reading, comparison, report and the SQLite
writes. Prints figures; asserts nothing.

usage: tests/perf/run_overhead.py [--build build] [--runs 3] [--profile quick] [MANIFEST]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
parser = argparse.ArgumentParser()
parser.add_argument("manifest", nargs="?", default=os.path.join(root, "experiments", "cp-affine-chain-tf32x3.yaml"))
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--runs", type=int, default=3)
parser.add_argument("--profile", default="quick")
args = parser.parse_args()

exe = os.path.join(args.build, "bin", "densefeed")
# densefeed's own project, its gates as checked out; the build's harnesses
# (named bare in the gates) first on PATH.
project = ["--project", root, "--trust-worktree"]
env = {**os.environ, "PATH": os.pathsep.join([os.path.join(args.build, "bin"), os.environ.get("PATH", "")])}
per_case = []
print(f"{'run':>3} {'cases':>5} {'procs':>5} {'total s':>8} {'harness s':>9} {'overhead s':>10} {'ms/case':>8} {'ms/proc':>8}")
with tempfile.TemporaryDirectory() as tmp:
    for i in range(args.runs):
        start = time.perf_counter()
        out = subprocess.run([exe, *project, "run", args.manifest, "--ledger", os.path.join(tmp, "ledger.db"), "--jobs", "1",
                              "--no-bench", "--json", "--profile", args.profile, "--seed", str(1000 + i)],
                             capture_output=True, text=True, env=env)
        total = time.perf_counter() - start
        if out.returncode not in (0, 1):
            raise SystemExit(f"densefeed exited {out.returncode}: {out.stderr}")
        doc = json.loads(out.stdout)
        gate = doc["stages"]["gate"]
        cases = len(gate["cases"])
        procs = cases + sum(1 for c in gate["cases"] if c["reference_wall_s"] > 0)
        overhead = total - gate["harness_wall_s"]
        per_case.append(1000 * overhead / cases)
        print(f"{i:>3} {cases:>5} {procs:>5} {total:>8.2f} {gate['harness_wall_s']:>9.2f} {overhead:>10.3f} "
              f"{1000 * overhead / cases:>8.1f} {1000 * overhead / procs:>8.1f}")
print(f"overhead per case: median {statistics.median(per_case):.1f} ms, "
      f"min {min(per_case):.1f} ms, max {max(per_case):.1f} ms over {len(per_case)} runs")
