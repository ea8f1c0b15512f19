"""What the FLA intra-card CP harnesses share: the case, its inputs, which
fla-core is imported, the call of chunk_kda, and the outputs.

reference.py, candidate.py and fp64_reference.py are thin wrappers around
this module; the gate freezes it together with reference.py, so neither the
inputs nor the way chunk_kda is called can move without a person re-locking
the gate.

The op: fla.ops.kda.chunk_kda over variable-length sequences (cu_seqlens),
under torch.inference_mode(), fp32 q/k/v/g/beta and an fp32 initial state
per sequence; outputs o [1, T, H, V] and final_state [N, H, K, V] (fp32).
FLA_INTRACARD_CP=1 makes fla split long sequences into sub-sequences
(fla/ops/common/intracard_cp.py): a pre-scan summarises each sub-sequence as
an affine map S -> M S + H (the chain M = M_c M over its chunks), a merge
kernel computes every sub-sequence's initial state, and the usual state
kernel runs the sub-sequences side by side. With FLA_INTRACARD_CP=0 the same
call runs the unpartitioned state kernel.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

FLA_VERSIONS = ("0.5.2", "0.6.0")
CHUNK = 64  # chunk_kda's chunk_size (fla's default, the one its CP planner assumes)
SITES_DIR = ".fla-sites"  # setup.sh installs fla-core VERSION into .fla-sites/VERSION

# Per-token, per-key-channel decay factors exp(g). long-memory: the state's
# memory (1 / (1 - decay), about 1e5 tokens) is longer than every sequence,
# so whatever a sub-sequence hands over is still in the final state and in o.
# fast-decay: the state forgets within about 100 tokens, so a hand-over error
# dies out right after the split point (a regime where nothing should show).
REGIMES = {
    "long-memory": (1.0 - 2.0e-5, 1.0),
    "fast-decay": (0.9, 0.99),
}
BETA_RANGE = (0.2, 0.8)


class CaseError(ValueError):
    """A case argument that is not what the gate's case grid can produce."""


@dataclass(frozen=True)
class Case:
    T: int                      # tokens in all (sum of seq_lens)
    seq_lens: tuple[int, ...]   # one entry per sequence, in token order
    H: int                      # heads (q/k heads = value heads)
    K: int                      # key dimension
    V: int                      # value dimension
    R: int                      # rank of the key subspace (keys live in R of K dimensions)
    regime: str                 # a key of REGIMES
    max_splits: int             # FLA_INTRACARD_MAX_SPLITS (fla's default 32)

    @property
    def cu_seqlens(self) -> list[int]:
        out = [0]
        for n in self.seq_lens:
            out.append(out[-1] + n)
        return out


def add_case_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--T", type=int, required=True, help="tokens in all")
    p.add_argument("--seq-lens", default="", help="comma-separated sequence lengths summing to T; empty: one sequence of T")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dim-k", type=int, default=128)
    p.add_argument("--dim-v", type=int, default=128)
    p.add_argument("--key-rank", type=int, default=32, help="keys are drawn from a random subspace of this dimension")
    p.add_argument("--regime", choices=sorted(REGIMES), default="long-memory")
    p.add_argument("--max-splits", type=int, default=32, help="FLA_INTRACARD_MAX_SPLITS; only the CP path reads it")
    p.add_argument("--seed", default=None, help="u64; default DENSEFEED_SEED")
    p.add_argument("--out", default=None, help="output folder; default DENSEFEED_OUT")


def case_from_args(a: argparse.Namespace) -> Case:
    if a.T <= 0:
        raise CaseError(f"--T {a.T}: expected a positive token count")
    if a.seq_lens.strip():
        try:
            lens = tuple(int(x) for x in a.seq_lens.split(","))
        except ValueError:
            raise CaseError(f"--seq-lens {a.seq_lens!r}: expected comma-separated integers") from None
        if any(n <= 0 for n in lens):
            raise CaseError(f"--seq-lens {a.seq_lens!r}: every length must be positive")
        if sum(lens) != a.T:
            raise CaseError(f"--seq-lens {a.seq_lens!r} sums to {sum(lens)}, not --T {a.T}")
    else:
        lens = (a.T,)
    for name, value in (("--heads", a.heads), ("--dim-k", a.dim_k), ("--dim-v", a.dim_v), ("--key-rank", a.key_rank), ("--max-splits", a.max_splits)):
        if value <= 0:
            raise CaseError(f"{name} {value}: expected a positive integer")
    if a.key_rank > a.dim_k:
        raise CaseError(f"--key-rank {a.key_rank} exceeds --dim-k {a.dim_k}")
    return Case(T=a.T, seq_lens=lens, H=a.heads, K=a.dim_k, V=a.dim_v, R=a.key_rank, regime=a.regime, max_splits=a.max_splits)


