#!/usr/bin/env python3
"""The in-process floor of the fla-intracard-cp gate (issue 17, benchmark 2).

What a peer's test suite does in one pytest process: import torch and one
fla-core once, then for every case of the gate's profile draw the inputs,
run chunk_kda unpartitioned (FLA_INTRACARD_CP=0, the reference's path) and
with intra-card CP (FLA_INTRACARD_CP=1, MAX_SUBSEQS of the case), bring both
to the host and compare them (relative L2 and max |diff|, as densefeed's
metrics). fla reads FLA_INTRACARD_CP at every call (fla/backends.py,
is_enabled), so one process can run both paths. The same inputs and call as
the gate's harnesses (harness/kda_case.py). No output files and no second
process: a lower bound on what a gate of the same cases can cost.

Prints one line per case and the wall times (import, per case, total) as
JSON on the last line. Asserts nothing.

    python3 inprocess_floor.py [--fla 0.6.0] [--profile precision|full|quick]
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

t_start = time.perf_counter()
here = Path(__file__).resolve().parent
sys.path.insert(0, str(here / "harness"))
import kda_case  # noqa: E402

# The gate's cases (gates/fla-intracard-cp.yaml: defaults, grid, extra) and profiles.
DEFAULTS = {"H": 4, "K": 128, "V": 128, "R": 32, "seq_lens": "", "max_splits": 32, "regime": "long-memory"}
CASES = [{"T": t} for t in (8192, 16384, 24576, 32768, 50000, 65536, 131072)] + [
    {"T": 65536, "max_splits": 2},
    {"T": 51192, "seq_lens": "3000,40000,8192"},
    {"T": 81192, "seq_lens": "3000,30000,8192,40000"},
    {"T": 131072, "H": 16},
    {"regime": "fast-decay", "T": 32768},
    {"regime": "fast-decay", "T": 81192, "seq_lens": "3000,30000,8192,40000"},
]
PROFILES = {"full": None, "precision": {"seq_lens": ["", "3000,40000,8192"]}, "quick": {"T": [8192, 24576]}}

p = argparse.ArgumentParser()
p.add_argument("--fla", default="0.6.0", choices=kda_case.FLA_VERSIONS)
p.add_argument("--profile", default="precision", choices=sorted(PROFILES))
p.add_argument("--seed", type=int, default=20261201)
a = p.parse_args()

fla = kda_case.import_fla(a.fla, intracard_cp=True, max_splits=kda_case.DEFAULT_MAX_SPLITS)
import torch  # noqa: E402

t_import = time.perf_counter()
keep = PROFILES[a.profile]
cases = [{**DEFAULTS, **c} for c in CASES]
if keep:
    cases = [c for c in cases if all(c[k] in v for k, v in keep.items())]

rows = []
for i, values in enumerate(cases):
    t0 = time.perf_counter()
    case = kda_case.case_from_mapping(values)
    x = kda_case.make_inputs(case, a.seed + i)
    out = {}
    for cp in (False, True):
        os.environ["FLA_INTRACARD_CP"] = "1" if cp else "0"
        fla.backend.MAX_SUBSEQS = case.max_splits
        o, ht = kda_case.call_chunk_kda(fla, case, x)
        out[cp] = (o.double().cpu(), ht.double().cpu())
    row = {"case": {k: v for k, v in values.items() if DEFAULTS.get(k) != v}}
    for j, name in enumerate(("o", "final_state")):
        ref, cand = out[False][j], out[True][j]
        row[name] = {"rel_l2": float((cand - ref).norm() / ref.norm()), "max_abs": float((cand - ref).abs().max())}
    row["seconds"] = round(time.perf_counter() - t0, 3)
    rows.append(row)
    print(json.dumps(row), flush=True)
t_end = time.perf_counter()
print(json.dumps({"fla": a.fla, "profile": a.profile, "cases": len(cases), "import_s": round(t_import - t_start, 3),
                  "cases_s": round(t_end - t_import, 3), "total_s": round(t_end - t_start, 3),
                  "triton_cache": os.environ.get("TRITON_CACHE_DIR")}), flush=True)
