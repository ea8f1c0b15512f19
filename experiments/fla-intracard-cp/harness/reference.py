"""Reference of the fla-intracard-cp gate: chunk_kda unpartitioned.

fla-core pinned to REFERENCE_FLA, FLA_INTRACARD_CP=0, the same call and the
same inputs as the candidate (kda_case.py). It takes no version and no
switch: no command template can move what the candidate is judged against.
It fails if fla enters its intra-card backend anyway.

    python3 reference.py --T 32768 [--seq-lens 3000,29768] [--heads 4] [--regime long-memory]
                         [--seed U64] [--out DIR]      # or DENSEFEED_SEED / DENSEFEED_OUT
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kda_case  # noqa: E402

REFERENCE_FLA = "0.6.0"

if __name__ == "__main__":
    sys.exit(kda_case.run_fla_harness("reference", REFERENCE_FLA, intracard_cp=False))
