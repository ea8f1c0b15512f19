#!/usr/bin/env python3
"""How often densefeed's benchmark reaches the right verdict, and how long it
takes (issue 29, "Benchmarks that conclude": measured, not asserted).

This is a benchmark, not a test: it prints figures and a pass/fail line per
target, and always exits 0 once it has measured (2 on bad usage, 3 when it
cannot set up). Runs are sequential on purpose (a second run beside one is a
load condition of its own).

What it does, end to end through the real CLI:
  1. makes a throwaway project (a git repository of its own, not densefeed's)
     in a temp folder: densefeed.yaml, a locked gate `busy` and three
     manifests. The kernel is a small C program (compiled once with cc; the
     trusted ref's copy is built by the gate's `build`) whose bench iteration
     is a deterministic integer busy loop of about --iter-ms ms (its size is
     probed on this machine first); its output depends on the seed only, so
     every work amount passes the gate. The gate has one tiny correctness case
     (n=8) and one bench case (n=64); the harness times itself (no driver:
     "timed by the candidate", so a `faster` also needs densefeed's wall-time
     fit to agree). Base and candidate are the WORKTREE, differing only in
     params, so no run builds anything:
        aa    candidate == base (the work; only a `tag` that changes nothing
              differs: densefeed refuses a base identical to its candidate)
        1.5x  candidate does work / 1.5
        1.1x  candidate does work / 1.1
  2. for each load condition (`none`; `burn2`: two `while True: pass` Python
     processes beside it for the whole condition, killed afterwards):
     `densefeed bench calibrate busy --comparisons K` in that condition (so the
     noise threshold of later verdicts is this machine's under that load; its
     time and the floor it recorded are printed), then for each scenario N
     runs of `densefeed run MANIFEST --json --seed S` (S = --seed + run index,
     the same seeds in every scenario and load), reading the bench case's
     verdict, reason, rounds, speedup and interval, the bench stage's wall
     time (time to verdict) and the whole run's wall time.
  3. prints a markdown table per load and scenario (verdict counts and rates,
     median and p90 time to verdict, median rounds, median run time), the
     targets' pass/fail, and why runs missed their target (reasons with the
     numbers blanked, counted); writes every run's raw row as JSON to --out
     (default TEMP/verdict-rates.json, kept even without --keep) so tables
     before and after a change can be compared.

Targets (issue 29):
  aa    `same` in >= 95 % of runs
  1.5x  `faster` in >= 95 % of runs
  1.1x  never `slower`
With small --runs the rates say little; the default 40 is meant for the tables.

Run it:
  /usr/bin/python3 tests/perf/bench_verdict_rates.py --densefeed build/bin/densefeed
  /usr/bin/python3 tests/perf/bench_verdict_rates.py --densefeed /tmp/densefeed-before --runs 3 --loads none
Options: --densefeed PATH (default: densefeed on PATH), --runs N (40),
--loads none,burn2, --scenarios aa,1.5x,1.1x, --comparisons K (20),
--iter-ms MS (2.5), --iters N (8, timed iterations per harness run),
--seed S (1), --out FILE, --keep (keep the temp project), --data DIR.
A densefeed binary needs its data folder (schemas, the Python harness
module) at BIN/../share/densefeed; a bare copy of the binary (such as
/tmp/densefeed-before) is staged in the temp folder beside a copy of
--data (default: this checkout's build/share/densefeed).
The sandbox is used when bwrap can start, else every run and the table say
`--no-sandbox` (`bench calibrate` has no such flag: it needs bwrap).
Stdlib only. With the defaults, about 20-25 minutes on a 2-core machine (runs of
1.5 to 4 s unloaded and about 7 s under burn2, where every round goes to 25).
"""
import argparse
import collections
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Speaks densefeed's harness protocol, one process per case. Bench mode times
# each of DENSEFEED_ITERS iterations of spin() with CLOCK_MONOTONIC after
# DENSEFEED_WARMUP untimed ones. The multiply-add-xorshift chain is serial
# (each step needs the last), so its time is work / work_divisor steps of
# the core's latency, steady from run to run; its result goes to a volatile
# sink so the compiler keeps it. y.npy (float64, n) comes from the seed alone.
BUSY_C = r"""
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile uint64_t sink;

static uint64_t spin(uint64_t n, uint64_t x) {
  for (uint64_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    x ^= x >> 29;
  }
  return x;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static uint64_t splitmix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static const char* env(const char* name) {
  const char* v = getenv(name);
  if (!v || !*v) { fprintf(stderr, "busy: %s is not set\n", name); exit(2); }
  return v;
}

static void write_y(const char* out, uint64_t seed, long n) {
  char path[4096], header[128];
  snprintf(path, sizeof path, "%s/y.npy", out);
  FILE* f = fopen(path, "wb");
  if (!f) { perror(path); exit(2); }
  int len = snprintf(header, sizeof header, "{'descr': '<f8', 'fortran_order': False, 'shape': (%ld,), }", n);
  int pad = (64 - (10 + len + 1) % 64) % 64;  /* NPY 1.0: magic, version, length, header to a multiple of 64 */
  unsigned short header_len = (unsigned short)(len + pad + 1);
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fputc(header_len & 0xff, f);
  fputc(header_len >> 8, f);
  fwrite(header, 1, (size_t)len, f);
  for (int i = 0; i < pad; ++i) fputc(' ', f);
  fputc('\n', f);
  for (long i = 0; i < n; ++i) {
    double v = (double)(splitmix(seed ^ ((uint64_t)i * 0x100000001b3ULL)) >> 11) * 0x1.0p-53;
    fwrite(&v, sizeof v, 1, f);
  }
  if (fclose(f)) { perror(path); exit(2); }
}

int main(int argc, char** argv) {
  long n = 0;
  double work = 0, divisor = 1;
  const char* role = "candidate";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--n")) n = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--work")) work = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--work-divisor")) divisor = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--role")) role = argv[i + 1];
    else if (strcmp(argv[i], "--tag")) { fprintf(stderr, "busy: unknown flag %s\n", argv[i]); return 2; }
  }
  if (divisor <= 0) { fprintf(stderr, "busy: --work-divisor must be positive\n"); return 2; }
  const uint64_t steps = (uint64_t)(work / divisor + 0.5);
  if (!strcmp(role, "probe")) {  /* ms for `work` steps: the fastest of 5 */
    double best = 1e300;
    for (int k = 0; k < 5; ++k) {
      double t = now_ms();
      sink = spin(steps, (uint64_t)k);
      t = now_ms() - t;
      if (t < best) best = t;
    }
    printf("%.6f\n", best);
    return 0;
  }
  const char* mode = env("DENSEFEED_MODE");
  const char* out = env("DENSEFEED_OUT");
  const uint64_t seed = strtoull(env("DENSEFEED_SEED"), NULL, 10);
  if (n <= 0) { fprintf(stderr, "busy: --n must be positive\n"); return 2; }
  if (!strcmp(role, "candidate") && !strcmp(mode, "bench")) {
    const long warmup = atol(env("DENSEFEED_WARMUP")), iters = atol(env("DENSEFEED_ITERS"));
    char path[4096];
    snprintf(path, sizeof path, "%s/samples.json", out);
    FILE* f = fopen(path, "w");
    if (!f) { perror(path); return 2; }
    for (long k = 0; k < warmup; ++k) sink = spin(steps, seed + (uint64_t)k);
    fputs("{\"unit\": \"ms\", \"samples\": [", f);
    for (long k = 0; k < iters; ++k) {
      const double t = now_ms();
      sink = spin(steps, seed + (uint64_t)k);
      fprintf(f, "%s%.6f", k ? ", " : "", now_ms() - t);
    }
    fputs("]}\n", f);
    if (fclose(f)) { perror(path); return 2; }
  } else if (!strcmp(role, "candidate")) {
    sink = spin(steps, seed);
  }
  write_y(out, seed, n);
  return 0;
}
"""

