"""The KDA recurrence in fp64 (torch, no fla): the floor the gate's tolerance is derived from.

Same arguments and inputs as reference.py (kda_case.make_inputs, upcast to
fp64), same outputs in float64. device_run.sh compares the unpartitioned fla
path against it to measure that path's own error on every case; the gate
itself does not run it.

The recurrence (fla/ops/kda/naive.py, naive_recurrent_kda), per head, token t:
    S <- diag(exp(g_t)) S
    S <- S + beta_t k_t (v_t - k_t^T S)^T
    o_t = scale q_t^T S
computed exactly in chunks of C = 64 tokens (the WY form fla's chunk_kda
uses, with fp64 triangular solves instead of fla's fp32/TF32 kernels): with
G_i = cumulative log decay from the chunk's start through token i,
    A_ij  = beta_i k_i^T diag(exp(G_i - G_j)) k_j        (j < i)
    (I + A) U = diag(beta) V,   (I + A) W = diag(beta) (exp(G) * K)
    R = U - W S0                                           (new values)
    o = scale [(exp(G) * Q) S0 + Aqk R],  Aqk_ij = q_i^T diag(exp(G_i - G_j)) k_j  (j <= i)
    S = diag(exp(G_C)) S0 + (exp(G_C - G) * K)^T R.
--self-test checks the chunked form against the token-by-token recurrence.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kda_case  # noqa: E402

C = kda_case.CHUNK


def kda_fp64_chunked(q, k, v, g, beta, h0, cu_seqlens, scale):
    """q, k, g [T, H, K]; v [T, H, V]; beta [T, H]; h0 [N, H, K, V]; all float64.
    Returns o [T, H, V] and final states [N, H, K, V] (float64)."""
    import torch

    T, H, K = q.shape
    V = v.shape[-1]
    o = torch.empty(T, H, V, dtype=torch.float64, device=q.device)
    finals = []
    # Chunks per batch of the intra-chunk precomputation: keeps the
    # [G, H, C, C, K] decay tensor near 2**27 elements (1 GiB in fp64).
    group = max(1, (1 << 27) // (H * C * C * K))
    tril = torch.tril(torch.ones(C, C, dtype=torch.bool, device=q.device))
    strict = torch.tril(torch.ones(C, C, dtype=torch.bool, device=q.device), diagonal=-1)
    eye = torch.eye(C, dtype=torch.float64, device=q.device)
    for n in range(len(cu_seqlens) - 1):
        bos, eos = cu_seqlens[n], cu_seqlens[n + 1]
        L = eos - bos
        nc = -(-L // C)
        pad = nc * C - L

        def chunks(x):
            # [L, H, ...] -> [nc, H, C, ...]; padded tokens (k = q = v = beta = g = 0) leave S unchanged
            x = x[bos:eos]
            if pad:
                x = torch.cat([x, x.new_zeros(pad, *x.shape[1:])])
            x = x.reshape(nc, C, *x.shape[1:])
            return x.transpose(1, 2).contiguous()

        qc, kc, vc, gc, bc = chunks(q * scale), chunks(k), chunks(v), chunks(g).cumsum(dim=2), chunks(beta)
        S = h0[n].clone()
        for c0 in range(0, nc, group):
            c1 = min(c0 + group, nc)
            q_, k_, v_, g_, b_ = qc[c0:c1], kc[c0:c1], vc[c0:c1], gc[c0:c1], bc[c0:c1]
            diff = g_[:, :, :, None, :] - g_[:, :, None, :, :]              # [G, H, Ci, Cj, K] = G_i - G_j
            E = torch.exp(diff.masked_fill(~tril[None, None, :, :, None], float("-inf")))
            del diff
            kE = E * k_[:, :, None, :, :]                                    # exp(G_i - G_j) k_j
            del E
            Akk = (kE * k_[:, :, :, None, :]).sum(-1) * strict               # k_i . (...) k_j, j < i
            Aqk = (kE * q_[:, :, :, None, :]).sum(-1)                        # q_i . (...) k_j, j <= i
            del kE
            Lm = eye + b_[..., None] * Akk
            U = torch.linalg.solve_triangular(Lm, b_[..., None] * v_, upper=False, unitriangular=True)
            W = torch.linalg.solve_triangular(Lm, b_[..., None] * (torch.exp(g_) * k_), upper=False, unitriangular=True)
            Qt = q_ * torch.exp(g_)
            gl = g_[:, :, -1, :]                                             # [G, H, K]
            Kh = k_ * torch.exp(gl[:, :, None, :] - g_)
            for j in range(c1 - c0):
                R = U[j] - W[j] @ S                                          # [H, C, V]
                oc = Qt[j] @ S + Aqk[j] @ R                                  # [H, C, V]
                t0 = bos + (c0 + j) * C
                t1 = min(t0 + C, eos)
                o[t0:t1] = oc[:, : t1 - t0].transpose(0, 1)
                S = torch.exp(gl[j])[..., None] * S + Kh[j].transpose(-1, -2) @ R
        finals.append(S)
    return o, torch.stack(finals)


def kda_fp64_tokens(q, k, v, g, beta, h0, cu_seqlens, scale):
    """The same recurrence token by token (slow; for --self-test)."""
    import torch

    T, H, K = q.shape
    o = torch.empty(T, H, v.shape[-1], dtype=torch.float64, device=q.device)
    finals = []
    for n in range(len(cu_seqlens) - 1):
        S = h0[n].clone()
        for t in range(cu_seqlens[n], cu_seqlens[n + 1]):
            S = S * torch.exp(g[t])[..., None]
            pred = torch.einsum("hk,hkv->hv", k[t], S)
            S = S + torch.einsum("hk,hv->hkv", beta[t][:, None] * k[t], v[t] - pred)
            o[t] = torch.einsum("hk,hkv->hv", q[t] * scale, S)
        finals.append(S)
    return o, torch.stack(finals)


def self_test(device: str) -> int:
    import torch

    worst = 0.0
    for regime, lens, H, K, V in (("long-memory", (70, 130), 2, 16, 8), ("fast-decay", (64, 1, 200), 3, 32, 16)):
        case = kda_case.Case(T=sum(lens), seq_lens=lens, H=H, K=K, V=V, R=min(8, K), regime=regime, max_splits=32)
        x = {n: t.to(torch.float64) for n, t in kda_case.make_inputs(case, seed=12345, device=device).items()}
        # Larger, non-normalised values than the gate's, so a wrong term cannot hide.
        x["k"] = x["k"] * 1.5
        x["g"] = x["g"] - 0.05
        args = (x["q"], x["k"], x["v"], x["g"], x["beta"], x["h0"], case.cu_seqlens, K ** -0.5)
        oc, sc = kda_fp64_chunked(*args)
        ot, st = kda_fp64_tokens(*args)
        for name, a, b in (("o", oc, ot), ("final_state", sc, st)):
            rel = float((a - b).norm() / b.norm())
            worst = max(worst, rel)
            print(f"self-test {regime} seq_lens={lens}: {name} chunked vs token-by-token rel_l2 {rel:.2e}")
    ok = worst < 1e-12
    print(f"self-test {'passed' if ok else 'FAILED'}: worst rel_l2 {worst:.2e} (bound 1e-12)")
    return 0 if ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="KDA recurrence in fp64 (floor of the fla-intracard-cp gate)")
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "--self-test":
        import torch
        return self_test("cuda" if torch.cuda.is_available() else "cpu")
    kda_case.add_case_args(p)
    a = p.parse_args(argv)
    case = kda_case.case_from_args(a)
    h = kda_case.protocol(a)
    if h.mode != "gate":
        raise RuntimeError(f"DENSEFEED_MODE={h.mode}: the fp64 reference writes gate outputs only")
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    t0 = time.perf_counter()
    x = {n: t.to(torch.float64) for n, t in kda_case.make_inputs(case, h.seed, device=device).items()}
    o, ht = kda_fp64_chunked(x["q"], x["k"], x["v"], x["g"], x["beta"], x["h0"], case.cu_seqlens, case.K ** -0.5)
    if device == "cuda":
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    kda_case.write_outputs(h, case, o, ht)
    info = {"role": "fp64", "case": {"T": case.T, "seq_lens": case.seq_lens, "H": case.H, "regime": case.regime},
            "seconds": {"op": round(t1 - t0, 3), "write": round(time.perf_counter() - t1, 3)}}
    print("fla-intracard-cp: " + json.dumps(info), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
