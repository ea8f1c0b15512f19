#!/usr/bin/python3
"""Writes PyTorch-profiler-style (Kineto) Chrome traces, one file per rank, for
tests/perf/trace_throughput.py and tests/perf/hta_compare.py.

Each profiler step on each rank: a ProfilerStep annotation (CPU and GPU),
a host-to-device copy, then per layer an aten::linear > aten::mm >
cudaLaunchKernel chain whose gemm kernel runs on stream 7 (with an ac2g flow
pair, as Kineto writes), and every few layers an nccl:all_reduce whose
ncclDevKernel runs on stream 20 while later gemms run (partly hidden, partly
exposed: how much varies per rank and step). Events carry the args Kineto
writes (External id, correlation, grid, block, occupancy...) so that the
bytes per event are realistic (~450 B). Times are epoch microseconds, whole
(--decimals 0, what HTA reads without rounding) or with nanoseconds
(--decimals 3, what PyTorch >= 2.3 writes).

usage: kineto_trace_gen.py DIR --ranks 4 --mb-per-rank 250 [--decimals 3] [--seed 1]
"""
import argparse
import json
import os
import random

EPOCH_US = 1712345678000000

GEMM = ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4>"
        "(cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4::Params)")
ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
               "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, "
               "at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)"
               "::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)")
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