GATE_YAML = """\
gate: busy
description: >
  A deterministic CPU busy loop (tests/perf/bench_verdict_rates.py): its
  outputs depend on the seed only, so every work amount is green; the bench
  case times work / work_divisor serial steps per iteration.
reference:
  command: [busy, --role, reference, --n, "{{case.n}}"]
candidate:
  command: [busy, --role, candidate, --n, "{{case.n}}", --work, "{{case.work}}",
            --work-divisor, "{{param.work_divisor}}", --tag, "{{param.tag}}"]
params:
  work_divisor:
    type: number
    default: 1
    description: the candidate does work / work_divisor steps per iteration
  tag:
    type: string
    default: base
    description: a label that changes nothing (an A/A experiment needs a base that differs from its candidate)
outputs:
  y:
    dtype: float64
    shape: ["{{case.n}}"]
    tolerance: {{max_abs: 0}}
cases:
  defaults: {{work: {work}}}   # steps of about {iter_ms} ms on the machine that wrote this gate
  grid:
    - n: [8, 64]
profiles:
  quick: {{}}
  full: {{}}
timeout_s: 120
bench:
  warmup: 1
  iters: {iters}
  max_seconds_per_case: 120
  cases: [{{n: 64}}]
build:
  commands: [[cc, -O2, -o, "{{build}}/busy", "{{src}}/src/busy.c"]]
  bin: "{{build}}"
freezes: [src/busy.c]
"""

