"""Trusted benchmark driver of the sample gate `scan-sharded` (frozen).

densefeed runs it from the trusted ref's tree for each bench round and arm;
it loads the arm's `scan.sharded_scan` (the gate's bench.driver.kernel) and
times it itself, so a candidate's speedup is measured by code the candidate
cannot change. Inputs come from scan_inputs (frozen, shared with the
reference); the arm's merge dtype is its `merge_dtype` parameter.

    DENSEFEED_MODE=bench ... python3 scan_driver.py --T 1024 --D 64 --shards 4
"""

import argparse

from densefeed_driver import Driver  # first: before any of the arm's code

import numpy as np

from scan_inputs import inputs


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--T", type=int, required=True)
    p.add_argument("--D", type=int, required=True)
    p.add_argument("--shards", type=int, required=True)
    args = p.parse_args()
    d = Driver()
    kernel = d.load_kernel()
    merge = np.dtype(d.params.get("merge_dtype", "float32"))
    # Every iteration its own inputs, built from its own seed (densefeed
    # draws them): a kernel that caches its results gains nothing.
    d.time(lambda x: kernel(*x, args.shards, merge), outputs=lambda state: {"final_state": state},
           inputs=lambda h: inputs(h, args.T, args.D))


if __name__ == "__main__":
    main()
