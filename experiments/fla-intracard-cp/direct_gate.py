"""Runs the fla-intracard-cp gate's commands without densefeed, as densefeed would.

For each case of gates/fla-intracard-cp.yaml (defaults, grid, extra) and each
arm, it renders the gate's command template ({project}, {gate_dir},
{case.KEY}, {param.NAME}, {seed}, {out}), starts it as its own process with
DENSEFEED_MODE=gate, DENSEFEED_CASE, DENSEFEED_SEED and an empty
DENSEFEED_OUT, PYTHONPATH = densefeed.yaml's python.path + the folder of
densefeed_harness.py, and records its exit status, wall time and stderr.
compare_direct.py then compares what they wrote.

Arms:
  reference    the gate's reference command (fla-core 0.6.0, CP off)
  fla-VERSION  the gate's candidate command with param fla=VERSION (CP on)
controls (not part of the gate; for the tolerance's derivation):
  fp64         the reference's arguments, run by harness/fp64_reference.py (the recurrence in fp64)
  fla-VERSION-off  the candidate command with --intracard-cp off (unpartitioned VERSION)

    python3 direct_gate.py cases                       # the case grid, one line each
    python3 direct_gate.py run --work DIR --seed N --arms reference,fla-0.5.2,fla-0.6.0 [--jobs 1]
    python3 direct_gate.py run --work DIR --seed N --arms fla-0.5.2,fla-0.6.0 --mode bench --cases c06  # WORK/bench-ARM/
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
GATE = HERE / "gates" / "fla-intracard-cp.yaml"


def load_gate(path: Path = GATE) -> dict:
    with open(path) as f:
        return yaml.safe_load(f)


def expand_cases(gate: dict) -> list[dict]:
    """The gate's cases in order: every grid entry's cartesian product, then extra; defaults under each."""
    spec = gate["cases"]
    defaults = spec.get("defaults", {})
    out: list[dict] = []
    for entry in spec["grid"]:
        keys = list(entry)
        values = [v if isinstance(v, list) else [v] for v in entry.values()]
        for combo in itertools.product(*values):
            out.append({**defaults, **dict(zip(keys, combo))})
    for extra in spec.get("extra", []):
        out.append({**defaults, **extra})
    seen = set()
    unique = []
    for c in out:
        key = json.dumps(c, sort_keys=True)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


def case_id(i: int, case: dict) -> str:
    parts = [f"c{i:02d}", f"T{case['T']}", f"H{case['H']}", f"ms{case['max_splits']}", case["regime"]]
    if case.get("seq_lens"):
        parts.append("varlen")
    return "_".join(str(p) for p in parts)


def render(template: list[str], case: dict, params: dict, seed: int, out: Path, project: Path) -> list[str]:
    def one(s: str) -> str:
        s = s.replace("{project}", str(project)).replace("{gate_dir}", str(project / "gates"))
        s = s.replace("{seed}", str(seed)).replace("{out}", str(out))
        for k, v in case.items():
            s = s.replace("{case." + k + "}", str(v))
        for k, v in params.items():
            s = s.replace("{param." + k + "}", str(v))
        if "{" in s and "}" in s:
            raise ValueError(f"unrendered placeholder in {s!r}")
        return s
    argv = [one(s) for s in template]
    if argv[0] in ("python3", "python"):
        argv[0] = sys.executable  # densefeed.yaml: python.interpreter
    return argv


def arm_command(gate: dict, arm: str, case: dict, seed: int, out: Path, project: Path) -> list[str]:
    if arm == "reference":
        return render(gate["reference"]["command"], case, {}, seed, out, project)
    if arm == "fp64":
        argv = render(gate["reference"]["command"], case, {}, seed, out, project)
        argv[1] = str(project / "harness" / "fp64_reference.py")
        return argv
    if arm.startswith("fla-"):
        rest = arm[len("fla-"):]
        off = rest.endswith("-off")
        version = rest[: -len("-off")] if off else rest
        allowed = gate["params"]["fla"]["enum"]
        if version not in allowed:
            raise ValueError(f"arm {arm}: fla {version} is not one of the gate's {allowed}")
        argv = render(gate["candidate"]["command"], case, {"fla": version}, seed, out, project)
        return argv + (["--intracard-cp", "off"] if off else [])
    raise ValueError(f"unknown arm {arm!r}")


def harness_module_dir(project: Path) -> Path:
    env = os.environ.get("DENSEFEED_HARNESS_DIR")
    for d in ([Path(env)] if env else []) + [project.parent.parent / "kernels" / "python"]:
        if (d / "densefeed_harness.py").is_file():
            return d
    raise FileNotFoundError("densefeed_harness.py not found: set DENSEFEED_HARNESS_DIR")


def project_pythonpath(project: Path) -> list[str]:
    with open(project / "densefeed.yaml") as f:
        cfg = yaml.safe_load(f) or {}
    return [str(project / p) for p in cfg.get("python", {}).get("path", [])]


def run_one(gate, arm, i, case, seed, work: Path, project: Path, timeout_s: float, mode: str = "gate",
            iters: int = 10) -> dict:
    cid = case_id(i, case)
    folder = arm if mode == "gate" else f"{mode}-{arm}"
    out = work / folder / cid
    out.mkdir(parents=True, exist_ok=False)
    argv = arm_command(gate, arm, case, seed, out, project)
    env = dict(os.environ)
    env.update({"DENSEFEED_MODE": mode, "DENSEFEED_CASE": json.dumps(case), "DENSEFEED_SEED": str(seed),
                "DENSEFEED_OUT": str(out)})
    if mode == "bench":
        env.update({"DENSEFEED_WARMUP": str(gate.get("bench", {}).get("warmup", 1)), "DENSEFEED_ITERS": str(iters)})
    pp = project_pythonpath(project) + [str(harness_module_dir(project))]
    env["PYTHONPATH"] = os.pathsep.join(pp + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    logs = work / "logs" / folder
    logs.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(logs / f"{cid}.stderr", "wb") as err, open(logs / f"{cid}.stdout", "wb") as so:
        try:
            rc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=so, stderr=err, env=env, timeout=timeout_s,
                                cwd=str(out.parent)).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    wall = time.perf_counter() - t0
    info = None
    text = (logs / f"{cid}.stderr").read_text(errors="replace")
    for line in text.splitlines():
        if line.startswith("fla-intracard-cp: "):
            info = json.loads(line[len("fla-intracard-cp: "):])
    rec = {"arm": arm, "case_id": cid, "case": case, "argv": argv, "rc": rc, "wall_s": round(wall, 3), "info": info}
    if rc != 0:
        rec["stderr_tail"] = text[-3000:]
    (logs / f"{cid}.json").write_text(json.dumps(rec, indent=1))
    status = "ok" if rc == 0 else f"FAILED rc={rc}"
    print(f"  {folder:22s} {cid:40s} {wall:7.2f} s  {status}", flush=True)
    return rec


def cmd_run(a) -> int:
    gate = load_gate()
    cases = expand_cases(gate)
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    arms = [x for x in a.arms.split(",") if x]
    pick = [x for x in (a.cases or "").split(",") if x]
    jobs = [(arm, i, c) for arm in arms for i, c in enumerate(cases)
            if not pick or any(case_id(i, c).startswith(x) for x in pick)]
    timeout_s = float(gate.get("timeout_s", 600))
    t0 = time.perf_counter()
    print(f"direct {a.mode} run: {len(jobs)} processes ({len(cases)} cases in the gate) x arms {arms}, seed {a.seed}, "
          f"{a.jobs} at a time", flush=True)
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        recs = list(pool.map(lambda j: run_one(gate, j[0], j[1], j[2], a.seed, work, HERE, timeout_s, a.mode, a.iters), jobs))
    wall = time.perf_counter() - t0
    summary = {"seed": a.seed, "mode": a.mode, "arms": arms, "jobs": a.jobs, "wall_s": round(wall, 3),
               "per_arm_s": {arm: round(sum(r["wall_s"] for r in recs if r["arm"] == arm), 3) for arm in arms},
               "failed": [f"{r['arm']}/{r['case_id']}" for r in recs if r["rc"] != 0]}
    name = a.label or "run"
    (work / f"{name}.json").write_text(json.dumps({"summary": summary, "runs": recs}, indent=1))
    print(f"direct gate run '{name}': wall {wall:.1f} s; process time per arm "
          + ", ".join(f"{k} {v:.1f} s" for k, v in summary["per_arm_s"].items())
          + (f"; FAILED: {summary['failed']}" if summary["failed"] else ""), flush=True)
    for r in recs:
        if r["rc"] != 0:
            print(f"--- {r['arm']}/{r['case_id']} rc={r['rc']}\n{r.get('stderr_tail', '')}", flush=True)
    return 1 if summary["failed"] else 0


def cmd_cases(a) -> int:
    for i, c in enumerate(expand_cases(load_gate())):
        print(case_id(i, c), json.dumps(c))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--work", required=True)
    r.add_argument("--seed", type=int, required=True)
    r.add_argument("--arms", default="reference,fla-0.5.2,fla-0.6.0")
    r.add_argument("--jobs", type=int, default=1)
    r.add_argument("--label", default=None, help="name of the summary file (WORK/LABEL.json)")
    r.add_argument("--mode", choices=["gate", "bench"], default="gate")
    r.add_argument("--iters", type=int, default=10, help="bench: DENSEFEED_ITERS")
    r.add_argument("--cases", default=None, help="comma-separated case id prefixes (c06,c09); default all")
    sub.add_parser("cases")
    a = p.parse_args(argv)
    return cmd_run(a) if a.cmd == "run" else cmd_cases(a)


if __name__ == "__main__":
    sys.exit(main())
