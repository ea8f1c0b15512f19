#!/usr/bin/env python3
"""Issue 17: the bundled gates (kda-decode, cp-affine-chain, kv-overlap) with
their harnesses serving sessions, against the same gates run one process per
case. Prints figures; asserts nothing about time.

    tests/perf/bundled_sessions.py [--densefeed build/bin/densefeed]
        [--bin build/bin] [--device cpu|cuda] [--profile quick] [--jobs 2]
        [--repeat 3] [--sandbox on|off|both] [--gates kda-decode,...]

A scratch project (no git: --trust-worktree) holds densefeed's gates and the
files they freeze, and beside each gate G a copy G-process that differs only
in protocol: process and commands that take the case as arguments (the
commands the bundled gates had before they served sessions). Each (gate,
protocol, sandbox) is run --repeat times, gate stage only (--no-bench: the
bundled benchmarks are timed by their trusted drivers, one process per
round); a table gives the median wall time to verdict and the time
sessions save per case. --device cuda
runs kda-decode and cp-affine-chain on their CUDA paths (a CUDA build; the
H200 via tools/device_bundle.sh).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The one-process-per-case commands (the bundled gates' own until they served
# sessions): the case, seed and output folder as arguments.
PROCESS_COMMANDS = {
    "kda-decode": (
        '[kda_decode_reference, --batch, "{case.batch}", --heads, "{case.H}", --dim, "{case.D}", '
        '--seed, "{seed}", --out, "{out}"]',
        '[kda_decode, --version, "{param.version}", --device, "{param.device}", --batch, "{case.batch}", '
        '--heads, "{case.H}", --dim, "{case.D}", --seed, "{seed}", --out, "{out}"]'),
    "cp-affine-chain": (
        '[affine_chain_reference, --T, "{case.T}", --seq-lens, "{case.seq_lens}", --heads, "{case.H}", '
        '--dim-k, "{case.K}", --dim-v, "{case.V}", --regime, "{case.regime}", --seed, "{seed}", --out, "{out}"]',
        '[affine_chain, --path, partitioned, --precision, "{param.precision}", --shards, "{case.shards}", '
        '--T, "{case.T}", --seq-lens, "{case.seq_lens}", --heads, "{case.H}", --dim-k, "{case.K}", '
        '--dim-v, "{case.V}", --regime, "{case.regime}", --seed, "{seed}", --out, "{out}", --device, "{param.device}"]'),
    "kv-overlap": (
        '[kv_overlap_reference, --chunks, "{case.chunks}", --chunk-elems, "{case.chunk_elems}", '
        '--seed, "{seed}", --out, "{out}"]',
        '[kv_overlap, --variant, "{param.variant}", --chunks, "{case.chunks}", --chunk-elems, "{case.chunk_elems}", '
        '--steps, "{case.steps}", --step-us, "{case.step_us}", --host-us, "{case.host_us}", '
        '--switch-steps, "{case.switch_steps}", --chunk-us, "{case.chunk_us}", --submit-us, "{case.submit_us}", '
        '--window, "{case.window}", --seed, "{seed}", --out, "{out}"]'),
}


HARNESSES = ["kda_decode", "kda_decode_reference", "affine_chain", "affine_chain_reference", "kv_overlap",
             "kv_overlap_reference"]


def arms(gate, device):
    """(candidate params, base params) of the gate's example experiment."""
    if gate == "kda-decode":
        return {"version": "v3", "device": device}, {"version": "v0", "device": device}
    if gate == "cp-affine-chain":
        return {"precision": "tf32x3", "device": device}, {"precision": "ieee", "device": device}
    return {"variant": "release"}, {"variant": "hold"}


def process_variant(text, gate):
    """The gate's text as a one-process-per-case gate named GATE-process."""
    ref, cand = PROCESS_COMMANDS[gate]
    out = text.replace(f"gate: {gate}\n", f"gate: {gate}-process\n", 1)
    out = out.replace("protocol: session\n", "protocol: process\n", 1)
    out = re.sub(r"\n  case_keys: \[[^\]]*\]\n", "\n", out, count=1)
    out = re.sub(r"(\nreference:\n(?:  #[^\n]*\n)*)  command: \[[^\]]*\]\n", lambda m: m.group(1) + f"  command: {ref}\n",
                 out, count=1)
    out = re.sub(r"(\ncandidate:\n(?:  #[^\n]*\n)*)  command: \[[^\]]*\]\n", lambda m: m.group(1) + f"  command: {cand}\n",
                 out, count=1)
    assert "protocol: process" in out and ref in out and cand in out, gate
    return out


