"""Trusted benchmark driver of the fla-intracard-cp gates (bench.driver).

densefeed runs it from the trusted tree, once per bench round and arm, in
bench mode (densefeed_driver, README "Timings the candidate cannot forge"):

    python3 bench_driver.py --T 131072 --heads 16 [...the case arguments of reference.py...]

It loads the arm's fla-core and times the arm's chunk_kda itself, so the
samples that decide a speedup are taken by this frozen file, not by the
candidate's harness:

- the version is the arm's parameter `fla` (DENSEFEED_PARAMS), one of
  kda_case.FLA_VERSIONS; the kernel (DENSEFEED_KERNEL, the gate's
  `kernel: {module: fla.ops.kda, function: chunk_kda, path: .fla-sites}`) is
  imported from the arm's tree only: from VERSION/ under the arm's
  .fla-sites folder (DENSEFEED_KERNEL_PATH), never from the trusted tree's;
- intra-card CP on (FLA_INTRACARD_CP=1, FLA_INTRACARD_MAX_SPLITS of the
  case), as the candidate harness runs it; Triton's default fp32 dot
  precision (TRITON_F32_DEFAULT must be unset);
- every iteration gets an input set of its own, built outside the timed
  region from that iteration's seed (DENSEFEED_INPUT_SEEDS) by the frozen
  kda_case.make_inputs, the same inputs the reference gets for that seed;
- the call is kda_case.call_chunk_kda (the gate's call), timed by
  Driver.time with torch.cuda.synchronize() inside the timed region; no cache
  flush (the inputs are GBs, L2 is 50 MB);
- every timed iteration's o [1, T, H, V] and final_state [N, H, K, V] are
  recorded (timed.json, timed/K/) and densefeed gates each against the
  reference of its seed; after each timed call the driver checks that fla
  took the intra-card path its own planner says it takes
  (kda_case._check_path_taken), so what was timed is the CP path.

torch, triton and numpy come from the interpreter and, like this file's own
modules (kda_case from its folder), are imported before the arm's path is
put first on sys.path: an arm's .fla-sites cannot shadow them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from densefeed_driver import Driver  # first: before any arm code
from densefeed_harness import HarnessError

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kda_case  # noqa: E402  (the trusted tree's: frozen with the gate)

KERNEL = ("fla.ops.kda", "chunk_kda")  # what the gate's bench.driver.kernel must name


def arm_site(d: Driver, version: str) -> Path:
    """VERSION/ under the arm's .fla-sites (a DENSEFEED_KERNEL_PATH entry, or
    the arm tree's own .fla-sites), holding fla/__init__.py. Raises
    HarnessError naming every place searched."""
    roots: list[Path] = []
    for root in [Path(p) for p in d.kernel_path if Path(p).name == kda_case.SITES_DIR] + [d.arm_project / kda_case.SITES_DIR]:
        if root not in roots:
            roots.append(root)
    for root in roots:
        if (root / version / "fla" / "__init__.py").is_file():
            return (root / version).resolve()
    searched = ", ".join(str(r / version) for r in roots)
    raise HarnessError(f"fla-core {version} is not installed in the arm's tree: searched {searched} "
                       f"(setup.sh installs it into {kda_case.SITES_DIR}/VERSION)")


def load_arm_fla(d: Driver, case: kda_case.Case) -> kda_case.Fla:
    """The arm's fla-core (its parameter `fla`) with intra-card CP on, as a kda_case.Fla."""
    if (d.module, d.function) != KERNEL:
        raise HarnessError(f"DENSEFEED_KERNEL names {d.module}.{d.function}: this driver times {'.'.join(KERNEL)} "
                           "(the gate's bench.driver.kernel)")
    version = d.params.get("fla")
    if version not in kda_case.FLA_VERSIONS:
        raise HarnessError(f"DENSEFEED_PARAMS fla={version!r}: expected one of {', '.join(kda_case.FLA_VERSIONS)}")
    if os.environ.get("TRITON_F32_DEFAULT"):
        raise HarnessError(f"TRITON_F32_DEFAULT={os.environ['TRITON_F32_DEFAULT']} is set; the gate runs Triton's "
                           "default fp32 dot precision")
    site = arm_site(d, version)
    # Only the arm's site of that version: a narrower path than densefeed
    # gave (inside the arm's tree), so load_kernel's check that the module
    # came from it is a check that it is this version's.
    d.kernel_path = [str(site)]
    # fla reads FLA_INTRACARD_CP at every call and FLA_INTRACARD_MAX_SPLITS
    # at import (kda_case.import_fla); Triton's cache is densefeed's (the
    # driver's own per arm), or a folder of TMPDIR by hand.
    os.environ["FLA_INTRACARD_CP"] = "1"
    os.environ["FLA_INTRACARD_MAX_SPLITS"] = str(case.max_splits)
    os.environ.setdefault("TRITON_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "fla-intracard-cp-triton"))
    chunk_kda = d.load_kernel()
    fla = sys.modules["fla"]
    got = Path(fla.__file__).resolve()
    if fla.__version__ != version or site not in got.parents:
        raise HarnessError(f"imported fla {fla.__version__} from {got}, expected {version} from {site}")
    import fla.ops.common.intracard_cp as icp
    import fla.ops.common.backends.intracard as backend

    backend.MAX_SUBSEQS = case.max_splits
    calls = {"intracard_fwd_h": 0, "intracard_pre_scan": 0, "intracard_merge": 0}
    for name in calls:
        setattr(icp, name, kda_case._counting(getattr(icp, name), name, calls))
    return kda_case.Fla(version=version, site=str(site), intracard_cp=True, chunk_kda=chunk_kda, icp=icp, calls=calls,
                        backend=backend)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    kda_case.add_case_args(p)  # --seed and --out unused: each iteration's seed is densefeed's, the folder DENSEFEED_OUT
    a = p.parse_args(argv)
    try:
        case = kda_case.case_from_args(a)
        d = Driver()
        import numpy as np
        import torch
        import triton  # noqa: F401  (the interpreter's, before the arm's path)

        if not torch.cuda.is_available():
            raise HarnessError("no CUDA device: fla's chunk_kda and its intra-card CP are GPU kernels")
        fla = load_arm_fla(d, case)
        plan = kda_case.split_plan(fla, case)
        shapes = {"o": (1, case.T, case.H, case.V), "final_state": (len(case.seq_lens), case.H, case.K, case.V)}

        def outputs(result) -> dict:
            # After each timed call, outside the timed region: the path fla
            # took, then the outputs as the harness writes them.
            kda_case._check_path_taken(fla, plan, {})
            for name in fla.calls:
                fla.calls[name] = 0
            o, ht = result
            arrays = {"o": o.float().cpu().numpy(), "final_state": ht.float().cpu().numpy()}
            for name, arr in arrays.items():
                if arr.shape != shapes[name]:
                    raise HarnessError(f"{name}: fla returned shape {arr.shape}, expected {shapes[name]}")
            return {name: np.ascontiguousarray(arr, dtype=np.float32) for name, arr in arrays.items()}

        print(f"bench_driver: fla {fla.version} from {fla.site}, plan {plan['subseqs']} x {plan['subseq_len']}, "
              f"{d.harness.warmup} + {d.harness.iters} iterations", file=sys.stderr, flush=True)
        d.time(lambda x: kda_case.call_chunk_kda(fla, case, x), outputs=outputs, sync=torch.cuda.synchronize,
               inputs=lambda h: kda_case.make_inputs(case, h.seed))
    except (HarnessError, kda_case.CaseError, RuntimeError) as e:
        print(f"bench_driver: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