def protocol(a: argparse.Namespace):
    """The densefeed protocol object (densefeed_harness.Harness) with --seed/--out applied over the environment."""
    import densefeed_harness

    env = dict(os.environ)
    if a.seed is not None:
        env["DENSEFEED_SEED"] = str(a.seed)
    if a.out is not None:
        env["DENSEFEED_OUT"] = str(a.out)
    return densefeed_harness.Harness(environ=env)


# -- which fla-core --------------------------------------------------------------


def fla_site(version: str) -> Path:
    """The folder holding fla-core VERSION (VERSION/fla/__init__.py).

    Searched, in order: $FLA_SITES/VERSION; every sys.path entry named
    .fla-sites (densefeed.yaml's python.path puts the project's .fla-sites on
    PYTHONPATH); .fla-sites beside this harness's folder (a checkout or an
    export of the project). Raises RuntimeError naming every place searched.
    """
    if version not in FLA_VERSIONS:
        raise RuntimeError(f"fla-core {version!r}: this gate knows {', '.join(FLA_VERSIONS)}")
    roots: list[Path] = []
    if os.environ.get("FLA_SITES"):
        roots.append(Path(os.environ["FLA_SITES"]))
    roots += [Path(e) for e in sys.path if e and Path(e).name == SITES_DIR]
    roots.append(Path(__file__).resolve().parent.parent / SITES_DIR)
    for root in roots:
        if (root / version / "fla" / "__init__.py").is_file():
            return (root / version).resolve()
    searched = ", ".join(str(r / version) for r in roots)
    raise RuntimeError(f"fla-core {version} is not installed: searched {searched}; run setup.sh in the project folder "
                       f"(it installs every version this gate uses into {SITES_DIR}/VERSION)")


@dataclass
class Fla:
    version: str
    site: str
    intracard_cp: bool
    chunk_kda: object
    icp: object              # fla.ops.common.intracard_cp
    calls: dict              # how often the intra-card functions ran (observed, not changed)
    backend: object          # fla.ops.common.backends.intracard (its MAX_SUBSEQS is read at every call)


def import_fla(version: str, intracard_cp: bool, max_splits: int) -> Fla:
    """Imports fla-core VERSION from its own folder with intra-card CP on or off.

    fla reads FLA_INTRACARD_CP at every call and FLA_INTRACARD_MAX_SPLITS at
    import (into backends/intracard.py's MAX_SUBSEQS, which it reads at every
    call: a session sets that per case), so both are set here, before the
    import.
    Raises RuntimeError if another fla is already imported or the one found is
    not VERSION from its folder.
    """
    if "fla" in sys.modules:
        raise RuntimeError(f"an fla is already imported from {getattr(sys.modules['fla'], '__file__', '?')}")
    if os.environ.get("TRITON_F32_DEFAULT"):
        # It would move every fp32 tl.dot of both arms away from Triton's default (TF32).
        raise RuntimeError(f"TRITON_F32_DEFAULT={os.environ['TRITON_F32_DEFAULT']} is set; the gate runs Triton's default fp32 dot precision")
    site = fla_site(version)
    sys.path.insert(0, str(site))
    os.environ["FLA_INTRACARD_CP"] = "1" if intracard_cp else "0"
    os.environ["FLA_INTRACARD_MAX_SPLITS"] = str(max_splits)
    # Triton writes compiled kernels and (fla sets cache_results) autotuning
    # results to its cache; under densefeed's sandbox HOME may be read-only.
    os.environ.setdefault("TRITON_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "fla-intracard-cp-triton"))
    import fla
    from fla.ops.kda import chunk_kda
    import fla.ops.common.intracard_cp as icp
    import fla.ops.common.backends.intracard as backend

    got = Path(fla.__file__).resolve()
    if fla.__version__ != version or site not in got.parents:
        raise RuntimeError(f"imported fla {fla.__version__} from {got}, expected {version} from {site}")
    calls = {"intracard_fwd_h": 0, "intracard_pre_scan": 0, "intracard_merge": 0}
    for name in calls:
        setattr(icp, name, _counting(getattr(icp, name), name, calls))
    return Fla(version=version, site=str(site), intracard_cp=intracard_cp, chunk_kda=chunk_kda, icp=icp, calls=calls,
               backend=backend)


def _counting(fn, name, calls):
    # The backend imports intracard_fwd_h from the module at call time and
    # intracard_fwd_h looks its helpers up as module globals, so counting
    # wrappers on the module see every call without changing any.
    def wrapper(*args, **kwargs):
        calls[name] += 1
        return fn(*args, **kwargs)
    return wrapper


def split_plan(fla: Fla, case: Case) -> dict:
    """How fla's intra-card CP would cut this case, from fla's own planner.

    {"subseq_len": tokens, "subseqs": [count per sequence], "splits": bool}:
    compute_subseq_len picks the sub-sequence length from the longest
    sequence, the SM count and the heads; a sequence is cut only when it is at
    least 3 sub-sequence lengths long, into at most max_splits pieces.
    """
    import torch

    icp = fla.icp
    sms = icp.get_multiprocessor_count()
    subseq_len = icp.compute_subseq_len(seq_len=max(case.seq_lens), num_sms=sms, num_heads=case.H, chunk_size=CHUNK)
    counts = [1] * len(case.seq_lens)
    boundaries = case.cu_seqlens
    if not all(n < 2 * subseq_len for n in case.seq_lens):
        cu = torch.tensor(case.cu_seqlens, dtype=torch.long)
        boundaries, info, _ = icp.prepare_subseq_cu_seqlens(cu_seqlens_cpu=cu, subseq_len=subseq_len, chunk_size=CHUNK, max_splits=case.max_splits)
        if info:
            for sid, n in zip(info.split_seq_ids, info.num_subseqs):
                counts[sid] = n
        else:
            boundaries = case.cu_seqlens
    return {"sms": sms, "subseq_len": subseq_len, "subseqs": counts, "splits": any(c > 1 for c in counts),
            "boundaries": [int(b) for b in boundaries]}


# -- inputs ----------------------------------------------------------------------


def _stream_seed(seed: int, stream: int) -> int:
    # splitmix64 of (seed, stream): independent generator seeds per input, so
    # an input's values do not depend on which others were drawn before it.
    z = (seed + 0x9E3779B97F4A7C15 * (stream + 1)) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) & 0x7FFFFFFFFFFFFFFF


