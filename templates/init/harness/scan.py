"""Candidate of the sample gate `scan-sharded`: the same recurrence cut into
`shards` contiguous pieces of the sequence, as context parallelism cuts it
across devices. The first shard holds the initial state and scans from it;
every other shard scans its piece from a zero state in float32 and keeps its
transition (the product of its decays, A) and its local result (B); those
are then merged in order, h = A * h + B, in --merge-dtype (with one shard
there is nothing to merge):

    float32  merge in float32: agrees with the reference to float32 rounding
    float16  merge in float16 (a "cheap" communication format): every merge
             rounds the carried state to 11 bits, so the error grows with the
             number of shards, and one shard shows nothing

    python3 scan.py --T 4096 --D 64 --shards 8 --merge-dtype float32

Modes (DENSEFEED_MODE): gate writes final_state.npy; bench also times the
scan (samples.json); acceptance writes metrics.json {"scan_ms": [...]}.
"""

import argparse

import numpy as np

from densefeed_harness import Harness
from scan_inputs import inputs


def sharded_scan(a, b, h0, shards: int, merge_dtype) -> np.ndarray:
    T = a.shape[0]
    bounds = np.linspace(0, T, shards + 1).astype(int)
    state = h0.copy()
    for t in range(bounds[0], bounds[1]):
        state = a[t] * state + b[t]
    for s in range(1, shards):
        A = np.ones_like(h0)
        B = np.zeros_like(h0)
        for t in range(bounds[s], bounds[s + 1]):
            A = a[t] * A
            B = a[t] * B + b[t]
        merged = A.astype(merge_dtype) * state.astype(merge_dtype) + B.astype(merge_dtype)
        state = merged.astype(merge_dtype).astype(np.float32)
    return state


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--T", type=int, required=True)
    p.add_argument("--D", type=int, required=True)
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--merge-dtype", choices=["float32", "float16"], required=True)
    args = p.parse_args()
    h = Harness()
    a, b, h0 = inputs(h, args.T, args.D)
    run = lambda: sharded_scan(a, b, h0, args.shards, np.dtype(args.merge_dtype))  # noqa: E731
    if h.mode == "bench":
        h.write_samples(h.time_iterations(run))
    if h.mode == "acceptance":
        # End to end for this sample: the whole scan's wall time, for criteria
        # such as "median(scan_ms) <= 1000".
        h.write_metrics({"scan_ms": h.time_iterations(run)})
        return
    h.write_output("final_state", run())


if __name__ == "__main__":
    main()
