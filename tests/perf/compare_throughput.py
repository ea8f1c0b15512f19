#!/usr/bin/python3
"""Throughput of `densefeed compare` on two large fp32 .npy files, beside
numpy's allclose on the same files (numpy from Debian's python3-numpy:
apt-get install python3-numpy). Prints figures; asserts nothing.

The goal (issue 3): at least 1 GB/s of input (both files) per core.
Files are written once into --dir and read from the page cache (warmed
first), so the figure is the comparison's, not the disk's.

usage: tests/perf/compare_throughput.py [--gib 1.0] [--runs 3] [--build build] [--dir /tmp/densefeed-perf]
"""
import argparse
import os
import statistics
import subprocess
import time

import numpy as np

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
parser = argparse.ArgumentParser()
parser.add_argument("--gib", type=float, default=1.0, help="size of each tensor in GiB")
parser.add_argument("--runs", type=int, default=3)
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--dir", default="/tmp/densefeed-perf")
args = parser.parse_args()

os.makedirs(args.dir, exist_ok=True)
n = int(args.gib * (1 << 30)) // 4
ref_path, cand_path = os.path.join(args.dir, "ref.npy"), os.path.join(args.dir, "cand.npy")
if not (os.path.exists(ref_path) and np.load(ref_path, mmap_mode="r").shape == (n,)):
    rng = np.random.default_rng(1)
    ref = np.lib.format.open_memmap(ref_path, mode="w+", dtype=np.float32, shape=(n,))
    cand = np.lib.format.open_memmap(cand_path, mode="w+", dtype=np.float32, shape=(n,))
    step = 1 << 24
    for i in range(0, n, step):
        block = rng.standard_normal(min(step, n - i), dtype=np.float32)
        ref[i:i + step] = block
        cand[i:i + step] = block * np.float32(1 + 1e-7)
    ref.flush()
    cand.flush()
    del ref, cand
for p in (ref_path, cand_path):  # warm the page cache
    with open(p, "rb") as f:
        while f.read(1 << 26):
            pass

input_bytes = 2 * n * 4
exe = os.path.join(args.build, "bin", "densefeed")
ours, theirs = [], []
for _ in range(args.runs):
    start = time.perf_counter()
    out = subprocess.run([exe, "compare", ref_path, cand_path, "--rtol", "1e-5", "--atol", "1e-6", "--rel-l2", "1e-5"],
                         capture_output=True, text=True)
    ours.append(time.perf_counter() - start)
    if out.returncode != 0:
        raise SystemExit(f"densefeed compare exited {out.returncode}: {out.stdout}{out.stderr}")
    start = time.perf_counter()
    a = np.load(ref_path, mmap_mode="r")
    b = np.load(cand_path, mmap_mode="r")
    ok = np.allclose(b, a, rtol=1e-5, atol=1e-6)
    theirs.append(time.perf_counter() - start)
    assert ok

print(f"two {args.gib:g} GiB float32 tensors ({n} elements each), {args.runs} runs, one core each, page cache warm")
print(f"{'':<34} {'median s':>9} {'min s':>8} {'GB/s of input':>14}")
for name, t in (("densefeed compare (all metrics)", ours), ("numpy allclose (elementwise only)", theirs)):
    print(f"{name:<34} {statistics.median(t):>9.3f} {min(t):>8.3f} {input_bytes / statistics.median(t) / 1e9:>14.2f}")
