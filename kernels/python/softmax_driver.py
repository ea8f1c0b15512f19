"""The py-softmax example gate's trusted benchmark driver (experiments/README.md).

    softmax_driver --rows R --cols C --scale S

Run by densefeed from the trusted tree in bench mode (bench.driver): the
inputs x[R, C] = S * N(0, 1) in float32, drawn as softmax_harness.py draws them
(stream 0) from each iteration's own seed (DENSEFEED_INPUT_SEEDS); the arm's softmax_harness.softmax loaded from
its tree (densefeed_driver.Driver.load_kernel) and timed by the driver, every
timed iteration's y recorded (samples.json, timed.json, timed/K/y.npy, y.npy).
"""

import argparse
import sys

from densefeed_driver import Driver  # first: before any arm code
from densefeed_harness import HarnessError

import numpy as np


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--cols", type=int, required=True)
    p.add_argument("--scale", type=float, required=True)
    args = p.parse_args()
    try:
        d = Driver()
        softmax = d.load_kernel()
        variant = d.params["variant"]
        # One input set per iteration, from its own seed (Driver.time's inputs).
        d.time(lambda x: softmax(x, variant), outputs=lambda y: {"y": np.asarray(y).astype(np.float32)},
               inputs=lambda h: (args.scale * h.rng(0).standard_normal((args.rows, args.cols))).astype(np.float32))
    except HarnessError as e:
        print(f"softmax_driver: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
