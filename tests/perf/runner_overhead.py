#!/usr/bin/env python3
"""What the runner costs, stage by stage, against the harness's own time, with
and without the sandbox (issue 8). Prints figures; asserts nothing.

A throw-away densefeed project holds one gate, `perf`, whose reference and
candidate are tests/support/hostile_harness (honest: y = sin(seed/1000 + i),
n = 64 .. 8192). The harness writes OUT/selftime.txt, the CLOCK_MONOTONIC
start and end of its own main(). Each experiment runs with --jobs 1 (one
process at a time, so that times add up) and --no-bench, and per run:

  process   spawn-to-reap wall time (densefeed's ProcessResult.wall_s) minus
            the harness's own main() time: fork/exec, the dynamic loader,
            bwrap's namespaces and mounts when sandboxed, log capture,
            reaping, the stray sweep. Per process; the reference never runs
            sandboxed, the candidate does unless --no-sandbox.
  gate      the gate stage's wall time minus its processes' wall times:
            run folders, .npy reading and comparison, per case.
  run       the CLI's wall time (measured here) minus the gate stage: start-up,
            manifest and schema validation, lock hashing, git provenance,
            sandbox probe, ledger writes, report; per experiment.
  flood     one candidate writing 1 GiB to stdout (16 MiB kept): its process
            overhead as above, and the largest resident set of densefeed and
            its harnesses (GNU time's %M), so that a flood is seen to cost
            neither memory nor much time.
With --affine, also the bundled cp-affine-chain quick profile (every case, real
harnesses): per-case overhead beyond the harnesses' wall time, sandbox on
and off.

Submission latency: `densefeed submit` from start to its return with the id
(the experiment is queued when it returns), one after another and from 8
concurrent submitters on one ledger.

usage: tests/perf/runner_overhead.py [--build build] [--runs 5] [--affine]
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
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--runs", type=int, default=5)
parser.add_argument("--affine", action="store_true", help="also time the cp-affine-chain quick profile")
args = parser.parse_args()
exe = os.path.join(args.build, "bin", "densefeed")
# The gates name their harnesses bare: densefeed looks them up in the
# project's harness_path, then PATH (never next to itself), so the build's
# bin folder goes first on PATH.
env = {**os.environ, "PATH": os.pathsep.join([os.path.join(args.build, "bin"), os.environ.get("PATH", "")])}
gnu_time = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None

GATE = """gate: perf
description: y_i = sin(seed / 1000 + i), for the runner's figures.
reference:
  command: [hostile_harness, --role, reference, --n, "{case.n}", --seed, "{seed}", --out, "{out}"]
candidate:
  command: [hostile_harness, --role, candidate, --mode, "{param.mode}", --n, "{case.n}", --seed, "{seed}", --out, "{out}"]
params:
  mode: {type: string, enum: [honest, flood], default: honest}
outputs:
  y:
    dtype: float32
    reference_dtype: float64
    shape: ["{case.n}"]
    tolerance: {rel_l2: 1.0e-5, max_abs: 1.0e-5}
cases:
  grid:
    - {n: [64, 128, 256, 512, 1024, 2048, 4096, 8192]}
profiles:
  quick: {}
  full: {}
  one: {n: [64]}