SCENARIOS = {
    # name: (candidate params, target verdict test, target text)
    "aa": ({"work_divisor": 1, "tag": "candidate"}, "same"),
    "1.5x": ({"work_divisor": 1.5}, "faster"),
    "1.1x": ({"work_divisor": 1.1}, "not-slower"),
}
TARGET_TEXT = {"same": "same >= 95%", "faster": "faster >= 95%", "not-slower": "slower = 0"}
VERDICTS = ("faster", "same", "slower", "inconclusive")
LOADS = ("none", "burn2")
BURN = "while True: pass"


def fail(msg, code=3):
    print(f"bench_verdict_rates: {msg}", file=sys.stderr)
    sys.exit(code)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--densefeed", default="densefeed", help="the densefeed binary (default: densefeed on PATH)")
    p.add_argument("--runs", type=int, default=40, help="runs per load and scenario (default 40)")
    p.add_argument("--loads", default="none,burn2", help="comma-separated: none, burn2")
    p.add_argument("--scenarios", default="aa,1.5x,1.1x", help="comma-separated: aa, 1.5x, 1.1x")
    p.add_argument("--comparisons", type=int, default=20, help="A/A comparisons of each bench calibrate (default 20)")
    p.add_argument("--iter-ms", type=float, default=2.5, help="target time of one bench iteration, ms (default 2.5)")
    p.add_argument("--iters", type=int, default=8, help="timed iterations per harness run (gate bench.iters, default 8)")
    p.add_argument("--seed", type=int, default=1, help="seed of run 0; run i gets seed + i (default 1)")
    p.add_argument("--out", help="raw per-run rows as JSON (default TEMP/verdict-rates.json)")
    p.add_argument("--keep", action="store_true", help="keep the temp project (ledger, run folders)")
    p.add_argument("--data", default=os.path.join(ROOT, "build", "share", "densefeed"),
                   help="data folder to stage beside a binary that has none (default: this checkout's build/share/densefeed)")
    a = p.parse_args()
    a.loads = [x for x in a.loads.split(",") if x]
    a.scenarios = [x for x in a.scenarios.split(",") if x]
    for x in a.loads:
        if x not in LOADS:
            p.error(f"--loads: unknown load '{x}' (known: {', '.join(LOADS)})")
    for x in a.scenarios:
        if x not in SCENARIOS:
            p.error(f"--scenarios: unknown scenario '{x}' (known: {', '.join(SCENARIOS)})")
    if a.runs < 1 or a.comparisons < 1 or a.iters < 1 or a.iter_ms <= 0:
        p.error("--runs, --comparisons and --iters must be >= 1, --iter-ms > 0")
    return a


