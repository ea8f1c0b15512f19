#!/usr/bin/env python3
"""The in-process timing of the FLA bench case: what densefeed's bench verdict is checked against.

One process per fla-core version (device_bench_verdict.sh starts them):
import it as the candidate harness and the bench driver do
(kda_case.import_fla, intra-card CP on), then call kda_case.call_chunk_kda on
the bench case's inputs (kda_case.make_inputs) WARMUP times, the first of
which compiles and autotunes into TRITON_CACHE_DIR; then time ITERS calls,
each on a fresh input set drawn outside the timed region (as the driver
does), with CUDA events around the call and the host clock around the call
and torch.cuda.synchronize() (what the driver's samples are). Prints one
JSON line: the medians in ms and every sample.

Several processes share one GPU: with --barrier DIR --parties N every one
first writes DIR/ready-LABEL after its warm-up and waits until N processes
are ready and DIR/go exists (the caller's signal that nothing else loads the
machine), then times while holding an exclusive lock on DIR/gpu.lock, so no
two time at once and none times while another compiles or autotunes.

--warm CASE_JSON (repeatable) calls chunk_kda once on each such case before
the bench case, untimed, to fill the Triton cache for densefeed's gate
stage; --intracard-cp off takes the reference's path (CP off); --iters 0
warms only (it still joins the barrier, so the timing waits for it).

    python3 inprocess_bench.py --fla 0.6.0 [--case '{"T": 131072, "H": 16}'] [--iters 30] [--warmup 3]
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import sys
import time
from pathlib import Path

t_start = time.perf_counter()
here = Path(__file__).resolve().parent
sys.path.insert(0, str(here / "harness"))
import kda_case  # noqa: E402

BENCH_CASE = {"T": 131072, "H": 16}  # the gates' bench case (gates/*.yaml, bench.cases)


def wait_for(barrier: Path, parties: int, timeout_s: float) -> float:
    """Seconds waited until `parties` ready files and barrier/go exist. Raises TimeoutError."""
    t0 = time.perf_counter()
    while True:
        ready = len(list(barrier.glob("ready-*")))
        if ready >= parties and (barrier / "go").exists():
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > timeout_s:
            raise TimeoutError(f"{barrier}: {ready} of {parties} processes ready, go {'set' if (barrier / 'go').exists() else 'not set'} "
                               f"after {timeout_s:.0f} s")
        time.sleep(0.2)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fla", required=True, choices=kda_case.FLA_VERSIONS)
    p.add_argument("--intracard-cp", choices=["on", "off"], default="on")
    p.add_argument("--case", default=json.dumps(BENCH_CASE), help="the timed case (the gate's case keys, JSON)")
    p.add_argument("--warm", action="append", default=[], help="a case (JSON) to call once, untimed, first")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls on the bench case")
    p.add_argument("--iters", type=int, default=30, help="timed calls (0: warm only)")
    p.add_argument("--seed", type=int, default=20261207)
    p.add_argument("--barrier", type=Path, default=None)
    p.add_argument("--parties", type=int, default=1)
    p.add_argument("--label", default=None)
    p.add_argument("--wait-s", type=float, default=600, help="longest wait at the barrier")
    a = p.parse_args()
    label = a.label or f"{a.fla}-cp{a.intracard_cp}"
    case = kda_case.case_from_mapping(json.loads(a.case))
    warm_cases = [kda_case.case_from_mapping(json.loads(c)) for c in a.warm]
    fla = kda_case.import_fla(a.fla, intracard_cp=a.intracard_cp == "on", max_splits=case.max_splits)
    import torch
    import triton

    if not torch.cuda.is_available():
        print("inprocess_bench: no CUDA device", file=sys.stderr)
        return 2
    t_import = time.perf_counter()
    info = {"label": label, "fla": fla.version, "site": fla.site, "intracard_cp": fla.intracard_cp,
            "case": {k: v for k, v in json.loads(a.case).items()}, "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__, "triton": triton.__version__, "triton_cache": os.environ.get("TRITON_CACHE_DIR"),
            "import_s": round(t_import - t_start, 3)}

    def run(c: kda_case.Case, x: dict):
        fla.backend.MAX_SUBSEQS = c.max_splits
        return kda_case.call_chunk_kda(fla, c, x)

    warm_s = {}
    for c in warm_cases:
        t0 = time.perf_counter()
        x = kda_case.make_inputs(c, a.seed)
        run(c, x)
        torch.cuda.synchronize()
        del x
        warm_s[f"T={c.T} H={c.H} seq_lens={','.join(map(str, c.seq_lens))}"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    x = kda_case.make_inputs(case, a.seed)
    first = None
    for i in range(a.warmup):
        t1 = time.perf_counter()
        run(case, x)
        torch.cuda.synchronize()
        first = first if first is not None else round(time.perf_counter() - t1, 3)
    warm_s["bench case"] = round(time.perf_counter() - t0, 3)
    info["warm_s"] = warm_s
    info["first_call_s"] = first
    info["plan"] = kda_case.split_plan(fla, case)
    del x
    torch.cuda.synchronize()
    print(f"inprocess_bench {label}: warm after {time.perf_counter() - t_start:.1f} s {json.dumps(warm_s)}", file=sys.stderr,
          flush=True)

    lock = None
    if a.barrier is not None:
        a.barrier.mkdir(parents=True, exist_ok=True)
        (a.barrier / f"ready-{label}").write_text(f"{os.getpid()}\n")
        if a.iters > 0:
            info["barrier_wait_s"] = round(wait_for(a.barrier, a.parties, a.wait_s), 3)
            lock = open(a.barrier / "gpu.lock", "w")
            fcntl.flock(lock, fcntl.LOCK_EX)
    if a.iters <= 0:
        print(json.dumps(info), flush=True)
        return 0

    events, host = [], []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t_timed = time.time()
    for i in range(a.iters):
        x = kda_case.make_inputs(case, a.seed + 1 + i)  # a fresh set, outside the timed region
        torch.cuda.synchronize()
        h0 = time.perf_counter_ns()
        start.record()
        out = run(case, x)
        stop.record()
        torch.cuda.synchronize()
        h1 = time.perf_counter_ns()
        events.append(start.elapsed_time(stop))
        host.append((h1 - h0) / 1e6)
        del x, out
    if lock is not None:
        fcntl.flock(lock, fcntl.LOCK_UN)
    info.update({
        "timed_at": t_timed, "iters": a.iters, "warmup": a.warmup,
        "median_ms": statistics.median(events), "p10_ms": pct(events, 0.1), "p90_ms": pct(events, 0.9),
        "host_median_ms": statistics.median(host), "host_p10_ms": pct(host, 0.1), "host_p90_ms": pct(host, 0.9),
        "events_ms": [round(v, 4) for v in events], "host_ms": [round(v, 4) for v in host],
        "calls": dict(fla.calls), "total_s": round(time.perf_counter() - t_start, 3)})
    print(json.dumps(info), flush=True)
    print(f"inprocess_bench {label}: median {info['median_ms']:.3f} ms (CUDA events), {info['host_median_ms']:.3f} ms "
          f"(host clock), {a.iters} calls", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