class Writer:
    def __init__(self, f, decimals):
        self.f = f
        self.decimals = decimals
        self.buf = []
        self.size = 0
        self.first = True

    def t(self, us):
        # us is an integer number of nanoseconds since EPOCH_US here.
        if self.decimals == 0:
            return str(EPOCH_US + us // 1000)
        return "%d.%03d" % (EPOCH_US + us // 1000, us % 1000)

    def d(self, ns):
        if self.decimals == 0:
            return str(max(0, ns // 1000))
        return "%d.%03d" % (ns // 1000, ns % 1000)

    def emit(self, text):
        if not self.first:
            text = ",\n" + text
        self.first = False
        self.buf.append(text)
        self.size += len(text)
        if len(self.buf) >= 4096:
            self.flush()

    def flush(self):
        self.f.write("".join(self.buf))
        self.buf = []


def x_cpu(w, cat, name, ts, dur, pid, tid, ext, extra=""):
    w.emit('  {\n    "ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %s, "dur": %s,\n'
           '    "args": {\n      "External id": %d,%s "Record function id": 0, "Ev Idx": %d\n    }\n  }'
           % (cat, name, pid, tid, w.t(ts), w.d(dur), ext, extra, ext))


def runtime(w, name, ts, dur, pid, tid, corr, ext):
    w.emit('  {\n    "ph": "X", "cat": "cuda_runtime", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %s, "dur": %s,\n'
           '    "args": {\n      "External id": %d, "cbid": 211, "correlation": %d\n    }\n  }'
           % (name, pid, tid, w.t(ts), w.d(dur), ext, corr))


def kernel(w, cat, name, ts, dur, stream, corr, ext):
    if cat == "kernel":
        extra = ('"registers per thread": 128, "shared memory": 73728, "blocks per SM": 1.185185, "warps per SM": 4.740741, '
                 '"grid": [32, 4, 1], "block": [128, 1, 1], "est. achieved occupancy %": 6')
    else:
        extra = '"bytes": 16777216, "memory bandwidth (GB/s)": 24.5'
    w.emit('  {\n    "ph": "X", "cat": "%s", "name": "%s", "pid": 0, "tid": %d,\n    "ts": %s, "dur": %s,\n'
           '    "args": {\n      "External id": %d, "queued": 0, "device": 0, "context": 1, "stream": %d, "correlation": %d,\n'
           '      %s\n    }\n  }' % (cat, name, stream, w.t(ts), w.d(dur), ext, stream, corr, extra))


def flow(w, ph, ts, pid, tid, corr):
    w.emit('  {\n    "ph": "%s", "id": %d, "pid": %d, "tid": %d, "ts": %s,\n    "cat": "ac2g", "name": "ac2g"%s\n  }'
           % (ph, corr, pid, tid, w.t(ts), ', "bp": "e"' if ph == "f" else ""))


def write_rank(path, rank, world, target_bytes, decimals, seed):
    rng = random.Random(seed * 1000 + rank)
    pid, tid = 1000 + rank, 1000 + rank
    with open(path, "w") as f:
        f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {"id": 0, "name": "NVIDIA H200", "totalGlobalMem": '
                '150121086976, "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024, "numSms": 132}\n  ],\n'
                '  "distributedInfo": {"backend": "nccl", "rank": %d, "world_size": %d},\n  "traceEvents": [\n' % (rank, world))
        w = Writer(f, decimals)
        w.emit('  {"name": "process_name", "ph": "M", "ts": 0, "pid": %d, "tid": 0, "args": {"name": "python3"}}' % pid)
        w.emit('  {"name": "thread_name", "ph": "M", "ts": 0, "pid": %d, "tid": %d, "args": {"name": "python3"}}' % (pid, tid))
        w.emit('  {"name": "process_name", "ph": "M", "ts": 0, "pid": 0, "tid": 0, "args": {"name": "python3"}}')
        cpu = 0          # ns since EPOCH_US
        gpu7 = 0         # when stream 7 is free
        gpu20 = 0        # when stream 20 is free
        corr = 1
        ext = 1
        step = 0
        while w.size < target_bytes:
            step_start = cpu
                        # H2D copy
            runtime(w, "cudaMemcpyAsync", cpu + 2000, 8000, pid, tid, corr, ext)
            start = max(gpu7, cpu + 12000)
            kernel(w, "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", start, 40000, 7, corr, ext)
            gpu7 = start + 40000
            corr += 1
            ext += 1
            cpu += 12000
            for layer in range(24):
                lin = cpu
                x_cpu(w, "cpu_op", "aten::linear", lin, 30000, pid, tid, ext)
                x_cpu(w, "cpu_op", "aten::mm", lin + 3000, 24000, pid, tid, ext + 1)
                launch = lin + 10000
                runtime(w, "cudaLaunchKernel", launch, 6000 + rng.randrange(4000), pid, tid, corr, ext + 1)
                flow(w, "s", launch, pid, tid, corr)
                start = max(gpu7, launch + 14000)
                dur = 15000 + rng.randrange(30000)
                kernel(w, "kernel", GEMM, start, dur, 7, corr, ext + 1)
                flow(w, "f", start, 0, 7, corr)
                gpu7 = start + dur
                corr += 1
                ext += 2
                cpu += 32000
                # GELU after each gemm
                x_cpu(w, "cpu_op", "aten::gelu", cpu, 12000, pid, tid, ext)
                runtime(w, "cudaLaunchKernel", cpu + 3000, 5000, pid, tid, corr, ext)
                start = max(gpu7, cpu + 9000)
                dur = 8000 + rng.randrange(6000)
                kernel(w, "kernel", ELEMENTWISE, start, dur, 7, corr, ext)
                gpu7 = start + dur
                corr += 1
                ext += 1
                cpu += 14000
                if layer % 6 == 5:
                    x_cpu(w, "cpu_op", "nccl:all_reduce", cpu, 20000, pid, tid, ext)
                    runtime(w, "cudaLaunchKernel", cpu + 5000, 7000, pid, tid, corr, ext)
                    start = max(gpu20, cpu + 12000 + rng.randrange(50000))
                    dur = 100000 + rng.randrange(200000) + rank * 20000
                    kernel(w, "kernel", NCCL, start, dur, 20, corr, ext)
                    gpu20 = start + dur
                    corr += 1
                    ext += 1
                    cpu += 22000
            # The gradient all-reduce at the end of the step: little compute left to hide it.
            x_cpu(w, "cpu_op", "nccl:all_reduce", cpu, 20000, pid, tid, ext)
            runtime(w, "cudaLaunchKernel", cpu + 5000, 7000, pid, tid, corr, ext)
            start = max(gpu20, cpu + 12000)
            dur = 200000 + rng.randrange(300000)
            kernel(w, "kernel", NCCL, start, dur, 20, corr, ext)
            gpu20 = start + dur
            corr += 1
            ext += 1
            cpu += 22000
            # Host waits for the device at the end of the step.
            end = max(cpu, gpu7, gpu20) + 5000
            x_cpu(w, "user_annotation", "ProfilerStep#%d" % step, step_start, end - step_start, pid, tid, ext)
            w.emit('  {\n    "ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#%d", "pid": 0, "tid": 7,\n'
                   '    "ts": %s, "dur": %s,\n    "args": {\n      "External id": %d\n    }\n  }'
                   % (step, w.t(step_start), w.d(end - step_start), ext))
            ext += 1
            cpu = end + 20000
            step += 1
        w.flush()
        f.write('\n  ],\n  "traceName": "%s",\n  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1712345000000000000\n}\n'
                % os.path.basename(path))
    return step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--mb-per-rank", type=float, default=250)
    p.add_argument("--decimals", type=int, choices=[0, 3], default=3)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    for r in range(a.ranks):
        path = os.path.join(a.dir, "rank%d.json" % r)
        steps = write_rank(path, r, a.ranks, int(a.mb_per_rank * 1e6), a.decimals, a.seed)
        print("%s: %d steps, %.1f MB" % (path, steps, os.path.getsize(path) / 1e6))


if __name__ == "__main__":
    main()
