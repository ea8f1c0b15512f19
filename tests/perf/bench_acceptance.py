#!/usr/bin/env python3
"""Acceptance figures of the benchmark decision (issue 4), on this machine.

With a CPU harness whose cost is set by an argument (tests/support/
cheat_harness in bench mode: 200 * SLOWDOWN evaluations per iteration):
  1. A/A: `densefeed bench calibrate` runs the base against itself N times
     (default 50); the fraction that end `faster` or `slower` should be <= 5 %.
  2. a planted 10 % slowdown (candidate slowdown 1.10), 20 experiments: the
     fraction that end `slower` should be >= 95 %.
  3. a planted 3 % slowdown, 20 experiments: the fraction detected.
Prints figures; asserts nothing. The decisions after step 1 use the noise floor
it recorded (threshold = max(1 %, floor)), as densefeed does after a calibration.

With --harness driver the same figures under a trusted Python driver
(issue 16): a numpy kernel (SLOWDOWN x 200 sin/cos passes over n floats) that
a frozen driver loads and times (densefeed_driver.Driver), so densefeed's
cross-checks (wall-time fit over alternating iteration counts, every timed
iteration's outputs gated) run on every round; it also prints how many runs a
cross-check flagged and the driver's share of each round's wall time.

With --harness gpu the harness is tests/support/gpu_spin_harness (a CUDA
kernel timed with CUDA events, L2 flushed outside them, SM clock and throttle
reported through NVML), for the same figures on a GPU.

usage: tests/perf/bench_acceptance.py [--build build | --bin DIR] [--harness cpu|gpu] [--aa 50] [--planted 20] [--n N]
"""
import argparse
import collections
import json
import os
import subprocess
import tempfile
import time

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
parser = argparse.ArgumentParser()
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--aa", type=int, default=50)
parser.add_argument("--planted", type=int, default=20)
parser.add_argument("--bin", help="folder holding densefeed and the harnesses (default BUILD/bin)")
parser.add_argument("--harness", choices=["cpu", "gpu", "driver"], default="cpu")
parser.add_argument("--n", type=int, help="elements (cpu default 1000, gpu default 16777216)")
args = parser.parse_args()
bin_dir = args.bin or os.path.join(args.build, "bin")
exe = os.path.join(bin_dir, "densefeed")
# The gate names its harness bare: densefeed looks it up in the project's
# harness_path, then PATH (never next to itself), so the bin folder goes first on PATH.
env = {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}
if args.n is None:
    args.n = 1 << 24 if args.harness == "gpu" else 1000

HARNESS = {
    "cpu": ("cheat_harness", "--mode, honest, --scale, \"1\","),
    "gpu": ("gpu_spin_harness", "--work, \"256\","),
    "driver": ("cheat_harness", "--mode, honest, --scale, \"1\","),
}[args.harness]
KERNEL = """import numpy as np
def spin(x, slowdown):
    y = x
    for _ in range(int(round(200 * slowdown))):
        y = np.cos(np.sin(y))
    return y
"""
REFERENCE = """import argparse, os
import numpy as np
import kern
p = argparse.ArgumentParser(); p.add_argument('--n', type=int); p.add_argument('--seed', type=int); p.add_argument('--out')
a = p.parse_args()
x = np.random.default_rng(a.seed).standard_normal(a.n)
np.save(os.path.join(a.out, 'y.npy'), kern.spin(x, 1.0))
"""
DRIVER = """import argparse
from densefeed_driver import Driver
import numpy as np
p = argparse.ArgumentParser(); p.add_argument('--n', type=int)
a = p.parse_args()
d = Driver()
spin = d.load_kernel()
d.time(lambda x: spin(x, d.params['slowdown']), outputs=lambda y: {'y': y},
       inputs=lambda h: np.random.default_rng(h.seed).standard_normal(a.n))
"""
GATE = f"""gate: spin
description: a {args.harness.upper()} harness whose cost is set by the slowdown parameter
reference:
  command: [{HARNESS[0]}, --role, reference, --n, "{{case.n}}", --scale, "1", --seed, "{{seed}}", --out, "{{out}}"]
candidate:
  command: [{HARNESS[0]}, --role, candidate, {HARNESS[1]} --n, "{{case.n}}",
            --slowdown, "{{param.slowdown}}", --seed, "{{seed}}", --out, "{{out}}"]
params:
  slowdown: {{type: number, default: 1}}
outputs:
  y: {{dtype: float32, reference_dtype: float64, tolerance: {{rel_l2: 1.0e-5}}}}
cases: {{grid: [{{n: [{args.n}]}}]}}
profiles: {{quick: {{}}, full: {{}}}}
bench: {{warmup: 1, iters: {5 if args.harness == "cpu" else 10}, max_seconds_per_case: 120, cases: [{{n: {args.n}}}]}}
freezes: []
"""
if args.harness == "driver":
    GATE = f"""gate: spin
description: a numpy kernel whose cost is set by the slowdown parameter, timed by a frozen driver
reference:
  command: [python3, "{{project}}/ref.py", --n, "{{case.n}}", --seed, "{{seed}}", --out, "{{out}}"]
candidate:
  command: [python3, "{{project}}/ref.py", --n, "{{case.n}}", --seed, "{{seed}}", --out, "{{out}}"]
params:
  slowdown: {{type: number, default: 1}}
outputs:
  y: {{dtype: float64, tolerance: {{rel_l2: 1.0e-12}}}}
cases: {{grid: [{{n: [{args.n}]}}]}}
profiles: {{quick: {{}}, full: {{}}}}
bench:
  warmup: 1
  iters: 5
  max_seconds_per_case: 120
  cases: [{{n: {args.n}}}]
  driver:
    command: [python3, "{{project}}/drv.py", --n, "{{case.n}}"]
    kernel: {{module: kern, function: spin}}
freezes: [ref.py, drv.py]
"""

