"""Compares what direct_gate.py's arms wrote, with the metrics densefeed's gate uses.

Per case, output and arm, against the reference arm (fla-core 0.6.0, CP off):
  rel_l2   ||c - r||_2 / ||r||_2          (float64 arithmetic)
  max_abs  max |c - r|, and where
  slices   the same per slice along the gate's partition axis (o: 16 equal
           slices along T; final_state: one per sequence), the worst and the
           first over the bound
and the verdict under the gate's tolerance (every bound must hold; max_abs is
skipped when max |r| is under it, as densefeed does). With an fp64 arm it also
prints every arm against the fp64 recurrence: the floor the tolerance is
derived from.

    python3 compare_direct.py WORK [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import direct_gate  # noqa: E402

GATE_ARMS = ("fla-0.5.2", "fla-0.6.0")
CONTROL_ARMS = ("fla-0.6.0-off", "fla-0.5.2-off")


def _dev():
    # float64 arithmetic on the GPU when there is one (the arrays reach 268M
    # elements), else on the CPU; numpy only reads and writes the files.
    try:
        import torch
        return torch, ("cuda" if torch.cuda.is_available() else "cpu")
    except ImportError:  # pragma: no cover
        raise SystemExit("compare_direct.py needs torch (the harnesses' interpreter has it)")


def as64(a: np.ndarray):
    torch, dev = _dev()
    return torch.from_numpy(np.ascontiguousarray(a)).to(dev).to(torch.float64)


def metrics(c, r64, axis: int | None, parts: int | None, tol: dict) -> dict:
    """c: candidate array (numpy, any float dtype); r64: the reference as a float64 tensor."""
    torch, _ = _dev()
    c64 = as64(c)
    bad = int((~torch.isfinite(c64)).sum())
    d = c64 - r64
    del c64
    rn = float(torch.linalg.vector_norm(r64))
    rel = float(torch.linalg.vector_norm(d)) / rn if rn > 0 else float("inf")
    ad = d.abs_()
    flat = int(torch.argmax(torch.nan_to_num(ad, nan=float("inf")).reshape(-1)))
    idx = np.unravel_index(flat, tuple(ad.shape))
    ref_max = float(r64.abs().max())
    out = {"rel_l2": rel, "max_abs": float(ad.reshape(-1)[flat]), "where": [int(i) for i in idx], "ref_max": ref_max,
           "nonfinite": bad}
    if axis is not None:
        n = ad.shape[axis]
        bounds = [int(b[0]) for b in np.array_split(np.arange(n), parts if parts else n)] + [n]
        sl = []
        for a0, a1 in zip(bounds[:-1], bounds[1:]):
            dd = ad.narrow(axis, a0, a1 - a0)
            rnn = float(torch.linalg.vector_norm(r64.narrow(axis, a0, a1 - a0)))
            sl.append({"from": a0, "to": a1, "rel_l2": float(torch.linalg.vector_norm(dd)) / rnn if rnn > 0 else 0.0,
                       "max_abs": float(dd.max())})
        out["slices"] = sl
    del ad, d
    if tol:
        fails = []
        if bad:
            fails.append(f"{bad} non-finite")
        if "rel_l2" in tol and not rel <= tol["rel_l2"]:
            fails.append(f"rel_l2 {rel:.2e} > {tol['rel_l2']:.1e}")
        if "max_abs" in tol and ref_max >= tol["max_abs"] and not out["max_abs"] <= tol["max_abs"]:
            fails.append(f"max_abs {out['max_abs']:.2e} > {tol['max_abs']:.1e}")
        out["verdict"] = "red" if fails else "green"
        out["why"] = fails
        if axis is not None:
            out["first_failing_slice"] = next(
                (k for k, s in enumerate(out["slices"])
                 if ("rel_l2" in tol and s["rel_l2"] > tol["rel_l2"])
                 or ("max_abs" in tol and ref_max >= tol["max_abs"] and s["max_abs"] > tol["max_abs"])), None)
    return out


def metrics_t(a64, r64) -> dict:
    """rel_l2 and max_abs of two float64 tensors (the reference against fp64)."""
    torch, _ = _dev()
    d = (a64 - r64).abs_()
    return {"rel_l2": float(torch.linalg.vector_norm(d)) / float(torch.linalg.vector_norm(r64)), "max_abs": float(d.max())}


def load(work: Path, arm: str, cid: str, name: str):
    p = work / arm / cid / f"{name}.npy"
    return np.load(p, allow_pickle=False) if p.is_file() else None


def plan_of(work: Path, cid: str) -> dict | None:
    for arm in GATE_ARMS:
        p = work / "logs" / arm / f"{cid}.json"
        if p.is_file():
            rec = json.loads(p.read_text())
            if rec.get("info"):
                return rec["info"]["plan"]
    return None


def fmt_plan(plan: dict | None) -> str:
    """'not cut', or per sequence 1 (not cut) or NxL (N sub-sequences, the first N-1 of L tokens)."""
    if not plan:
        return "?"
    if not plan["splits"]:
        return "not cut"
    b, k, parts = plan["boundaries"], 0, []
    for n in plan["subseqs"]:
        parts.append("1" if n == 1 else f"{n}x{b[k + 1] - b[k]}")
        k += n
    return "+".join(parts)


def bench_section(work: Path, cases: list[dict]) -> list[dict]:
    """Bench-mode runs (no NaN fill of fla's allocations): chunk_kda device time per
    call, and whether their outputs equal the gate-mode outputs of the same arm bit for bit."""
    rows = []
    for folder in sorted(p.name for p in work.iterdir() if p.is_dir() and p.name.startswith("bench-")):
        arm = folder[len("bench-"):]
        for i, case in enumerate(cases):
            cid = direct_gate.case_id(i, case)
            logp = work / "logs" / folder / f"{cid}.json"
            if not logp.is_file():
                continue
            rec = json.loads(logp.read_text())
            info = rec.get("info") or {}
            ms = sorted(info.get("bench_ms", []))
            row = {"arm": arm, "case_id": cid, "median_ms": ms[len(ms) // 2] if ms else None,
                   "min_ms": ms[0] if ms else None, "max_ms": ms[-1] if ms else None, "n": len(ms), "same_bits_as_gate_mode": {}}
            for name in ("o", "final_state"):
                b, g = load(work, folder, cid, name), load(work, arm, cid, name)
                row["same_bits_as_gate_mode"][name] = None if b is None or g is None else bool(np.array_equal(b, g))
            rows.append(row)
    if rows:
        print("\n== bench mode: chunk_kda per call (CUDA events; median [min .. max] of n), outputs vs the gate-mode run")
        for r in rows:
            t = "no samples" if r["median_ms"] is None else f"{r['median_ms']:8.3f} ms [{r['min_ms']:.3f} .. {r['max_ms']:.3f}] n={r['n']}"
            print(f"{r['arm']:16s} {r['case_id']:40s} {t}  same bits as gate mode: {r['same_bits_as_gate_mode']}")
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("work")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    work = Path(a.work)
    gate = direct_gate.load_gate()
    cases = direct_gate.expand_cases(gate)
    outputs = gate["outputs"]
    present = [arm for arm in ("reference",) + GATE_ARMS + CONTROL_ARMS + ("fp64",) if (work / arm).is_dir()]
    results = []
    for i, case in enumerate(cases):
        cid = direct_gate.case_id(i, case)
        plan = plan_of(work, cid)
        for name, spec in outputs.items():
            part = spec.get("partition") or {}
            axis, parts = part.get("axis"), part.get("parts")
            ref = load(work, "reference", cid, name)
            fp = load(work, "fp64", cid, name) if "fp64" in present else None
            ref = as64(ref) if ref is not None else None
            fp = as64(fp) if fp is not None else None
            row = {"case_id": cid, "case": case, "plan": plan, "output": name, "vs_reference": {}, "vs_fp64": {}}
            for arm in present:
                if arm in ("reference", "fp64"):
                    continue
                c = load(work, arm, cid, name)
                if c is None or ref is None:
                    row["vs_reference"][arm] = None
                    continue
                row["vs_reference"][arm] = metrics(c, ref, axis, parts, spec.get("tolerance", {}))
            if fp is not None:
                for arm in [x for x in present if x != "fp64"]:
                    c = load(work, arm, cid, name) if arm != "reference" else None
                    if arm == "reference" and ref is not None:
                        m = metrics_t(ref, fp)
                        row["vs_fp64"][arm] = m
                        continue
                    if c is not None:
                        m = metrics(c, fp, None, None, {})
                        row["vs_fp64"][arm] = m
            results.append(row)

    def cell(m, verdict=True):
        if m is None:
            return "missing".ljust(27)
        s = f"{m['rel_l2']:9.2e} {m['max_abs']:9.2e}"
        if verdict and "verdict" in m:
            s += f" {m['verdict']:5s}"
        return s.ljust(27)

    tol_line = ", ".join(f"{n}: rel_l2 <= {s['tolerance'].get('rel_l2')}, max_abs <= {s['tolerance'].get('max_abs')}" for n, s in outputs.items())
    print(f"\n== gate fla-intracard-cp, candidate (CP on) vs reference (fla-core 0.6.0, CP off); bounds {tol_line}")
    hdr = f"{'case':40s} {'fla cut':22s} {'output':11s} "
    arms = [x for x in GATE_ARMS if x in present]
    hdr += " ".join(f"{(arm + ' rel_l2 max_abs'):27s}" for arm in arms)
    print(hdr)
    for row in results:
        line = f"{row['case_id']:40s} {fmt_plan(row['plan']):22s} {row['output']:11s} "
        line += " ".join(cell(row["vs_reference"].get(arm)) for arm in arms)
        print(line)
    verdicts = {}
    for arm in arms:
        reds = [(r["case_id"], r["output"]) for r in results if (r["vs_reference"].get(arm) or {}).get("verdict", "missing") != "green"]
        verdicts[arm] = "green" if not reds else "red"
        cases_red = sorted({c for c, _ in reds})
        print(f"{arm}: {verdicts[arm]}" + (f" ({len(cases_red)} of {len(cases)} cases red: {', '.join(cases_red)})" if reds else f" (all {len(cases)} cases)"))

    # where along the sequence (o) / which sequence (final_state) the error sits
    print("\n== per slice, rel_l2 (o: 16 equal slices along T; final_state: per sequence); * = over the bound")
    for arm in arms:
        for row in results:
            m = row["vs_reference"].get(arm)
            if not m or "slices" not in m:
                continue
            tol = outputs[row["output"]]["tolerance"]
            cells = ["%.0e%s" % (s["rel_l2"], "*" if s["rel_l2"] > tol.get("rel_l2", math.inf) else "") for s in m["slices"]]
            print(f"{arm:10s} {row['case_id']:40s} {row['output']:11s} first over: {str(m.get('first_failing_slice')):4s} " + " ".join(cells))

    controls = [x for x in present if x in CONTROL_ARMS]
    if controls or "fp64" in present:
        print("\n== floor: rel_l2 / max_abs of each arm against the fp64 recurrence; controls against the reference")
        cols = [("reference", "fp64")] + [(arm, "fp64") for arm in arms] + [(c, "ref") for c in controls]
        print(f"{'case':40s} {'output':11s} " + " ".join(f"{(x + ' vs ' + y):27s}" for x, y in cols))
        for row in results:
            cs = []
            for x, y in cols:
                m = row["vs_fp64"].get(x) if y == "fp64" else row["vs_reference"].get(x)
                cs.append(cell(m, verdict=False))
            print(f"{row['case_id']:40s} {row['output']:11s} " + " ".join(cs))
        for name in outputs:
            rows = [r for r in results if r["output"] == name and r["vs_fp64"].get("reference")]
            if rows:
                rel = [r["vs_fp64"]["reference"]["rel_l2"] for r in rows]
                mab = [r["vs_fp64"]["reference"]["max_abs"] for r in rows]
                print(f"floor of the unpartitioned path (reference vs fp64), {name}: rel_l2 {min(rel):.2e} .. {max(rel):.2e}, "
                      f"max_abs {min(mab):.2e} .. {max(mab):.2e} over {len(rows)} cases")
            for c in controls:
                rows = [r for r in results if r["output"] == name and r["vs_reference"].get(c)]
                if rows:
                    rel = [r["vs_reference"][c]["rel_l2"] for r in rows]
                    mab = [r["vs_reference"][c]["max_abs"] for r in rows]
                    print(f"{c} vs reference, {name}: rel_l2 {min(rel):.2e} .. {max(rel):.2e}, max_abs {min(mab):.2e} .. {max(mab):.2e}")

    bench = bench_section(work, cases)
    if a.json:
        Path(a.json).write_text(json.dumps({"verdicts": verdicts, "results": results, "bench": bench}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
