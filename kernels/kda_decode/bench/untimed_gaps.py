#!/usr/bin/env python3
"""Where kda_decode_driver's time goes between densefeed's brackets.

Runs the gate's trusted benchmark driver the way the bench stage does (bench
mode, one input set per iteration, the outside clock's socket on
DENSEFEED_CLOCK_FD, SOCK_SEQPACKET with the kernel's SO_TIMESTAMPNS stamps)
for v0 and v3 at ITERS and 2 x ITERS timed iterations, and prints per run:
the process's wall time (ms), the gap before each timed iteration (ms from
the previous bracket's end to this one's begin: the driver's untimed work,
drawing inputs, hashing and writing outputs) and the median bracket (the
kernel, ms). The source of timing_checks.h kUntimedLoadFactor: on the
2-core CI-like VM, idle, runs of consecutive gaps went from 38-60 ms to
116-208 ms while the brackets did not move.

    untimed_gaps.py [--bin build/bin] [--repeats 3] [--iters 5] [--batch 8]
                    [--heads 64] [--out DIR]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import tempfile
import time

SO_TIMESTAMPNS = 35  # <asm-generic/socket.h>; also SCM_TIMESTAMPNS
EMPTY_BRACKETS = 8   # orchestrator/launch/outside_clock.h kEmptyBrackets


def run(args, version, iters, out):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    warmup = 1
    env = dict(os.environ, DENSEFEED_MODE='bench', DENSEFEED_SEED='1', DENSEFEED_OUT=out, DENSEFEED_ITERS=str(iters),
               DENSEFEED_WARMUP=str(warmup), DENSEFEED_PARAMS=json.dumps({'version': version, 'device': 'cpu'}),
               DENSEFEED_KERNEL=json.dumps({'library': 'libkda_decode_kernel.so', 'symbol': 'densefeed_kda_decode_run'}),
               DENSEFEED_KERNEL_PATH=args.bin, DENSEFEED_ARM_PROJECT=args.project, DENSEFEED_TRUSTED_PROJECT=args.project,
               DENSEFEED_INPUT_SEEDS=','.join(str(1000 + i) for i in range(warmup + iters)),
               DENSEFEED_CLOCK_FD=str(theirs.fileno()))
    start = time.monotonic()
    proc = subprocess.Popen([os.path.join(args.bin, 'kda_decode_driver'), '--batch', str(args.batch), '--heads', str(args.heads)],
                            env=env, pass_fds=(theirs.fileno(),), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    theirs.close()
    stamps = []
    while True:
        data, ancillary, _, _ = ours.recvmsg(1, socket.CMSG_SPACE(16))
        if not data:
            break
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, ns = struct.unpack('qq', payload[:16])
                stamps.append(sec * 10**9 + ns)
    err = proc.stderr.read().decode()
    if proc.wait() != 0:
        raise SystemExit(f'kda_decode_driver {version}: exit {proc.returncode}: {err.strip()}')
    wall_ms = (time.monotonic() - start) * 1e3
    pairs = [(stamps[2 * i], stamps[2 * i + 1]) for i in range(len(stamps) // 2)][EMPTY_BRACKETS:]
    gaps = [(pairs[i][0] - pairs[i - 1][1]) / 1e6 for i in range(1, len(pairs))]
    brackets = [(e - b) / 1e6 for b, e in pairs[warmup:]]
    return wall_ms, gaps, statistics.median(brackets)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--bin', default=os.path.join(here, '..', '..', '..', 'build', 'bin'))
    parser.add_argument('--project', default=os.path.join(here, '..', '..', '..'))
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--iters', type=int, default=5)
    parser.add_argument('--batch', type=int, default=8)
    parser.add_argument('--heads', type=int, default=64)
    parser.add_argument('--out', default=None, help='the driver\'s output folder, emptied before every run (default: a temporary one)')
    args = parser.parse_args()
    args.bin = os.path.abspath(args.bin)
    args.project = os.path.abspath(args.project)
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or scratch
        for _ in range(args.repeats):
            for version in ('v0', 'v3'):
                for iters in (args.iters, 2 * args.iters):
                    wall, gaps, bracket = run(args, version, iters, out)
                    print(f'{version} iters {iters:3d}  wall {wall:7.0f} ms  bracket median {bracket:6.2f} ms  '
                          f'gaps ms {[round(g) for g in gaps]}')


if __name__ == '__main__':
    main()
