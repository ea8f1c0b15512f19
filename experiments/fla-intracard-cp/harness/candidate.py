"""Candidate of the fla-intracard-cp gate: chunk_kda with fla's intra-card CP.

fla-core VERSION (--fla, the gate's param `fla`) with FLA_INTRACARD_CP=1 and
FLA_INTRACARD_MAX_SPLITS=--max-splits; the same call and inputs as the
reference (kda_case.py). It fails if fla does not take the path its own
planner says it takes (split, or not split at all).

--intracard-cp off runs the same version unpartitioned: not used by the gate,
a control for device_run.sh (version drift and run-to-run spread of the
unpartitioned path).

    python3 candidate.py --fla 0.5.2 --T 32768 [...case arguments as reference.py...]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kda_case  # noqa: E402


def _args(p):
    p.add_argument("--fla", required=True, choices=kda_case.FLA_VERSIONS, help="fla-core version under test")
    p.add_argument("--intracard-cp", choices=["on", "off"], default="on")


if __name__ == "__main__":
    sys.exit(kda_case.run_fla_harness("candidate", None, None, extra_args=_args))