def scratch_project(dest, bin_dir, gates, densefeed):
    os.makedirs(os.path.join(dest, "gates"))
    os.makedirs(os.path.join(dest, "experiments"))
    # harness_path is inside the project: a copy of the gates' harnesses.
    os.makedirs(os.path.join(dest, "bin"))
    for exe in HARNESSES:
        shutil.copy2(os.path.join(bin_dir, exe), os.path.join(dest, "bin", exe))
    with open(os.path.join(dest, "densefeed.yaml"), "w") as f:
        f.write("gates: gates\nexperiments: experiments\nledger: .densefeed/ledger.db\nharness_path: [bin]\n")
    for gate in gates:
        text = open(os.path.join(ROOT, "gates", gate + ".yaml")).read()
        for name, body in ((gate, text), (gate + "-process", process_variant(text, gate))):
            open(os.path.join(dest, "gates", name + ".yaml"), "w").write(body)
        frozen = re.findall(r"^  - (kernels/\S+)", text.split("\nfreezes:", 1)[1], re.M)
        for rel in frozen:
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copy(os.path.join(ROOT, rel), os.path.join(dest, rel))
    for gate in gates:
        for name in (gate, gate + "-process"):
            subprocess.run([densefeed, "--project", dest, "--trust-worktree", "gate", "lock", name], check=True,
                           stdout=subprocess.DEVNULL)


def run(densefeed, project, gate, device, profile, jobs, sandbox, n):
    cand, base = arms(gate.replace("-process", ""), device)
    manifest = os.path.join(project, "experiments", f"{gate}-{n}.yaml")
    with open(manifest, "w") as f:
        f.write(f"experiment: {gate}-{n}\nhypothesis: h\npredicted_effect: p\ngate: {gate}\n"
                f"candidate: {{revision: WORKTREE, params: {json.dumps(cand)}}}\n"
                f"base: {{revision: WORKTREE, params: {json.dumps(base)}}}\n")
    argv = [densefeed, "--project", project, "--trust-worktree", "run", manifest, "--profile", profile, "--jobs", str(jobs),
            "--no-bench", "--json", "--ledger", os.path.join(project, "ledger.db")]
    if sandbox == "off":
        argv.append("--no-sandbox")
    t = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - t
    try:
        d = json.loads(p.stdout)
        g = d["stages"]["gate"]
        cases = g.get("cases", [])
    except (ValueError, KeyError) as e:
        sys.exit(f"{gate}: no report ({e}): {p.stdout[-800:]} {p.stderr[-800:]}")
    if d["stages"]["gate"]["verdict"] != "green":
        sys.exit(f"{gate}: gate {g['verdict']}: {g.get('reason', '')[:600]}")
    if gate.endswith("-process") == any(c.get("candidate_session") for c in cases):
        sys.exit(f"{gate}: the cases were not run as its protocol says")
    return wall, len(cases)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--densefeed", default=os.path.join(ROOT, "build", "bin", "densefeed"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="the bundled harnesses")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sandbox", default="both", choices=["on", "off", "both"])
    ap.add_argument("--gates", default="kda-decode,cp-affine-chain,kv-overlap")
    a = ap.parse_args()
    gates = a.gates.split(",")
    densefeed = os.path.abspath(a.densefeed)
    project = tempfile.mkdtemp(prefix="df-bundled-sessions-")
    scratch_project(project, os.path.abspath(a.bin), gates, densefeed)
    sandboxes = ["on", "off"] if a.sandbox == "both" else [a.sandbox]
    print(f"# bundled gates, profile {a.profile}, --jobs {a.jobs}, device {a.device}, {a.repeat} runs each, "
          f"gate stage only; {os.cpu_count()} CPUs")
    print("| gate | sandbox | protocol | cases | wall s (median, min..max) | saved by sessions per case, ms |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    n = 0
    for gate in gates:
        for sandbox in sandboxes:
            walls = {}
            for variant in (gate, gate + "-process"):
                runs = []
                for _ in range(a.repeat):
                    n += 1
                    runs.append(run(densefeed, project, variant, a.device, a.profile, a.jobs, sandbox, n))
                walls[variant] = [r[0] for r in runs]
                cases = runs[-1][1]
                med = statistics.median(walls[variant])
                saved = ""
                if variant.endswith("-process"):
                    saved = f"{(med - statistics.median(walls[gate])) / cases * 1e3:.1f}"
                print(f"| {gate} | {sandbox} | {'process' if variant.endswith('-process') else 'session'} | {cases} | "
                      f"{med:.2f} ({min(walls[variant]):.2f}..{max(walls[variant]):.2f}) | {saved} |", flush=True)
    shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    main()
