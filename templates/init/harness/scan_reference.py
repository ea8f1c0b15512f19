"""Reference of the sample gate `scan-sharded`: the unpartitioned recurrence
h[t] = a[t] h[t-1] + b[t] (harness/scan_inputs.py) evaluated step by step in
float64 from the float32 inputs. Writes final_state.npy [D] (float64).

    python3 scan_reference.py --T 4096 --D 64
"""

import argparse

import numpy as np

from densefeed_harness import Harness
from scan_inputs import inputs


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--T", type=int, required=True)
    p.add_argument("--D", type=int, required=True)
    args = p.parse_args()
    h = Harness()
    a, b, state = inputs(h, args.T, args.D)
    state = state.astype(np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for t in range(args.T):
        state = a64[t] * state + b64[t]
    h.write_output("final_state", state)


if __name__ == "__main__":
    main()
