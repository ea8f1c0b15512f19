"""A multi-rank gate harness on the CPU (issue 20): a chunked linear scan
s_t = a_t * s_{t-1} + b_t over T steps of D channels, the sequence sharded
across DENSEFEED_WORLD_SIZE ranks as context parallelism shards it.

Each rank draws the whole input from DENSEFEED_SEED (the same seed for every
rank), scans its own shard from a zero state to get the shard's affine map
(s_end = A * s_start + B), and sends (A, B) to rank 0 over a loopback TCP
socket at MASTER_ADDR:MASTER_PORT. Rank 0 chains the maps (S_{k+1} = A_k S_k +
B_k from the initial state) and sends every rank its incoming state and the
final state; each rank then finishes its shard. Outputs: y [T, D] (the state
at every step; partition axis 0) and final [D] (the last state, which every
rank holds). With DENSEFEED_OUT per rank (rank_outputs: per_rank) each rank
writes its shard of y and final; otherwise rank 0 gathers the shards and
writes both.

--reference: the unpartitioned sequential scan in one process.
--mode MODE: how rank --bad misbehaves (honest, crash, hang, early, wrong,
norank (removes its folder, or empties it where it cannot), escape, lopsided
(rank 0 writes every shard, rank --bad none), ptrace (tries to attach to
every process it can see but itself and its sandbox's init, and reports
which it sees, then goes on honestly), forge: writes an all-ok report of the
group onto its parent's stdout, where densefeed rank-group reports, then
exits 5; grab: rank --bad computes the whole sequence alone and writes every
rank's shard into every rank-K folder, reporting each write as "GRAB rank-K
wrote" or "GRAB rank-K refused: ERROR", while the other ranks exit 0 having
computed and written nothing; silent: rank --bad takes part in the exchange
and exits 0 without writing anything). Every rank writes "MRLOG rank cvd start end netns seed" on
stderr: its CUDA_VISIBLE_DEVICES, wall clock start/end, network namespace
and seed, for the tests.
"""
import argparse
import io
import json
import os
import signal
import socket
import struct
import sys
import time

import numpy as np

started = time.time()
p = argparse.ArgumentParser()
p.add_argument("--reference", action="store_true")
p.add_argument("--mode", default="honest")
p.add_argument("--bad", type=int, default=1)
p.add_argument("--T", type=int, required=True)
p.add_argument("--D", type=int, required=True)
args = p.parse_args()

T, D = args.T, args.D
seed = int(os.environ["DENSEFEED_SEED"])
out = os.environ["DENSEFEED_OUT"]
rng = np.random.default_rng(seed)
a = rng.uniform(0.9, 1.0, size=(T, D))
b = rng.standard_normal((T, D))
s0 = rng.standard_normal(D)


def scan(a, b, s):
    y = np.empty_like(b)
    for t in range(len(b)):
        s = a[t] * s + b[t]
        y[t] = s
    return y


def log():
    print("MRLOG %s %s %.6f %.6f %s %s" % (os.environ.get("DENSEFEED_RANK", "ref"),
                                           os.environ.get("CUDA_VISIBLE_DEVICES", "-"), started, time.time(),
                                           os.readlink("/proc/self/ns/net"), os.environ["DENSEFEED_SEED"]),
          file=sys.stderr, flush=True)


if args.reference:
    y = scan(a, b, s0)
    np.save(os.path.join(out, "y.npy"), y)
    np.save(os.path.join(out, "final.npy"), y[-1])
    log()
    sys.exit(0)

