#!/usr/bin/env python3
"""Harness sessions against one process per case (issue 17, benchmark 1, CPU).

A Python/numpy harness whose start costs about 0.5 s (a sleep standing for
torch and a CUDA context) and whose case costs about 5 ms, 50 cases:
  - the gate's time to verdict with protocol: session and with
    protocol: process (the same harness: densefeed_harness.serve serves
    both), sandbox on and off, --jobs 2;
  - a benchmark (9, 15 or 25 interleaved rounds, as its looks decide) both ways;
  - the per-case overhead beyond the harness's own work (wall / cases - the
    case's 5 ms) for each.
Prints figures; asserts nothing.

usage: tests/perf/session_overhead.py [--build build] [--cases 50] [--import-s 0.5]
"""
import argparse
import json
import os
import subprocess
import tempfile
import textwrap
import time

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
parser = argparse.ArgumentParser()
parser.add_argument("--build", default=os.path.join(root, "build"))
parser.add_argument("--cases", type=int, default=50)
parser.add_argument("--import-s", type=float, default=0.5)
args = parser.parse_args()
exe = os.path.join(args.build, "bin", "densefeed")
env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": tempfile.mkdtemp(dir="/var/tmp")}

with tempfile.TemporaryDirectory(dir="/var/tmp") as project:
    open(os.path.join(project, "h.py"), "w").write(textwrap.dedent(f"""\
        import time
        time.sleep({args.import_s})  # the expensive start: an interpreter, torch, a CUDA context
        import numpy as np
        from densefeed_harness import serve
        def work(x):
            end = time.perf_counter() + 0.005
            while time.perf_counter() < end:
                pass
            return 2 * x
        def handle(h):
            x = h.rng().standard_normal(int(h.case["n"]))
            if h.mode == "bench":
                h.write_samples(h.time_iterations(lambda: work(x)))
            h.write_output("y", work(x))
        serve(handle)
        """))
    os.makedirs(os.path.join(project, "gates"))
    grid = ", ".join(str(100 + k) for k in range(args.cases))
    for protocol in ("session", "process"):
        # One process per case takes its case in argv (a command the cases
        # share would run once: densefeed shares a reference by its argv).
        case_arg = "" if protocol == "session" else ', --n, "{case.n}"'
        open(os.path.join(project, "gates", f"{protocol}.yaml"), "w").write(textwrap.dedent(f"""\
            gate: {protocol}
            description: y = 2 x, {args.cases} cases, a harness that starts in {args.import_s} s
            protocol: {protocol}
            reference: {{command: [python3, "{{project}}/h.py"{case_arg}]}}
            candidate: {{command: [python3, "{{project}}/h.py", --tag, "{{param.tag}}"{case_arg}]}}
            params: {{tag: {{type: string, default: base}}}}
            outputs: {{y: {{dtype: float64, tolerance: {{rel_l2: 1.0e-12}}}}}}
            cases: {{grid: [{{n: [{grid}]}}]}}
            profiles: {{quick: {{}}, full: {{}}}}
            bench: {{warmup: 1, iters: 5, cases: [{{n: 100}}]}}
            freezes: [h.py]
            """))
        open(os.path.join(project, f"{protocol}.yaml"), "w").write(
            f"experiment: {protocol}\nhypothesis: h\npredicted_effect: p\ngate: {protocol}\n"
            "candidate: {revision: WORKTREE, params: {tag: cand}}\nbase: {revision: WORKTREE}\n")
    open(os.path.join(project, "densefeed.yaml"), "w").write("gates: gates\nexperiments: experiments\nledger: .densefeed/ledger.db\n")
    open(os.path.join(project, ".gitignore"), "w").write(".densefeed/\n")
    open(os.path.join(project, "gates", "gates.lock"), "w").write("")
    git = ["git", "-C", project, "-c", "user.name=perf", "-c", "user.email=p@e"]
    subprocess.run(git[:3] + ["init", "-q", "-b", "main"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "gates"], check=True)
    lock = subprocess.run([exe, "gate", "lock"], cwd=project, env=env, capture_output=True, text=True)
    if lock.returncode != 0:
        raise SystemExit("densefeed gate lock: " + lock.stderr)
    subprocess.run(git + ["commit", "-qam", "lock"], check=True)

    def run(protocol, *flags):
        t = time.perf_counter()
        r = subprocess.run([exe, "run", f"{protocol}.yaml", "--json", "--jobs", "2", *flags], cwd=project, env=env,
                           capture_output=True, text=True)
        wall = time.perf_counter() - t
        doc = json.loads(r.stdout)
        return wall, doc

    print(f"{args.cases} cases, harness start {args.import_s} s, case 5 ms, --jobs 2; this machine: {os.cpu_count()} cores")
    print(f"{'stage':>6} {'protocol':>8} {'sandbox':>7} {'wall s':>7} {'ms/case beyond 5 ms':>20} {'verdict':>8}")
    for sandbox in ("on", "off"):
        flags = [] if sandbox == "on" else ["--no-sandbox"]
        for protocol in ("session", "process"):
            wall, doc = run(protocol, "--no-bench", *flags)
            gate_s = doc["stages"]["gate"]["wall_s"]
            per_case = 1e3 * gate_s / args.cases - 5  # 2 jobs run reference and candidate of a case at once
            print(f"{'gate':>6} {protocol:>8} {sandbox:>7} {gate_s:>7.2f} {per_case:>20.1f} {doc['verdict']:>8}")
    for protocol in ("session", "process"):
        wall, doc = run(protocol)
        bench = doc["stages"]["bench"]
        c = bench["cases"][0] if bench["cases"] else {}
        print(f"{'bench':>6} {protocol:>8} {'on':>7} {wall - doc['stages']['gate']['wall_s']:>7.2f} "
              f"{'':>20} {c.get('verdict', bench['status']):>8}  rounds {c.get('rounds')}, speedup {c.get('speedup')}, "
              f"flags {[f['kind'] for f in c.get('timing_flags', [])]}")
