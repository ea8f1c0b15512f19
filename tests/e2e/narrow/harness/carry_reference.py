"""Reference of the gate carry-scan: the unpartitioned recurrence
h[t] = a[t] h[t-1] + b[t] step by step in float64 from the float32 inputs.
Writes y.npy [T, D] and state.npy [D] (float64)."""

import argparse

import numpy as np

from carry_inputs import inputs
from densefeed_harness import Harness


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--T", type=int, required=True)
    p.add_argument("--D", type=int, required=True)
    args = p.parse_args()
    h = Harness()
    a, b, h0 = inputs(h, args.T, args.D)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    y = h.poisoned((args.T, args.D), np.float64)
    state = h0.astype(np.float64)
    for t in range(args.T):
        state = a64[t] * state + b64[t]
        y[t] = state
    h.write_output("y", y)
    h.write_output("state", state)


if __name__ == "__main__":
    main()