def stage_densefeed(path, data, temp):
    """The binary to run: PATH itself when its data folder is beside it, else
    a copy in TEMP/densefeed/bin with --data copied to TEMP/densefeed/share
    (densefeed finds its data from /proc/self/exe, so a symlink would not do)."""
    exe = shutil.which(path) if os.sep not in path else os.path.abspath(path)
    if not exe or not os.access(exe, os.X_OK):
        fail(f"no densefeed binary at '{path}' (give --densefeed PATH)", 2)
    exe = os.path.realpath(exe)
    if os.path.isdir(os.path.join(os.path.dirname(exe), "..", "share", "densefeed", "schemas")):
        return exe, None
    if not os.path.isdir(os.path.join(data, "schemas")):
        fail(f"{exe} has no data folder beside it (../share/densefeed) and --data {data} holds no schemas/", 2)
    prefix = os.path.join(temp, "densefeed")
    os.makedirs(os.path.join(prefix, "bin"))
    shutil.copy2(exe, os.path.join(prefix, "bin", "densefeed"))
    shutil.copytree(data, os.path.join(prefix, "share", "densefeed"), symlinks=True)
    return os.path.join(prefix, "bin", "densefeed"), f"{exe} has no data folder beside it: staged a copy with {data}"


def sandbox_flags(env):
    """[] when bwrap can start here (densefeed's sandbox), else ['--no-sandbox']."""
    bwrap = shutil.which("bwrap", path=env["PATH"])
    if bwrap:
        probe = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                "--unshare-all", "--die-with-parent", "true"], capture_output=True, env=env)
        if probe.returncode == 0:
            return []
    return ["--no-sandbox"]


def sh(cmd, cwd, env, check=True):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check and r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip() or r.stdout.strip()}")
    return r


def make_project(project, exe, env, a):
    """The throwaway project: returns (work steps, ms per iteration probed)."""
    for d in ("gates", "src", "bin", "experiments"):
        os.makedirs(os.path.join(project, d))
    with open(os.path.join(project, "src", "busy.c"), "w") as f:
        f.write(BUSY_C)
    busy = os.path.join(project, "bin", "busy")
    sh(["cc", "-O2", "-Wall", "-o", busy, os.path.join(project, "src", "busy.c")], project, env)
    probe_steps = 1_000_000
    ms = min(float(sh([busy, "--role", "probe", "--work", str(probe_steps)], project, env).stdout) for _ in range(3))
    work = max(1000, int(round(a.iter_ms / ms * probe_steps)))
    with open(os.path.join(project, "densefeed.yaml"), "w") as f:
        f.write("# written by tests/perf/bench_verdict_rates.py\ngates: gates\nexperiments: experiments\n"
                "ledger: .densefeed/ledger.db\ntrusted_ref: main\n"
                "harness_path: [bin]   # the WORKTREE arms' busy (compiled by the script, not committed)\n")
    with open(os.path.join(project, ".gitignore"), "w") as f:
        f.write(".densefeed/\nbin/\n")
    with open(os.path.join(project, "gates", "busy.yaml"), "w") as f:
        f.write(GATE_YAML.format(work=work, iter_ms=a.iter_ms, iters=a.iters))
    open(os.path.join(project, "gates", "gates.lock"), "w").close()
    for name, (params, target) in SCENARIOS.items():
        cand = ", ".join(f"{k}: {v}" for k, v in params.items())
        with open(os.path.join(project, "experiments", f"{name}.yaml"), "w") as f:
            f.write(textwrap.dedent(f"""\
                experiment: verdict-{name}
                author: tests/perf/bench_verdict_rates.py
                hypothesis: the candidate runs {'the same work' if name == 'aa' else f'work / {params["work_divisor"]}'}
                predicted_effect: {TARGET_TEXT[target]} of runs
                gate: busy
                candidate: {{revision: WORKTREE, params: {{{cand}}}}}
                base: {{revision: WORKTREE, params: {{work_divisor: 1}}}}
                """))
    git = ["git", "-c", "user.name=bench_verdict_rates", "-c", "user.email=perf@densefeed.invalid", "-c", "commit.gpgsign=false"]
    sh(["git", "init", "-q", "-b", "main"], project, env)
    sh(git + ["add", "-A"], project, env)
    sh(git + ["commit", "-qm", "busy gate"], project, env)
    sh([exe, "gate", "lock"], project, env)
    sh(git + ["add", "gates/gates.lock"], project, env)
    sh(git + ["commit", "-qm", "lock the busy gate"], project, env)
    return work, ms * work / probe_steps


