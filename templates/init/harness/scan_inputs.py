"""Inputs of the sample gate `scan-sharded` (frozen: the reference reads them too).

A diagonal linear recurrence with long memory, the shape of the state passing
in linear-attention and state-space layers:

    h[t] = a[t] * h[t-1] + b[t],   h[-1] = h0,   t = 0 .. T-1,   h of size D

with decays a in (1 - 1e-3, 1) (the state remembers ~1000 steps), b ~ N(0, 1)
and a non-zero initial state h0 ~ N(0, 1), all float32, drawn from the run's
seed (DENSEFEED_SEED) so that every process of a run sees the same inputs and
every run new ones.
"""

import numpy as np

from densefeed_harness import Harness


def inputs(h: Harness, T: int, D: int):
    rng = h.rng(stream=0)
    a = (1.0 - rng.uniform(0.0, 1e-3, size=(T, D))).astype(np.float32)
    b = rng.standard_normal((T, D)).astype(np.float32)
    h0 = rng.standard_normal(D).astype(np.float32)
    return a, b, h0
