#!/usr/bin/env python3
"""fla-core's Triton decode kernel for KDA beside ours, same shapes, same timing.

Times, per decode batch size B (H = 64, K = V = 128, T = 1):
  fla: fla.ops.kda.fused_recurrent.fused_recurrent_kda_fwd (the kernel of the
       public fused_recurrent_kda) with use_qk_l2norm_in_kernel=True,
       use_gate_in_kernel=True, A_log, dt_bias and lower_bound=-5 (the in-kernel
       normalisation and gate this case is about), out-of-place fp32 final state
       (inplace_final_state=False, output_final_state=True, as the public API),
       bf16 q/k/v/g/beta, o preallocated so no zero-fill kernel is timed;
  v0, v3: our kernels through libkda_decode_capi.so (ctypes), same inputs.
Timing, identical for all three (METHOD.md): R distinct input/state sets per B
(together >= 1 GiB, >= 2 sets, as kda_decode_bench), launches rotate over them
so the state is read from HBM; "event" = CUDA events around one call (for fla
this includes Python's launch overhead when the GPU is faster than the host);
"graph" = one CUDA graph of N calls, events around each replay, / N; "cupti" =
the kernel's own duration from torch.profiler (no launch at all).
Also checks fla's and our outputs against a float64 torch implementation of
the same step on set 0 (relative L2), so that all three do the same work.

  python3 fla_bench.py --lib PATH/libkda_decode_capi.so [--batches 1,8,32,128,512] [--json OUT]
"""
import argparse
import ctypes
import json
import math
import statistics
import sys

import torch

K = V = 128
LOWER_BOUND = -5.0


class Args(ctypes.Structure):
    # kda_kernels.cuh, KdaDecodeArgs
    _fields_ = [(n, ctypes.c_void_p) for n in
                ("q", "k", "g_raw", "v", "beta", "a_log", "dt_bias", "state_in", "state_out", "o")] + [
        ("batch", ctypes.c_int), ("heads", ctypes.c_int), ("scale", ctypes.c_float),
        ("lower_bound", ctypes.c_float), ("eps", ctypes.c_float), ("v3_split", ctypes.c_int)]


def make_set(B, H, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    u = lambda shape, lo, hi, dtype: (torch.rand(shape, generator=g, device="cuda") * (hi - lo) + lo).to(dtype)
    return dict(
        q=u((B, 1, H, K), -2, 2, torch.bfloat16), k=u((B, 1, H, K), -2, 2, torch.bfloat16),
        g=u((B, 1, H, K), -2, 2, torch.bfloat16), v=u((B, 1, H, V), -2, 2, torch.bfloat16),
        beta=u((B, 1, H), 0.05, 0.95, torch.bfloat16), h0=u((B, H, K, V), -1, 1, torch.float32),
        out=torch.empty((B, 1, H, V), device="cuda", dtype=torch.bfloat16),
        o32=torch.empty((B, H, V), device="cuda", dtype=torch.float32),
        ht=torch.empty((B, H, K, V), device="cuda", dtype=torch.float32))


def reference_f64(s, A_log, dt_bias):
    """The step in float64: kernels/kda_decode/reference.h."""
    q, k, g = (s[n][:, 0].double() for n in ("q", "k", "g"))
    v, beta, S = s["v"][:, 0].double(), s["beta"][:, 0].double(), s["h0"].double()
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) * K ** -0.5
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    H = q.shape[1]
    gk = LOWER_BOUND * torch.sigmoid(A_log.double().exp()[None, :, None] * (g + dt_bias.double().view(H, K)))
    S = S * gk.exp()[..., None]
    u = beta[..., None] * (v - torch.einsum("bhk,bhkv->bhv", k, S))
    S = S + k[..., None] * u[..., None, :]
    return torch.einsum("bhk,bhkv->bhv", q, S), S


def rel_l2(c, r):
    return (float(torch.linalg.vector_norm(c.double() - r)) / float(torch.linalg.vector_norm(r)))


