"""Inputs of the gate carry-scan (frozen: the reference reads them too), drawn
from DENSEFEED_SEED so that both arms of a run see the same ones:
decays a [T, D] in (1 - 1e-2, 1), b [T, D] ~ N(0, 1), h0 [D] ~ N(0, 1),
all float32."""

import numpy as np


def inputs(h, T: int, D: int):
    rng = h.rng(stream=0)
    a = (1.0 - rng.uniform(0.0, 1e-2, size=(T, D))).astype(np.float32)
    b = rng.standard_normal((T, D)).astype(np.float32)
    h0 = rng.standard_normal(D).astype(np.float32)
    return a, b, h0