def make_inputs(case: Case, seed: int, device: str = "cuda") -> dict:
    """The case's inputs, all fp32 on `device`, a function of (case, seed) alone.

    q [T, H, K]  unit-norm rows, any direction;
    k [T, H, K]  unit-norm rows in a random rank-R subspace per head, so the
                 delta rule rewrites only R of the K state rows and the other
                 K - R rows carry the initial state, decayed, to the end;
    v [T, H, V]  standard normal;
    g [T, H, K]  log of per-channel decay factors drawn from REGIMES[regime];
    beta [T, H]  uniform in BETA_RANGE;
    h0 [N, H, K, V]  standard normal, one fp32 initial state per sequence.
    Drawn with torch's Philox generator and combined with elementwise ops and
    per-row norms only (no cuBLAS), so every process on the same GPU and
    torch gets the same bits.
    """
    import torch

    T, H, K, V, R = case.T, case.H, case.K, case.V, case.R
    N = len(case.seq_lens)

    def gen(stream: int, dev: str = device) -> torch.Generator:
        g = torch.Generator(device=dev)
        g.manual_seed(_stream_seed(seed, stream))
        return g

    f32 = torch.float32
    # Orthonormal basis of the key subspace, on the CPU in fp64 (QR is not
    # promised to be bitwise reproducible on the GPU).
    basis = torch.linalg.qr(torch.randn(H, K, R, generator=gen(0, "cpu"), dtype=torch.float64)).Q  # [H, K, R]
    basis = basis.to(device=device, dtype=f32)
    z = torch.randn(T, H, R, generator=gen(1), device=device, dtype=f32)
    k = torch.zeros(T, H, K, device=device, dtype=f32)
    for r in range(R):
        k.add_(z[:, :, r, None] * basis[None, :, :, r])
    k = k / k.norm(dim=-1, keepdim=True)
    q = torch.randn(T, H, K, generator=gen(2), device=device, dtype=f32)
    q = q / q.norm(dim=-1, keepdim=True)
    v = torch.randn(T, H, V, generator=gen(3), device=device, dtype=f32)
    lo, hi = REGIMES[case.regime]
    decay = lo + (hi - lo) * torch.rand(T, H, K, generator=gen(4), device=device, dtype=torch.float64)
    g = torch.log(decay).to(f32)
    beta = (BETA_RANGE[0] + (BETA_RANGE[1] - BETA_RANGE[0]) * torch.rand(T, H, generator=gen(5), device=device, dtype=f32))
    h0 = torch.randn(N, H, K, V, generator=gen(6), device=device, dtype=f32)
    return {"q": q, "k": k, "v": v, "g": g, "beta": beta, "h0": h0}


