#!/usr/bin/env python3
"""What the Slurm executor costs against the local one, on the same machine.

Prints (asserts nothing):
  1. time to verdict of densefeed's CP example (the tf32 experiment, profile
     quick, --no-bench) with --executor local and --executor slurm;
  2. per-case overhead of a Slurm job: a gate of N trivial cases (a Python
     harness that writes one small array; reference and candidate are one job
     each) for N = 10, 50, 200, local and Slurm, wall time and
     (slurm - local) / N.
The Slurm cluster is tests/support/slurm/slurm_cluster.sh's (started here if
it is not running); its CPUs bound how many jobs run at once
(DENSEFEED_SLURM_CPUS when the cluster was started).

usage: tests/perf/slurm_overhead.py [--build build] [--cases 10,50,200] [--runs 1]
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
parser.add_argument("--cases", default="10,50,200")
parser.add_argument("--runs", type=int, default=1)
args = parser.parse_args()
exe = os.path.join(args.build, "bin", "densefeed")

started = subprocess.run(["bash", os.path.join(root, "tests", "support", "slurm", "slurm_cluster.sh"), "start"],
                         check=True, capture_output=True, text=True).stdout
conf = [l for l in started.splitlines() if l.startswith("SLURM_CONF=")][0].split("=", 1)[1]
env = {**os.environ, "SLURM_CONF": conf, "DENSEFEED_SLURM_POLL_S": "0.1"}
cpus = subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True, env=env).stdout.strip()
gpus = subprocess.run(["sinfo", "-h", "-o", "%G"], capture_output=True, text=True, env=env).stdout.strip()
print(f"cluster: {conf}, node CPUs {cpus}, GRES {gpus}; this machine: {os.cpu_count()} cores")


def timed(argv, cwd):
    t = time.perf_counter()
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr[-2000:]}")
    return wall, doc


with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
    print("\n1. CP example (cp-affine-chain-tf32, profile quick, --no-bench), time to verdict")
    print(f"{'executor':>9} {'run':>3} {'wall s':>7} {'verdict':>7} {'cases':>5}")
    for executor in ("local", "slurm"):
        for i in range(args.runs):
            wall, doc = timed([exe, "--project", root, "--trust-worktree", "run",
                               os.path.join(root, "experiments", "cp-affine-chain-tf32.yaml"), "--no-bench", "--json",
                               "--ledger", os.path.join(tmp, f"cp-{executor}-{i}.db"), "--executor", executor], tmp)
            print(f"{executor:>9} {i:>3} {wall:>7.1f} {doc['verdict']:>7} {len(doc['stages']['gate']['cases']):>5}")

    print("\n2. a gate of N trivial cases (reference + candidate: 2 jobs per case under Slurm)")
    project = os.path.join(tmp, "project")
    os.makedirs(os.path.join(project, "gates"))
    open(os.path.join(project, "h.py"), "w").write(textwrap.dedent("""\
        import os, numpy as np
        np.save(os.path.join(os.environ['DENSEFEED_OUT'], 'y.npy'), np.arange(8.0))
        """))
    open(os.path.join(project, "densefeed.yaml"), "w").write("gates: gates\nexperiments: experiments\nledger: .densefeed/ledger.db\n")
    open(os.path.join(project, ".gitignore"), "w").write(".densefeed/\n")
    counts = [int(n) for n in args.cases.split(",")]
    for n in counts:
        open(os.path.join(project, "gates", f"n{n}.yaml"), "w").write(textwrap.dedent(f"""\
            gate: n{n}
            description: {n} trivial cases
            reference: {{command: [python3, "{{project}}/h.py", --k, "{{case.k}}"]}}
            candidate: {{command: [python3, "{{project}}/h.py", --k, "{{case.k}}", --tag, "{{param.tag}}"]}}
            params: {{tag: {{type: string, default: base}}}}
            outputs: {{y: {{dtype: float64, tolerance: {{rel_l2: 1.0e-12}}}}}}
            cases: {{grid: [{{k: [{", ".join(str(k) for k in range(n))}]}}]}}
            profiles: {{quick: {{}}, full: {{}}}}
            freezes: [h.py]
            """))
        open(os.path.join(project, f"n{n}.yaml"), "w").write(
            f"experiment: n{n}\nhypothesis: h\npredicted_effect: p\ngate: n{n}\ncandidate: {{revision: WORKTREE, params: {{tag: cand}}}}\nbase: {{revision: WORKTREE}}\n")
    open(os.path.join(project, "gates", "gates.lock"), "w").write("")
    git = ["git", "-C", project, "-c", "user.name=perf", "-c", "user.email=p@e"]
    subprocess.run(git[:3] + ["init", "-q", "-b", "main"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "gates"], check=True)
    subprocess.run([exe, "gate", "lock"], cwd=project, env=env, check=True, capture_output=True)
    subprocess.run(git + ["commit", "-qam", "lock"], check=True)
    print(f"{'cases':>5} {'local s':>8} {'slurm s':>8} {'(slurm-local)/case s':>21} {'jobs/s':>7}")
    for n in counts:
        walls = {}
        for executor in ("local", "slurm"):
            wall, doc = timed([exe, "run", f"n{n}.yaml", "--no-bench", "--json", "--executor", executor], project)
            if doc.get("verdict") != "green":
                raise SystemExit(f"n{n} with --executor {executor}: {json.dumps(doc)[:2000]}")
            walls[executor] = wall
        print(f"{n:>5} {walls['local']:>8.1f} {walls['slurm']:>8.1f} {(walls['slurm'] - walls['local']) / n:>21.3f} "
              f"{2 * n / walls['slurm']:>7.1f}")
