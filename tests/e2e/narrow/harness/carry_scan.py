"""Candidate of the gate carry-scan: the recurrence h[t] = a[t] h[t-1] + b[t]
cut into `shards` contiguous parts, as context parallelism cuts a sequence
across devices. Every part scans from a zero state in float32, keeping the
running product of its decays (A) and its local result (B); then each part is
handed the state the part before it ends with (the carry) and its outputs
are y[t] = A[t] * carried + B[t]. Writes y.npy [T, D] and state.npy [D]
(float32).

    python3 carry_scan.py --T 256 --D 16 --shards 4 --fault none
"""

import argparse
import os

import numpy as np

from carry_inputs import inputs
from densefeed_harness import Harness


def local_scan(a, b):
    """One part from a zero state: A[t] = prod a[..t], B[t] = its own h[t]."""
    A = np.empty_like(a)
    B = np.empty_like(b)
    prod = np.ones(a.shape[1], dtype=np.float32)
    acc = np.zeros(a.shape[1], dtype=np.float32)
    for t in range(a.shape[0]):
        prod = a[t] * prod
        acc = a[t] * acc + b[t]
        A[t] = prod
        B[t] = acc
    return A, B


def chunked_scan(a, b, h0, shards: int, y):
    T = a.shape[0]
    bounds = np.linspace(0, T, shards + 1).astype(int)
    carried = h0.copy()
    for s in range(shards):
        lo, hi = bounds[s], bounds[s + 1]
        A, B = local_scan(a[lo:hi], b[lo:hi])
        y[lo:hi] = A * carried + B
        state = y[hi - 1].copy()
        carried = state  # the state handed to the next part
    return state


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--T", type=int, required=True)
    p.add_argument("--D", type=int, required=True)
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--fault", choices=["none", "scale", "race", "marker"], default="none")
    args = p.parse_args()
    h = Harness()
    a, b, h0 = inputs(h, args.T, args.D)
    y = h.poisoned((args.T, args.D), np.float32)
    state = chunked_scan(a, b, h0, args.shards, y)
    if args.fault == "scale":
        y *= np.float32(1.01)
        state = state * np.float32(1.01)
    elif args.fault == "race":
        # Not from the seed: another run of the same case may or may not be hit,
        # and by how much differs from run to run.
        r = os.urandom(9)
        if r[0] & 1:
            off = np.float32(1e-3 * (1.0 + int.from_bytes(r[1:], "little") / 2.0**64))
            y *= np.float32(1.0) + off
            state = state * (np.float32(1.0) + off)
    elif args.fault == "marker":
        # Wrong only the first time it sees this seed and case in its cache
        # folder (XDG_CACHE_HOME, writable to it): a rerun that shares the
        # cache looks green, so narrow would call it nondeterministic.
        cache = os.environ.get("XDG_CACHE_HOME", "")
        mark = os.path.join(cache, f"seen-{h.seed}-{args.T}-{args.D}-{args.shards}") if cache else ""
        if not mark or not os.path.exists(mark):
            if mark:
                os.makedirs(cache, exist_ok=True)
                open(mark, "w").close()
            y *= np.float32(1.01)
            state = state * np.float32(1.01)
    h.write_output("y", y)
    h.write_output("state", state.astype(np.float32))


if __name__ == "__main__":
    main()
