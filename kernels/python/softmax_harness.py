"""Row softmax, a worked Python harness (experiments/README.md, "A harness in Python").

    softmax_harness --role reference --rows R --cols C --scale S
    softmax_harness --role candidate --variant stable|naive|float16 --rows R --cols C --scale S

Inputs x[R, C] = S * N(0, 1) in float32 from DENSEFEED_SEED (stream 0), the
same in every process of a run. The reference computes y = softmax(x) along
the rows in float64 from those float32 inputs; the candidate in float32:

    stable   exp(x - max(x)) / sum: the usual kernel
    naive    exp(x) / sum without subtracting the row maximum: overflows to
             Inf / NaN once S * |x| passes ~88 (float32's exp limit)
    float16  the stable kernel in float16, returned as float32: about 1e-3
             relative error, far over a float32 tolerance

Modes: gate writes y.npy; bench times the softmax (steady clock, CPU) and
writes samples.json and the last iteration's y.npy; trace writes trace.json
with one event per phase; acceptance writes metrics.json (rows_per_ms).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from densefeed_harness import Harness, HarnessError  # noqa: E402


def softmax(x: np.ndarray, variant: str) -> np.ndarray:
    if variant == "reference":
        x = x.astype(np.float64)
        z = x - x.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)
    if variant == "stable":
        x32 = x.astype(np.float32)
        e = np.exp(x32 - x32.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True, dtype=np.float32)
    if variant == "naive":
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(x.astype(np.float32))
            return e / e.sum(axis=1, keepdims=True, dtype=np.float32)
    if variant == "float16":
        x16 = x.astype(np.float16)
        e = np.exp(x16 - x16.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True, dtype=np.float16)).astype(np.float32)
    raise ValueError(variant)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--role", choices=["reference", "candidate"], required=True)
    p.add_argument("--variant", choices=["stable", "naive", "float16"], default="stable")
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--cols", type=int, required=True)
    p.add_argument("--scale", type=float, required=True)
    args = p.parse_args()
    try:
        h = Harness()
        x = (args.scale * h.rng(0).standard_normal((args.rows, args.cols))).astype(np.float32)
        variant = "reference" if args.role == "reference" else args.variant
        if h.mode == "gate":
            y = softmax(x, variant)
            h.write_output("y", y.astype(np.float64 if args.role == "reference" else np.float32))
        elif h.mode == "bench":
            result = {}
            h.write_samples(h.time_iterations(lambda: result.update(y=softmax(x, variant))))
            h.write_output("y", result["y"].astype(np.float32))
        elif h.mode == "trace":
            t0 = time.perf_counter()
            m = x.max(axis=1, keepdims=True)
            t1 = time.perf_counter()
            e = np.exp(x - m)
            t2 = time.perf_counter()
            e / e.sum(axis=1, keepdims=True)
            t3 = time.perf_counter()
            us = lambda t: (t - t0) * 1e6  # noqa: E731
            h.write_trace([{"name": "row_max", "ts": 0, "dur": us(t1)},
                           {"name": "exp", "ts": us(t1), "dur": us(t2) - us(t1)},
                           {"name": "normalise", "ts": us(t2), "dur": us(t3) - us(t2)}])
        else:  # acceptance
            samples = h.time_iterations(lambda: softmax(x, variant))
            h.write_metrics({"rows_per_ms": [args.rows / max(s, 1e-9) for s in samples]})
    except HarnessError as e:
        print(f"softmax_harness: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