with tempfile.TemporaryDirectory() as tmp:
    # A throw-away project (no git): its gates are trusted as they are.
    os.makedirs(os.path.join(tmp, "gates"))
    with open(os.path.join(tmp, "densefeed.yaml"), "w") as f:
        f.write("{}\n")
    with open(os.path.join(tmp, "gates", "spin.yaml"), "w") as f:
        f.write(GATE)
    for name, text in (("kern.py", KERNEL), ("ref.py", REFERENCE), ("drv.py", DRIVER)):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    ledger = os.path.join(tmp, "ledger.db")
    base = [exe, "--project", tmp, "--trust-worktree"]
    subprocess.run(base + ["gate", "lock"], check=True, capture_output=True, env=env)

    start = time.perf_counter()
    out = subprocess.run(base + ["bench", "calibrate", "spin", "--comparisons", str(args.aa), "--ledger", ledger, "--json"],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(out.stdout + out.stderr)
    cal = json.loads(out.stdout)["cases"][0]
    aa = collections.Counter(c["verdict"] for c in cal["comparisons"])
    aa_s = time.perf_counter() - start

    flagged = collections.Counter()
    walls = []

    def planted(slowdown, count):
        verdicts, speedups, rounds = collections.Counter(), [], []
        for i in range(count):
            manifest = os.path.join(tmp, "m.yaml")
            with open(manifest, "w") as f:
                f.write("experiment: planted\nhypothesis: h\npredicted_effect: p\ngate: spin\n"
                        f"candidate: {{revision: WORKTREE, params: {{slowdown: {slowdown}}}}}\n"
                        "base: {revision: WORKTREE, params: {slowdown: 1.0}}\n")
            r = subprocess.run(base + ["run", manifest, "--ledger", ledger, "--json"], capture_output=True, text=True, env=env)
            doc = json.loads(r.stdout)
            if doc["stages"]["bench"]["status"] != "measured":
                flagged[doc["stages"]["bench"]["status"]] += 1
                verdicts["bench " + doc["stages"]["bench"]["status"]] += 1
                continue
            case = doc["stages"]["bench"]["cases"][0]
            for f in case.get("timing_flags", []):
                flagged[f["kind"]] += 1
            fit = case.get("timing_checks", {}).get("wall_fit", {})
            if fit.get("base") and fit.get("base_claimed_ms"):
                walls.append((fit["base_claimed_ms"], fit["base"]["per_iteration_ms"], fit["base"]["fixed_ms"]))
            verdicts[case["verdict"]] += 1
            speedups.append(case["speedup"])
            rounds.append(case["rounds"])
        return verdicts, speedups, rounds, case["threshold"] if speedups else 0

    print(f"{args.harness.upper()} harness: {HARNESS[0]} bench mode, n = {args.n}, looks at 9/15/25 rounds")
    print(f"1. A/A, {args.aa} calibrations: {dict(aa)}; false verdicts (faster or slower): "
          f"{(aa['faster'] + aa['slower']) / args.aa:.1%} (goal <= 5 %); noise floor {cal['noise_floor']:.2%}; {aa_s:.0f} s",
          flush=True)
    start = time.perf_counter()
    ten, ten_speedups, ten_rounds, threshold = planted(1.10, args.planted)
    print(f"2. planted 10 % slowdown, {args.planted} runs (threshold {threshold:.2%}): {dict(ten)}; slower: "
          f"{ten['slower'] / args.planted:.0%} (goal >= 95 %); median speedup {sorted(ten_speedups)[len(ten_speedups) // 2]:.3f}; "
          f"rounds {min(ten_rounds)}..{max(ten_rounds)}; {time.perf_counter() - start:.0f} s", flush=True)
    start = time.perf_counter()
    three, three_speedups, three_rounds, _ = planted(1.03, args.planted)
    print(f"3. planted 3 % slowdown, {args.planted} runs: {dict(three)}; detected (slower): "
          f"{three['slower'] / args.planted:.0%}; median speedup {sorted(three_speedups)[len(three_speedups) // 2]:.3f}; "
          f"rounds {min(three_rounds)}..{max(three_rounds)}; {time.perf_counter() - start:.0f} s", flush=True)
    print(f"cross-checks: flags over the planted runs: {dict(flagged) or 'none'}")
    if walls:
        claimed = sorted(w[0] for w in walls)[len(walls) // 2]
        slope = sorted(w[1] for w in walls)[len(walls) // 2]
        fixed = sorted(w[2] for w in walls)[len(walls) // 2]
        print(f"wall-time fit (base arm, median over runs): claimed {claimed:.3f} ms/iteration, wall slope {slope:.3f} ms/iteration, "
              f"fixed cost per process {fixed:.1f} ms; rounds alternate {5 if args.harness != 'gpu' else 10} and twice as many "
              "iterations, so a round pair runs 1.5x the iterations of two plain rounds")