timeout_s: 120
freezes: []
"""


def submission_latency(exe, root_dir, manifest, ledger, serial=20, concurrent=8):
    """submit-to-queued latency, ms: `serial` submits one after another, then
    `concurrent` submitters at once; {"serial_ms": [...], "concurrent_ms": [...]}."""
    argv = [exe, "--project", root_dir, "--trust-worktree", "submit", manifest, "--ledger", ledger, "--json"]

    def once():
        t0 = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True, env=env)
        if r.returncode != 0 or "experiment_id" not in r.stdout:
            raise RuntimeError(f"submit failed: {r.stderr}")
        return 1000 * (time.perf_counter() - t0)

    serial_ms = [once() for _ in range(serial)]
    t0 = time.perf_counter()
    procs = [(time.perf_counter(), subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env))
             for _ in range(concurrent)]
    concurrent_ms = []
    for started, p in procs:
        p.communicate()
        if p.returncode != 0:
            raise RuntimeError("a concurrent submit failed")
        concurrent_ms.append(1000 * (time.perf_counter() - started))
    return {"serial_ms": serial_ms, "concurrent_ms": concurrent_ms}


def manifest(dir, name, mode):
    path = os.path.join(dir, name + ".yaml")
    with open(path, "w") as f:
        f.write(f"experiment: {name}\nhypothesis: h\npredicted_effect: p\ngate: perf\n"
                f"candidate: {{revision: WORKTREE, params: {{mode: {mode}}}}}\n"
                f"base: {{revision: WORKTREE, params: {{mode: {'flood' if mode == 'honest' else 'honest'}}}}}\n")
    return path


def run(root_dir, manifest_path, ledger, sandbox, seed, profile="quick", measure_rss=False):
    # --trust-worktree: throw-away projects are no git repositories, and
    # densefeed's own checkout is timed as it is, not as its main branch has it.
    cmd = [exe, "--project", root_dir, "--trust-worktree", "run", manifest_path, "--ledger", ledger, "--jobs", "1",
           "--no-bench", "--json", "--profile", profile, "--seed", str(seed)]
    if not sandbox:
        cmd.append("--no-sandbox")
    rss_file = None
    if measure_rss and gnu_time:
        rss_file = ledger + ".rss"
        cmd = [gnu_time, "-f", "%M", "-o", rss_file] + cmd
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    total = time.perf_counter() - start
    if out.returncode not in (0, 1):
        raise SystemExit(f"densefeed exited {out.returncode}: {out.stderr}")
    doc = json.loads(out.stdout)
    rss_kib = int(open(rss_file).read().split()[-1]) if rss_file else None
    return total, doc, rss_kib


def self_time(process_dir):
    with open(os.path.join(process_dir, "out", "selftime.txt")) as f:
        start, end = (int(x) for x in f.read().split())
    return (end - start) / 1e9


def med(values):
    return statistics.median(values) if values else float("nan")


def spread(values):
    return f"{1000 * med(values):7.2f} ms (min {1000 * min(values):6.2f}, max {1000 * max(values):6.2f}, n={len(values)})"


def perf_project(root_dir):
    """A throw-away project (densefeed.yaml, the perf gate, locked) in root_dir."""
    os.makedirs(os.path.join(root_dir, "gates"), exist_ok=True)
    with open(os.path.join(root_dir, "densefeed.yaml"), "w") as f:
        f.write("{}\n")
    with open(os.path.join(root_dir, "gates", "perf.yaml"), "w") as f:
        f.write(GATE)
    subprocess.run([exe, "--project", root_dir, "--trust-worktree", "gate", "lock"], check=True, capture_output=True, env=env)


def hostile_figures(tmp):
    root_dir = os.path.join(tmp, "root")
    perf_project(root_dir)
    honest = manifest(tmp, "honest", "honest")
    flood = manifest(tmp, "flood", "flood")
    ledger = os.path.join(tmp, "ledger.db")
    figures = {}
    for sandbox in (True, False):
        f = figures[sandbox] = {"reference": [], "candidate": [], "self": [], "gate": [], "run": [], "sandbox": None}
        for i in range(args.runs):
            total, doc, _ = run(root_dir, honest, ledger, sandbox, 1000 + i)
            f["sandbox"] = doc["sandbox"]["text"]
            gate = doc["stages"]["gate"]
            work = doc["work_dir"]
            processes = 0.0
            for k, c in enumerate(gate["cases"]):
                ref_dir = os.path.join(work, f"reference-{k:03}")
                cand_dir = os.path.join(work, f"candidate-{k:03}")
                for role, d in (("reference", ref_dir), ("candidate", cand_dir)):
                    wall = c[f"{role}_process"]["wall_s"]
                    own = self_time(d)
                    f[role].append(wall - own)
                    f["self"].append(own)
                    processes += wall
            f["gate"].append((gate["wall_s"] - processes) / len(gate["cases"]))
            f["run"].append(total - gate["wall_s"])
        total, doc, rss = run(root_dir, flood, ledger, sandbox, 2000, profile="one", measure_rss=True)
        c = doc["stages"]["gate"]["cases"][0]
        cand_dir = os.path.join(doc["work_dir"], "candidate-000")
        f["flood"] = {"wall": c["candidate_process"]["wall_s"], "self": self_time(cand_dir),
                      "bytes": c["candidate_process"]["stdout_bytes"], "dropped": c["candidate_process"]["stdout_dropped"],
                      "log": os.path.getsize(os.path.join(cand_dir, "stdout.log")), "rss_kib": rss, "total": total}
    return figures


def affine_figures(tmp):
    path = os.path.join(root, "experiments", "cp-affine-chain-tf32x3.yaml")
    out = {}
    for sandbox in (True, False):
        total, doc, _ = run(root, path, os.path.join(tmp, "affine.db"), sandbox, 7)
        gate = doc["stages"]["gate"]
        n = len(gate["cases"])
        cand = sum(c["candidate_wall_s"] for c in gate["cases"])
        out[sandbox] = {"cases": n, "total": total, "harness": gate["harness_wall_s"], "candidate": cand,
                        "overhead_per_case": (total - gate["harness_wall_s"]) / n, "sandbox": doc["sandbox"]["text"]}
    return out


def main():
    host = os.uname()
    print(f"densefeed runner overhead on {host.nodename} ({host.machine}, {os.cpu_count()} CPUs), {exe}")
    with tempfile.TemporaryDirectory(prefix="densefeed-perf-") as tmp:
        figures = hostile_figures(tmp)
        for sandbox in (True, False):
            f = figures[sandbox]
            print(f"\n--- {'with' if sandbox else 'without'} the sandbox (report says: {f['sandbox']}); "
                  f"{args.runs} runs x 8 cases, --jobs 1")
            print(f"  harness's own main() time      {spread(f['self'])}")
            print(f"  process: reference (unsandboxed) spawn-to-reap beyond it  {spread(f['reference'])}")
            print(f"  process: candidate ({'sandboxed' if sandbox else 'unsandboxed'}) spawn-to-reap beyond it  {spread(f['candidate'])}")
            print(f"  gate stage beyond its processes, per case  {spread(f['gate'])}")
            print(f"  run beyond the gate stage, per experiment  {spread(f['run'])}")
            fl = f["flood"]
            rss = f"{fl['rss_kib'] / 1024:.1f} MiB" if fl["rss_kib"] else "n/a (no /usr/bin/time)"
            print(f"  flood: {fl['bytes']} bytes to stdout, {fl['dropped']} dropped, log {fl['log']} bytes; "
                  f"harness main() {1000 * fl['self']:.0f} ms, spawn-to-reap {1000 * fl['wall']:.0f} ms "
                  f"(beyond it {1000 * (fl['wall'] - fl['self']):.1f} ms); largest resident set (densefeed or a harness) {rss}; "
                  f"whole run {fl['total']:.2f} s")
        on, off = figures[True], figures[False]
        print(f"\nsandbox cost per candidate process (median spawn-to-reap overhead, on - off): "
              f"{1000 * (med(on['candidate']) - med(off['candidate'])):.2f} ms")
        sub_root = os.path.join(tmp, "submit-root")
        perf_project(sub_root)
        manifest = os.path.join(tmp, "submit.yaml")
        with open(manifest, "w") as f:
            f.write("experiment: latency\nhypothesis: h\npredicted_effect: p\ngate: perf\n"
                    "candidate: {revision: WORKTREE, params: {mode: honest}}\nbase: {revision: WORKTREE, params: {mode: flood}}\n")
        latency = submission_latency(exe, sub_root, manifest, os.path.join(tmp, "submit.db"))
        for k, v in latency.items():
            v = sorted(v)
            print(f"submission latency (submit to queued), {k[:-3]}: median {statistics.median(v):.1f} ms, "
                  f"p95 {v[min(len(v) - 1, int(0.95 * len(v)))]:.1f} ms, n = {len(v)}")
        if args.affine:
            a = affine_figures(tmp)
            print("\ncp-affine-chain-tf32x3, quick profile, --jobs 1")
            for sandbox in (True, False):
                x = a[sandbox]
                print(f"  {'sandbox on ' if sandbox else 'sandbox off'}: {x['cases']} cases, total {x['total']:.2f} s, "
                      f"harness wall {x['harness']:.2f} s (candidates {x['candidate']:.2f} s), "
                      f"overhead {1000 * x['overhead_per_case']:.1f} ms/case  [{x['sandbox']}]")
            print(f"  candidate wall, on - off: {1000 * (a[True]['candidate'] - a[False]['candidate']) / a[True]['cases']:.1f} ms/case")


main()