def time_calls(call, reps, graph_n, graph_reps, stream):
    for i in range(3):
        call(i)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ev = []
    for i in range(reps):
        a.record(stream)
        call(i)
        b.record(stream)
        b.synchronize()
        ev.append(1000.0 * a.elapsed_time(b))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for i in range(graph_n):
            call(i)
    graph.replay()
    torch.cuda.synchronize()
    gr = []
    for _ in range(graph_reps):
        a.record(stream)
        graph.replay()
        b.record(stream)
        b.synchronize()
        gr.append(1000.0 * a.elapsed_time(b) / graph_n)
    del graph
    # Kernel durations as CUPTI records them (no launch, no gap).
    prof_n = min(reps, 40)
    durations, kernel_names = [], []
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for i in range(prof_n):
                call(i)
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        durations = [e.time_range.elapsed_us() for e in kernels]
        kernel_names = sorted({e.name for e in kernels})
    except Exception as e:  # the other two timings stand without it
        print(f"torch.profiler: {e}", file=sys.stderr)
    return dict(event_us=statistics.median(ev), event_min_us=min(ev), graph_us=statistics.median(gr),
                graph_min_us=min(gr), cupti_us=statistics.median(durations) if durations else None,
                cupti_kernels_per_call=len(durations) / prof_n, kernels=kernel_names)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="")
    ap.add_argument("--batches", default="1,8,32,128,512")
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--json", default="")
    opts = ap.parse_args()
    import fla
    from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd

    lib = None
    if opts.lib:
        try:
            lib = ctypes.CDLL(opts.lib)
            assert lib.kda_decode_args_size() == ctypes.sizeof(Args), "KdaDecodeArgs layout differs"
        except Exception as e:  # reported, the fla side still runs
            print(f"our kernels through ctypes unavailable: {e}", file=sys.stderr)
            lib = None
    H = opts.heads
    torch.manual_seed(0)
    A_log = torch.log(torch.rand(H, device="cuda") * 15 + 1)
    dt_bias = torch.rand(H * K, device="cuda") * 2 - 1
    stream = torch.cuda.Stream()
    print(f"fla {getattr(fla, '__version__', '?')}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}, triton {__import__('triton').__version__}")
    rows = []
    for B in [int(x) for x in opts.batches.split(",")]:
        state_bytes = B * H * K * V * 4
        R = min(64, max(2, math.ceil((1 << 30) / (2 * state_bytes))))
        N = max(R, 8)
        reps = 200 if B <= 8 else 60 if B <= 128 else 20
        graph_reps = 30 if B <= 128 else 10
        with torch.cuda.stream(stream):
            sets = [make_set(B, H, 1000 * B + r) for r in range(R)]
            torch.cuda.synchronize()

            def fla_call(i):
                s = sets[i % R]
                o, ht = fused_recurrent_kda_fwd(
                    q=s["q"], k=s["k"], v=s["v"], g=s["g"], beta=s["beta"], A_log=A_log, dt_bias=dt_bias,
                    initial_state=s["h0"], scale=K ** -0.5, output_final_state=True, inplace_final_state=False,
                    use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, lower_bound=LOWER_BOUND, out=s["out"])
                return o, ht

            def ours(version, split=0):
                def call(i):
                    s = sets[i % R]
                    a = Args(s["q"].data_ptr(), s["k"].data_ptr(), s["g"].data_ptr(), s["v"].data_ptr(),
                             s["beta"].data_ptr(), A_log.data_ptr(), dt_bias.data_ptr(), s["h0"].data_ptr(),
                             s["ht"].data_ptr(), s["o32"].data_ptr(), B, H, K ** -0.5, LOWER_BOUND, 1e-6, split)
                    err = lib.kda_decode_launch(version, ctypes.byref(a), ctypes.c_void_p(stream.cuda_stream))
                    if err != 0:
                        raise RuntimeError(f"kda_decode_launch: cudaError {err}")
                return call

            # Same work: all three against float64 on set 0.
            ref_o, ref_S = reference_f64(sets[0], A_log, dt_bias)
            o, ht = fla_call(0)
            torch.cuda.synchronize()
            check = dict(fla_o=rel_l2(o[:, 0].float(), ref_o), fla_state=rel_l2(ht, ref_S))
            if lib is not None:
                for name, ver in (("v0", 0), ("v3", 3)):
                    ours(ver)(0)
                    torch.cuda.synchronize()
                    check[f"{name}_o"] = rel_l2(sets[0]["o32"], ref_o)
                    check[f"{name}_state"] = rel_l2(sets[0]["ht"], ref_S)
            del ref_o, ref_S, o, ht
            row = dict(batch=B, heads=H, sets=R, graph_launches=N, state_bytes=state_bytes, rel_l2_vs_f64=check)
            row["fla"] = time_calls(fla_call, reps, N, graph_reps, stream)
            if lib is not None:
                row["v0"] = time_calls(ours(0), reps, N, graph_reps, stream)
                row["v3"] = time_calls(ours(3), reps, N, graph_reps, stream)
                if B * H < torch.cuda.get_device_properties(0).multi_processor_count:
                    # v3 splits each (b, h) over 2 blocks here; also time one block per (b, h).
                    row["v3_one_block_per_head"] = time_calls(ours(3, 1), reps, N, graph_reps, stream)
            del sets
            torch.cuda.empty_cache()
        rows.append(row)
        line = f"B={B:4d} R={R:2d} fla ev {row['fla']['event_us']:8.2f} gr {row['fla']['graph_us']:8.2f} " \
               f"cupti {row['fla']['cupti_us'] or 0:8.2f} us"
        if lib is not None:
            for n in ("v0", "v3"):
                line += f" | {n} ev {row[n]['event_us']:8.2f} gr {row[n]['graph_us']:8.2f} cupti {row[n]['cupti_us'] or 0:8.2f}"
            line += f" | fla/v3 gr {row['fla']['graph_us'] / row['v3']['graph_us']:.3f}" \
                    f" cupti {row['fla']['cupti_us'] / row['v3']['cupti_us']:.3f}"
        if "v3_one_block_per_head" in row:
            t = row["v3_one_block_per_head"]
            line += f" | v3 one block/head: gr {t['graph_us']:.2f} cupti {t['cupti_us'] or 0:.2f}"
        line += " | rel_l2 " + " ".join(f"{k}={v:.1e}" for k, v in check.items())
        print(line, flush=True)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(dict(fla=getattr(fla, "__version__", "?"), torch=torch.__version__,
                           device=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