class Burners:
    """`count` CPU-burning Python processes, each in its own process group,
    ended (by their own pids) when the block ends."""

    def __init__(self, count):
        self.count, self.procs = count, []

    def __enter__(self):
        for _ in range(self.count):
            self.procs.append(subprocess.Popen([sys.executable, "-c", BURN], start_new_session=True,
                                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
        if self.procs:
            time.sleep(1.0)  # let the scheduler see them before anything is timed
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        self.procs = []


def calibrate(exe, project, env, a):
    t0 = time.monotonic()
    r = sh([exe, "bench", "calibrate", "busy", "--comparisons", str(a.comparisons), "--json"], project, env, check=False)
    wall = time.monotonic() - t0
    row = {"wall_s": wall, "exit_code": r.returncode}
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        doc = {}
    if r.returncode != 0 or "cases" not in doc:
        row["error"] = (r.stderr.strip() or r.stdout.strip())[-2000:]
        return row
    case = doc["cases"][0]
    row.update(noise_floor=case["noise_floor"], false_verdict_rate=case["false_verdict_rate"],
               verdicts=dict(collections.Counter(c["verdict"] for c in case["comparisons"])),
               speedups=[c["speedup"] for c in case["comparisons"]])
    return row


def run_one(exe, project, env, scenario, seed, flags):
    """One `densefeed run --json`: the raw row of this run."""
    cmd = [exe, "run", os.path.join("experiments", f"{scenario}.yaml"), "--json", "--seed", str(seed)] + flags
    load1 = os.getloadavg()[0]
    t0 = time.monotonic()
    r = sh(cmd, project, env, check=False)
    row = {"seed": seed, "exit_code": r.returncode, "run_wall_s": time.monotonic() - t0, "loadavg_1m_before": load1}
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        row.update(verdict="error", reason=f"no JSON on stdout (exit {r.returncode}): {r.stderr.strip()[-500:]}")
        return row
    record_stages = (doc.get("record") or {}).get("stages") or {}
    bench_stage = (doc.get("stages") or {}).get("bench") or {}
    cases = bench_stage.get("cases") or []
    row.update(experiment_id=doc.get("experiment_id"), run_verdict=doc.get("verdict"),
               densefeed_wall_s=doc.get("wall_s"),
               gate_wall_s=(record_stages.get("gate") or {}).get("wall_s"),
               bench_wall_s=(record_stages.get("bench") or {}).get("wall_s"),
               bench_stage_verdict=bench_stage.get("verdict"), bench_stage_reason=bench_stage.get("reason"),
               sandbox=(doc.get("sandbox") or {}).get("text"))
    if not cases:
        row.update(verdict="error", reason=doc.get("reason") or doc.get("error") or bench_stage.get("reason") or "no bench case")
        return row
    c = cases[0]
    ci = c.get("speedup_ci") or [None, None]
    row.update(verdict=c.get("verdict"), reason=c.get("reason"), rounds=c.get("rounds"), speedup=c.get("speedup"),
               speedup_lo=ci[0], speedup_hi=ci[1], p_value=c.get("p_value"), threshold=c.get("threshold"),
               calibrated_floor=c.get("calibrated_floor"), capped=c.get("capped"), guards=c.get("guards"),
               timing_flags=[f.get("kind") if isinstance(f, dict) else f for f in c.get("timing_flags") or []],
               timing_flag_reasons=[f.get("reason") for f in c.get("timing_flags") or [] if isinstance(f, dict)],
               base_median_ms=c.get("base_median"),
               candidate_median_ms=c.get("candidate_median"), base_relative_spread=c.get("base_relative_spread"),
               candidate_relative_spread=c.get("candidate_relative_spread"),
               wall_fit=(c.get("timing_checks") or {}).get("wall_fit"))
    return row


def quantile(xs, q):
    """Type-7 quantile (numpy's default) of a non-empty list."""
    xs = sorted(xs)
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    return xs[lo] + (h - lo) * (xs[min(lo + 1, len(xs) - 1)] - xs[lo])


def met(target, counts, n):
    if target == "not-slower":
        return counts["slower"] == 0
    return counts[target] >= 0.95 * n


def fmt_s(x):
    return "-" if x is None else f"{x:.2f}"


def shape_of(reason):
    """A reason with its numbers blanked, so that runs that missed for the same cause count together."""
    return re.sub(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?", "#", reason or "")[:220]


def print_tables(meta, calibrations, rows, a):
    print(f"\n## densefeed benchmark verdict rates ({meta['densefeed_version']})\n")
    print(f"host {meta['host']}, {meta['cpus']} CPUs; busy loop {meta['work_steps']} steps = {meta['iter_ms_probed']:.2f} ms "
          f"per iteration (probed), bench warmup 1 + iters {a.iters}; sandbox: {meta['sandbox']}; "
          f"seeds {a.seed}..{a.seed + a.runs - 1}")
    if meta.get("staged"):
        print(f"note: {meta['staged']}")
    print("\n| load | calibrate (s) | comparisons | verdicts | floor recorded | false verdicts |")
    print("| --- | --- | --- | --- | --- | --- |")
    for load, c in calibrations.items():
        if "error" in c:
            print(f"| {load} | {c['wall_s']:.1f} | {a.comparisons} | failed (exit {c['exit_code']}) | - | - |")
            continue
        v = ", ".join(f"{k} {n}" for k, n in sorted(c["verdicts"].items()))
        print(f"| {load} | {c['wall_s']:.1f} | {a.comparisons} | {v} | {100 * c['noise_floor']:.2f}% | "
              f"{100 * c['false_verdict_rate']:.0f}% |")
    print("\ntime to verdict = the bench stage's wall time (s); run = the whole `densefeed run` (s); load avg = median "
          "1-minute load average before each run (burn2 adds 2; more under `none` means something else was running)\n")
    print("| load | scenario | runs | faster | same | slower | inconclusive | error | time to verdict median | p90 "
          "| rounds median | run median | load avg | target | |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    groups = collections.OrderedDict()
    for r in rows:
        groups.setdefault((r["load"], r["scenario"]), []).append(r)
    verdict_lines = []
    for (load, scen), rs in groups.items():
        n = len(rs)
        counts = collections.Counter(r["verdict"] if r["verdict"] in VERDICTS else "error" for r in rs)
        cells = [f"{counts[v]} ({100 * counts[v] / n:.0f}%)" for v in VERDICTS + ("error",)]
        tv = [r["bench_wall_s"] for r in rs if r.get("bench_wall_s") is not None]
        rounds = [r["rounds"] for r in rs if r.get("rounds") is not None]
        runs = [r["run_wall_s"] for r in rs]
        loadavg = statistics.median(r["loadavg_1m_before"] for r in rs)
        target = SCENARIOS[scen][1]
        ok = met(target, counts, n)
        verdict_lines.append((load, scen, ok))
        print(f"| {load} | {scen} | {n} | {' | '.join(cells)} | {fmt_s(statistics.median(tv) if tv else None)} | "
              f"{fmt_s(quantile(tv, 0.9) if tv else None)} | {format(statistics.median(rounds), 'g') if rounds else '-'} | "
              f"{fmt_s(statistics.median(runs))} | {loadavg:.1f} | {TARGET_TEXT[target]} | {'pass' if ok else 'FAIL'} |")
    print("\ntargets:")
    for load, scen, ok in verdict_lines:
        print(f"  {load:6} {scen:5} {TARGET_TEXT[SCENARIOS[scen][1]]:14} {'pass' if ok else 'FAIL'}"
              + ("  (few runs: the rate says little)" if a.runs < 20 else ""))
    print("\nruns that missed their target verdict, by reason (numbers as #):")
    any_missed = False
    for (load, scen), rs in groups.items():
        target = SCENARIOS[scen][1]
        # 1.1x: every run that did not conclude `faster` (its target is only "never slower").
        missed = [r for r in rs if r["verdict"] != ("faster" if target == "not-slower" else target)]
        if not missed:
            continue
        any_missed = True
        print(f"  {load} {scen} ({len(missed)} of {len(rs)}{' not faster' if target == 'not-slower' else ''}):")
        for shape, k in collections.Counter(shape_of(r.get("reason")) + (f" [guards: {','.join(r['guards'])}]" if r.get("guards") else "")
                                            + (f" [timing: {','.join(r['timing_flags'])}]" if r.get("timing_flags") else "")
                                            for r in missed).most_common(6):
            print(f"    {k} x {shape}")
    if not any_missed:
        print("  none")


def interrupted(signum, frame):
    raise KeyboardInterrupt  # so that the burners (sessions of their own) are ended on SIGTERM/SIGHUP too


def main():
    a = parse_args()
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGHUP, interrupted)
    temp = tempfile.mkdtemp(prefix="densefeed-verdict-rates-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    project = os.path.join(temp, "project")
    out = os.path.abspath(a.out) if a.out else os.path.join(temp, "verdict-rates.json")
    home = os.path.join(temp, "home")
    os.makedirs(home)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"}
    exe, staged = stage_densefeed(a.densefeed, os.path.abspath(a.data), temp)
    flags = sandbox_flags(env)
    version = sh([exe, "--version"], temp, env).stdout.strip()
    work, iter_ms = make_project(project, exe, env, a)
    meta = {"densefeed": exe, "densefeed_version": version, "staged": staged, "host": os.uname().nodename,
            "cpus": os.cpu_count(), "work_steps": work, "iter_ms_probed": iter_ms, "iters": a.iters,
            "sandbox": "off: --no-sandbox (bwrap cannot start here)" if flags else "on", "runs": a.runs,
            "loads": a.loads, "scenarios": a.scenarios, "comparisons": a.comparisons, "seed0": a.seed,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "project": project}
    print(f"{version}; project {project}; {work} steps ~ {iter_ms:.2f} ms per iteration; sandbox {meta['sandbox']}",
          file=sys.stderr)
    if staged:
        print(f"note: {staged}", file=sys.stderr)
    calibrations, rows = collections.OrderedDict(), []
    t_start = time.monotonic()
    try:
        for load in a.loads:
            with Burners(2 if load == "burn2" else 0):
                c = calibrate(exe, project, env, a)
                calibrations[load] = c
                print(f"[{load}] calibrate --comparisons {a.comparisons}: {c['wall_s']:.1f} s, "
                      + (f"floor {100 * c['noise_floor']:.2f}%, {c['verdicts']}" if "error" not in c else f"failed: {c['error']}"),
                      file=sys.stderr)
                for scen in a.scenarios:
                    for i in range(a.runs):
                        row = {"load": load, "scenario": scen, "run": i}
                        row.update(run_one(exe, project, env, scen, a.seed + i, flags))
                        rows.append(row)
                        extra = (f"{row.get('rounds')} rounds, {row['speedup']:.3f}x" if row.get("speedup") is not None
                                 else (row.get("reason") or "")[:200])
                        extra += "".join(f" [{k}]" for k in (row.get("guards") or []) + (row.get("timing_flags") or []))
                        print(f"[{load} {scen} {i + 1}/{a.runs}] {row['verdict']}: {extra}, bench {fmt_s(row.get('bench_wall_s'))} s, "
                              f"run {row['run_wall_s']:.2f} s", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted: printing what was measured", file=sys.stderr)
    meta["wall_s"] = time.monotonic() - t_start
    with open(out, "w") as f:
        json.dump({"meta": meta, "calibrations": calibrations, "runs": rows}, f, indent=1)
    if rows or calibrations:
        print_tables(meta, calibrations, rows, a)
    print(f"\nraw rows: {out}; total {meta['wall_s']:.0f} s")
    if a.keep:
        print(f"project kept: {project}")
    else:
        shutil.rmtree(project, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(os.path.join(temp, "densefeed"), ignore_errors=True)
        if not os.listdir(temp):
            os.rmdir(temp)


if __name__ == "__main__":
    main()