# -- the op ----------------------------------------------------------------------


def call_chunk_kda(fla: Fla, case: Case, x: dict):
    """o [1, T, H, V] and final_state [N, H, K, V] (fp32, on the GPU) from one chunk_kda call."""
    import torch

    cu_cpu = torch.tensor(case.cu_seqlens, dtype=torch.long)
    cu = cu_cpu.to(x["q"].device)
    with torch.inference_mode():
        o, ht = fla.chunk_kda(
            q=x["q"][None], k=x["k"][None], v=x["v"][None], g=x["g"][None], beta=x["beta"][None],
            scale=case.K ** -0.5, initial_state=x["h0"], output_final_state=True,
            cu_seqlens=cu, cu_seqlens_cpu=cu_cpu)
    return o, ht


def poison_device_memory(on: bool = True) -> None:
    """Makes torch fill every uninitialised float allocation with NaN (on) or
    stop doing so (off), so an element fla allocates and never writes reaches
    the output as NaN and fails the gate
    (torch.utils.deterministic.fill_uninitialized_memory). Only allocation is
    affected; warn_only keeps every op's implementation."""
    import torch

    torch.use_deterministic_algorithms(on, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = on


def run_fla_harness(role: str, version: str, intracard_cp: bool, argv: list[str] | None = None, extra_args=None) -> int:
    """The whole of reference.py and candidate.py: parse, import, run, write.

    One process per case (the case in argv, densefeed's default protocol), or,
    under a gate with `protocol: session` (DENSEFEED_SESSION=1), one process
    that imports fla once and serves every case densefeed sends it
    (densefeed_harness.serve): argv then holds no case, only the role's own
    options (--fla, --intracard-cp), and each request's case keys are the
    gate's (T, seq_lens, H, K, V, R, regime, max_splits).
    """
    session = os.environ.get("DENSEFEED_SESSION") == "1"
    p = argparse.ArgumentParser(description=f"FLA chunk_kda intra-card CP gate: {role}")
    if not session:
        add_case_args(p)
    if extra_args:
        extra_args(p)
    a = p.parse_args(argv)
    if version is None:
        version = a.fla
    if intracard_cp is None:
        intracard_cp = a.intracard_cp == "on"
    t0 = time.perf_counter()
    if not session:
        case = case_from_args(a)
        h = protocol(a)
        fla = import_fla(version, intracard_cp=intracard_cp, max_splits=case.max_splits)
        _require_cuda()
        run_case(h, fla, case, role, t0)
        return 0

    import densefeed_harness

    fla = import_fla(version, intracard_cp=intracard_cp, max_splits=DEFAULT_MAX_SPLITS)
    _require_cuda()
    print(f"fla-intracard-cp: {role} session, fla {version} from {fla.site}, "
          f"import {time.perf_counter() - t0:.3f} s", file=sys.stderr, flush=True)

    def handle(h) -> None:
        case = case_from_mapping(h.case)
        # fla reads MAX_SUBSEQS, the module global FLA_INTRACARD_MAX_SPLITS
        # sets at import, at every call (backends/intracard.py, both versions).
        fla.backend.MAX_SUBSEQS = case.max_splits
        os.environ["FLA_INTRACARD_MAX_SPLITS"] = str(case.max_splits)
        for name in fla.calls:
            fla.calls[name] = 0
        run_case(h, fla, case, role, time.perf_counter())

    densefeed_harness.serve(handle)
    return 0


DEFAULT_MAX_SPLITS = 32  # fla's own default for FLA_INTRACARD_MAX_SPLITS


def case_from_mapping(c: dict) -> Case:
    """A session request's case (the gate's case keys) as a Case, checked as argv is."""
    known = {"T", "seq_lens", "H", "K", "V", "R", "regime", "max_splits"}
    extra = sorted(set(c) - known)
    if extra:
        raise CaseError(f"case keys {extra}: this harness knows {sorted(known)}")
    if "T" not in c:
        raise CaseError("the case has no T")
    regime = str(c.get("regime", "long-memory"))
    if regime not in REGIMES:
        raise CaseError(f"regime {regime!r}: expected one of {sorted(REGIMES)}")
    try:
        a = argparse.Namespace(T=int(c["T"]), seq_lens=str(c.get("seq_lens", "")), heads=int(c.get("H", 4)),
                               dim_k=int(c.get("K", 128)), dim_v=int(c.get("V", 128)), key_rank=int(c.get("R", 32)),
                               regime=regime, max_splits=int(c.get("max_splits", DEFAULT_MAX_SPLITS)))
    except (TypeError, ValueError) as e:
        raise CaseError(f"case {c}: {e}") from None
    return case_from_args(a)


def _require_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: fla's chunk_kda and its intra-card CP are GPU kernels")


def run_case(h, fla: Fla, case: Case, role: str, t0: float) -> None:
    """One case: inputs from (case, h.seed), the call (gate: once, device
    memory poisoned; bench: h.warmup + h.iters calls timed with CUDA events),
    the path check, the outputs into h.out, a line of timings on stderr."""
    import torch
    import triton

    t_import = time.perf_counter()
    plan = split_plan(fla, case)
    x = make_inputs(case, h.seed)
    torch.cuda.synchronize()
    t_inputs = time.perf_counter()
    info = {"role": role, "fla": fla.version, "site": fla.site, "intracard_cp": fla.intracard_cp, "case": asdict(case),
            "plan": plan, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}

    if h.mode == "gate":
        poison_device_memory(True)
        o, ht = call_chunk_kda(fla, case, x)
        torch.cuda.synchronize()
        t_call = time.perf_counter()
        info["first_call_s"] = round(t_call - t_inputs, 3)
    elif h.mode == "bench":
        poison_device_memory(False)  # a session's earlier gate request turned it on
        times = []
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for i in range(h.warmup + h.iters):
            start.record()
            o, ht = call_chunk_kda(fla, case, x)
            stop.record()
            stop.synchronize()
            if i >= h.warmup:
                times.append(start.elapsed_time(stop))
        h.write_samples(times)
        t_call = time.perf_counter()
        info["bench_ms"] = times
    else:
        raise RuntimeError(f"DENSEFEED_MODE={h.mode}: this harness serves gate and bench")

    _check_path_taken(fla, plan, info)
    write_outputs(h, case, o[0], ht)
    if h.mode == "gate":
        # The parts fla's planner cut the work into (the gate's structure:
        # partition {parts: reported}): the most sub-sequences of any
        # sequence, 1 where nothing is cut (the reference, CP off, never cuts).
        parts = max(plan["subseqs"]) if fla.intracard_cp and plan["splits"] else 1
        (h.out / "meta.json").write_text(json.dumps({"parts": int(parts)}))
    t_end = time.perf_counter()
    info["calls"] = dict(fla.calls)
    info["seconds"] = {"import": round(t_import - t0, 3), "inputs": round(t_inputs - t_import, 3),
                       "op": round(t_call - t_inputs, 3), "write": round(t_end - t_call, 3)}
    print("fla-intracard-cp: " + json.dumps(info), file=sys.stderr, flush=True)


def _check_path_taken(fla: Fla, plan: dict, info: dict) -> None:
    # The reference must never enter the CP backend; the candidate must take
    # the split path exactly when fla's planner says it splits. Anything else
    # means the gate is not testing what it says, so the harness fails.
    c = fla.calls
    if not fla.intracard_cp:
        if c["intracard_fwd_h"]:
            raise RuntimeError(f"FLA_INTRACARD_CP=0 but fla entered its intra-card backend ({c})")
        return
    if not c["intracard_fwd_h"]:
        raise RuntimeError("FLA_INTRACARD_CP=1 but fla never entered its intra-card backend (not inference mode, no cu_seqlens?)")
    if bool(c["intracard_pre_scan"]) != plan["splits"]:
        raise RuntimeError(f"fla's planner says splits={plan['splits']} ({plan['subseqs']}) but the pre-scan ran {c['intracard_pre_scan']} time(s)")


def write_outputs(h, case: Case, o, ht) -> None:
    """o.npy [1, T, H, V] and final_state.npy [N, H, K, V], via NaN-filled host buffers."""
    import numpy as np

    for name, t, shape in (("o", o[None], (1, case.T, case.H, case.V)),
                           ("final_state", ht, (len(case.seq_lens), case.H, case.K, case.V))):
        if tuple(t.shape) != shape:
            raise RuntimeError(f"{name}: fla returned shape {tuple(t.shape)}, expected {shape}")
        buf = h.poisoned(shape, np.float32 if t.dtype != _float64() else np.float64)
        buf[...] = t.detach().cpu().numpy()
        h.write_output(name, buf)


def _float64():
    import torch
    return torch.float64