rank = int(os.environ["DENSEFEED_RANK"])
world = int(os.environ["DENSEFEED_WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
for name in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
    assert name in os.environ, name
bad = rank == args.bad and args.mode != "honest"


def send(sock, *arrays):
    for x in arrays:
        buf = io.BytesIO()
        np.save(buf, x, allow_pickle=False)
        data = buf.getvalue()
        sock.sendall(struct.pack("<Q", len(data)) + data)


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("peer closed the connection")
        data += chunk
    return data


def recv(sock):
    (n,) = struct.unpack("<Q", recv_exact(sock, 8))
    return np.load(io.BytesIO(recv_exact(sock, n)), allow_pickle=False)


lo, hi = rank * T // world, (rank + 1) * T // world
if args.mode == "grab" and os.path.basename(out.rstrip("/")).startswith("rank-"):
    if bad:
        y = scan(a, b, s0)
        for k in range(world):
            folder = os.path.join(os.path.dirname(out.rstrip("/")), "rank-%d" % k)
            try:
                np.save(os.path.join(folder, "y.npy"), y[k * T // world:(k + 1) * T // world])
                np.save(os.path.join(folder, "final.npy"), y[-1])
                print("GRAB rank-%d wrote" % k, file=sys.stderr, flush=True)
            except OSError as e:
                print("GRAB rank-%d refused: %s" % (k, e), file=sys.stderr, flush=True)
    log()
    sys.exit(0)
if bad and args.mode == "crash":
    os.kill(os.getpid(), signal.SIGSEGV)
if bad and args.mode == "hang":
    time.sleep(3600)
if bad and args.mode == "forge":
    ok = {"started": True, "start_error": "", "exit_code": 0, "signal": 0, "timed_out": False, "cancelled": False,
          "timeout_s": 8, "kill_grace_s": 2, "sigkill_needed": False, "strays_killed": 0,
          "stdout_capture": {"bytes": 0, "dropped": 0}, "stderr_capture": {"bytes": 0, "dropped": 0},
          "wall_s": 0.1, "resolved_exe": "/usr/bin/python3", "ended_by": ""}
    fake = {"ranks": [{"rank": k, "first": False, "process": ok} for k in range(world)]}
    try:
        with open("/proc/%d/fd/1" % os.getppid(), "w") as f:
            f.write(json.dumps(fake) + "\n")
        print("FORGED a report", file=sys.stderr, flush=True)
    except OSError as e:
        print("could not forge: %s" % e, file=sys.stderr, flush=True)
    sys.exit(5)
if bad and args.mode == "ptrace":
    # The group's launcher, whose exit status and report decide whether the
    # ranks passed, and the sibling ranks must be out of reach. With a PID namespace of its own (one sandbox per rank) it sees only
    # itself and its sandbox's init (pid 1, bwrap's, which holds nothing of
    # the group's); anything else it sees is a sibling or the launcher.
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    visible = sorted(int(d) for d in os.listdir("/proc") if d.isdigit())
    print("PTRACE sees %s (itself %d)" % (",".join(map(str, visible)), os.getpid()), file=sys.stderr, flush=True)
    for target in (p for p in visible if p != os.getpid()):
        got = libc.ptrace(16, target, None, None)  # PTRACE_ATTACH
        who = "its sandbox's init" if target == 1 and os.getppid() == 1 else "pid %d" % target
        print("PTRACE attach %s %s" % (who, "accepted" if got == 0 else "refused errno %d" % ctypes.get_errno()), file=sys.stderr, flush=True)
        if got == 0:
            # Wait for the attach's stop before detaching, or the target
            # stays stopped (its sandbox's init then reaps nothing).
            try:
                os.waitpid(target, 0x40000000)  # __WALL
            except OSError:
                pass
            libc.ptrace(17, target, None, 0)  # PTRACE_DETACH
if bad and args.mode == "early":
    sys.exit(0)  # leaves without its part: rank 0 waits for it
local = scan(a[lo:hi], b[lo:hi], np.zeros(D))
A, B = np.prod(a[lo:hi], axis=0), local[-1]
if bad and args.mode == "wrong":
    B = B * (1 + 1e-3)

if rank == 0:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((addr, port))
    server.listen(world)
    peers = {}
    maps = {0: (A, B)}
    while len(peers) < world - 1:
        conn, _ = server.accept()
        k = int(recv(conn))
        peers[k] = conn
        maps[k] = (recv(conn), recv(conn))
    states, S = [], s0
    for k in range(world):
        states.append(S)
        S = maps[k][0] * S + maps[k][1]
    final = S
    for k, conn in peers.items():
        send(conn, states[k], final)
    incoming = states[0]
else:
    deadline = time.time() + 60
    while True:
        try:
            conn = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    conn.settimeout(None)
    send(conn, np.array(rank), A, B)
    incoming, final = recv(conn), recv(conn)

# The shard's states from its incoming state: P_t * S + Q_t.
y = np.cumprod(a[lo:hi], axis=0) * incoming + local
per_rank = os.path.basename(out.rstrip("/")).startswith("rank-")
if per_rank and args.mode == "lopsided":
    # Rank 0 writes the whole sequence (every rank draws all of the input)
    # and rank --bad an empty shard: the concatenation is right, the bad
    # rank computed nothing.
    if rank == 0:
        y = scan(a, b, s0)
    elif bad:
        y = np.zeros((0, D))
if per_rank:
    np.save(os.path.join(out, "y.npy"), y)
    np.save(os.path.join(out, "final.npy"), final)
    if bad and args.mode in ("norank", "silent"):
        for f in os.listdir(out):
            os.unlink(os.path.join(out, f))
    if bad and args.mode == "norank":
        try:
            os.rmdir(out)
        except OSError as e:
            # In its own sandbox its folder is a mount point: it stays, empty.
            print("NORANK could not remove %s: %s" % (out, e), file=sys.stderr, flush=True)
    if bad and args.mode == "escape":
        # The reference's folder is out of reach: the sandbox shows only this arm's.
        ref = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(out))), "reference-000", "out")
        try:
            np.save(os.path.join(ref, "y.npy"), np.zeros((T, D)))
            print("ESCAPED into %s" % ref, file=sys.stderr)
        except OSError as e:
            print("CONTAINED: %s" % e, file=sys.stderr, flush=True)
        # Another rank's folder: read-only in this rank's own sandbox (the
        # write fails and so does the rank); without the sandbox what it
        # writes there is compared, so it is caught.
        np.save(os.path.join(os.path.dirname(out), "rank-0", "y.npy"), np.zeros((T // world, D)))
else:
    if rank == 0:
        ys = {0: y}
        for k, conn in peers.items():
            ys[k] = recv(conn)
        np.save(os.path.join(out, "y.npy"), np.concatenate([ys[k] for k in range(world)]))
        np.save(os.path.join(out, "final.npy"), final)
    else:
        send(conn, y)
log()
