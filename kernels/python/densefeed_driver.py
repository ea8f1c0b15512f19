"""Trusted benchmark drivers in Python (README, 'Timings the candidate cannot forge', issue 16).

A gate that declares

    bench:
      driver:
        command: [python3, "{project}/harness/scan_driver.py", --T, "{case.T}"]
        kernel: {module: scan, function: sharded_scan}

has densefeed run that command, from the trusted ref's tree (its files are
frozen), once per bench round and arm, inside the same sandbox as the arm's
own harness. The driver builds the inputs, loads the arm's kernel with
Driver.load_kernel() and times it with Driver.time(); the samples that decide
a speedup are then taken by frozen code, not by the candidate:

    from densefeed_driver import Driver        # first: before any arm code
    d = Driver()
    kernel = d.load_kernel()                    # the arm's scan.sharded_scan
    d.time(lambda x: kernel(*x, **d.params), outputs=lambda r: {"final_state": r},
           inputs=lambda h: inputs(h, T, D))             # one input set per iteration

densefeed passes, besides the harness protocol's variables:

    DENSEFEED_KERNEL        {"module": M, "function": F}: what to load (the gate's)
    DENSEFEED_KERNEL_PATH   the arm's import path (os.pathsep-separated)
    DENSEFEED_ARM_PROJECT   the arm's tree
    DENSEFEED_TRUSTED_PROJECT  the trusted tree this driver runs from (a kernel is never loaded from it)
    DENSEFEED_PARAMS        the arm's parameters (JSON object), for the kernel's arguments

Each iteration is bracketed for densefeed's outside clock
(orchestrator/outside_clock.h, when DENSEFEED_CLOCK_FD is set): 'b' over the
inherited socket (the kernel stamps it as it is written) before the call,
'e' after it and its sync, EMPTY_BRACKETS empty brackets (the clock and sync
with nothing between) first; the driver's samples count only within
densefeed's timestamps of them (at most the bracket, at least the bracket
less its overhead). After the calls the driver refuses to write anything while a process the arm's code started is still there
(stray_processes). Driver.time() writes OUT/samples.json (per-iteration ms, steady clock, taken
around the call only; densefeed's cross-check of its own clock), OUT/timed.json ({"iterations": [{OUTPUT: sha256 of
its .npy file}, ...], "input_seeds": [seed of each timed iteration's inputs]},
one entry per timed iteration), OUT/timed/K/NAME.npy for the first timed
iteration K of every distinct pair of input set and outputs, and the last
iteration's outputs as OUT/NAME.npy. densefeed gates every distinct set
against the reference's outputs for its input set's seed, fits the wall time of the
process against the iteration count, and compares the timings with the
machine's ceilings (orchestrator/timing_checks.h).

What stays out of reach in one process: the arm's code runs in this
interpreter and could patch it. So: the driver's own modules are imported
before the arm's path is put first (an arm cannot shadow numpy or this
module); the functions the timing and hashing rest on (this module's and
Driver's attributes, time.perf_counter_ns, hashlib.sha256, numpy.save, the
file writes) are snapshotted when this module is imported and checked after
the kernel is loaded and again after the timed loop, and a difference is a
HarnessError (the bench stage is red: the candidate's code patched the
timer); and time() ends the process itself with os._exit once its files are
written, so no atexit handler, finally block or thread of the arm's can
rewrite them or pad the process's wall time afterwards. densefeed's outside
measurements (timing_checks.h) are the backstop for what a patch could still
change. Not covered: a kernel that caches its result across calls on the
same inputs gains nothing: time(inputs=...) builds a set of its own for every
iteration (densefeed requires it).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import io
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from densefeed_harness import Harness, HarnessError

# Bound before any arm code runs: a kernel module that replaces
# time.perf_counter_ns afterwards does not change this driver's clock.
_clock_ns = time.perf_counter_ns
_save = np.save
_sha256 = hashlib.sha256
_exit = os._exit
_flush = sys.stdout.flush
_write = os.write
_listdir = os.listdir
_getpid = os.getpid
_getpgrp = os.getpgrp
_open = open

# Brackets with nothing inside timed before the warm-up, for densefeed's
# figure of the bracket's overhead (orchestrator/outside_clock.h).
EMPTY_BRACKETS = 8


def _proc_stat(pid: str) -> tuple[int, int, str, str] | None:
    """(ppid, pgrp, state, command) of /proc/PID (proc(5)); None when it is gone."""
    try:
        with _open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
        with _open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None
    close = text.rfind(")")
    fields = text[close + 2:].split()
    if not cmd:
        cmd = text[text.find("(") + 1:close]
    return int(fields[1]), int(fields[2]), fields[0], cmd


def become_subreaper() -> None:
    """Makes this process a child subreaper (prctl(2), PR_SET_CHILD_SUBREAPER = 36).

    A process the arm's code forks and orphans (a double fork) then becomes
    this process's child instead of init's, so stray_processes() finds it by
    its parent chain. Raises HarnessError when prctl fails.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:
        raise HarnessError(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")


def stray_processes() -> list[str]:
    """Processes besides this one that the arm's code left: "PID (command)".

    Inside the sandbox (its own PID namespace, pid 1 is bwrap) every process
    /proc lists is one, except this process and its ancestors; outside it,
    the members of this process's group and its descendants. A zombie runs
    no code and is not counted.
    """
    me, group = _getpid(), _getpgrp()
    procs = {}
    for name in _listdir("/proc"):
        if name.isdigit():
            st = _proc_stat(name)
            if st is not None:
                procs[int(name)] = st
    ancestors, p = set(), me
    while p in procs and p not in ancestors:
        ancestors.add(p)
        p = procs[p][0]
    sandboxed = 1 in procs and procs[1][3].split(" ")[0].endswith("bwrap")
    # The group is this process's own only when it leads it (densefeed's
    # launcher starts it with setsid); otherwise its members are whoever
    # started it and their other children (ctest's parallel tests).
    own_group = group == me

    def descends(pid: int) -> bool:
        seen = set()
        while pid in procs and pid not in seen:
            seen.add(pid)
            pid = procs[pid][0]
            if pid == me:
                return True
        return False

    out = []
    for pid, (ppid, pgrp, state, cmd) in sorted(procs.items()):
        if pid in ancestors or state in ("Z", "X"):
            continue
        if sandboxed or (own_group and pgrp == group) or descends(pid):
            out.append(f"{pid} ({cmd[:80]})")
    return out


def _watched() -> dict:
    """What the timing and hashing rest on, by identity."""
    me = sys.modules[__name__]
    return {
        "time.perf_counter_ns": time.perf_counter_ns,
        "hashlib.sha256": hashlib.sha256,
        "numpy.save": np.save,
        "numpy.asarray": np.asarray,
        "io.BytesIO": io.BytesIO,
        "json.dumps": json.dumps,
        "pathlib.Path.write_bytes": Path.write_bytes,
        "pathlib.Path.write_text": Path.write_text,
        "pathlib.Path.mkdir": Path.mkdir,
        "os._exit": os._exit,
        "threading.enumerate": threading.enumerate,
        **{f"{__name__}.{k}": v for k, v in vars(me).items() if not k.startswith("__")},
        **{f"Driver.{k}": v for k, v in vars(Driver).items() if not k.startswith("__")},
    }


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    _save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


class Driver:
    """One bench run of one arm, as the trusted side sees it.

    Driver() reads os.environ; Driver(environ={...}) a mapping (tests).
    Raises HarnessError for a missing or malformed variable.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.harness = Harness(environ)
        if self.harness.mode != "bench":
            raise HarnessError(f"DENSEFEED_MODE={self.harness.mode!r}: a benchmark driver runs in bench mode only")
        try:
            kernel = json.loads(env.get("DENSEFEED_KERNEL", ""))
        except json.JSONDecodeError:
            raise HarnessError("DENSEFEED_KERNEL: expected {\"module\": ..., \"function\": ...} (densefeed sets it)") from None
        if not isinstance(kernel, dict) or not isinstance(kernel.get("module"), str) or not isinstance(kernel.get("function"), str):
            raise HarnessError("DENSEFEED_KERNEL: expected {\"module\": ..., \"function\": ...} (a Python kernel)")
        self.module: str = kernel["module"]
        self.function: str = kernel["function"]
        self.kernel_path = [p for p in env.get("DENSEFEED_KERNEL_PATH", "").split(os.pathsep) if p]
        arm = env.get("DENSEFEED_ARM_PROJECT", "")
        if not arm:
            raise HarnessError("DENSEFEED_ARM_PROJECT is not set: densefeed names the arm's tree")
        self.arm_project = Path(arm)
        self.trusted_project = Path(env.get("DENSEFEED_TRUSTED_PROJECT", "") or arm)
        try:
            params = json.loads(env.get("DENSEFEED_PARAMS", "{}"))
        except json.JSONDecodeError:
            raise HarnessError("DENSEFEED_PARAMS: not JSON") from None
        if not isinstance(params, dict):
            raise HarnessError("DENSEFEED_PARAMS: expected a JSON object")
        self.params: dict = params
        clock = env.get("DENSEFEED_CLOCK_FD", "")
        if clock and not clock.isdigit():
            raise HarnessError(f"DENSEFEED_CLOCK_FD={clock!r}: expected a descriptor number (densefeed sets it)")
        # densefeed's outside clock (orchestrator/outside_clock.h); unset
        # where densefeed cannot reach this process with it (Slurm).
        self.clock_fd: int | None = int(clock) if clock else None
        seeds = env.get("DENSEFEED_INPUT_SEEDS", "")
        # densefeed's draw of one input set per iteration (orchestrator/
        # input_sets.h): warm-up first, then the timed ones; unset by hand.
        self.input_seeds: list[int] | None = None
        if seeds:
            parts = seeds.split(",")
            if not all(p.isdigit() and int(p) < 2**64 for p in parts):
                raise HarnessError(f"DENSEFEED_INPUT_SEEDS={seeds[:80]!r}: expected comma-separated u64 seeds (densefeed sets it)")
            self.input_seeds = [int(p) for p in parts]
        become_subreaper()
        self._snapshot = _watched()

    def _check_untouched(self, when: str) -> None:
        now = _watched()
        changed = sorted(k for k in set(self._snapshot) | set(now) if self._snapshot.get(k) is not now.get(k))
        if changed:
            raise HarnessError(f"{when}, the arm's code had replaced what the driver times and hashes with: "
                               f"{', '.join(changed)}: its timings cannot be trusted")

    def load_kernel(self) -> Callable:
        """Imports the gate's module from the arm's import path and returns its function.

        The arm's path goes first on sys.path (so the arm's own helper modules
        are the arm's), after this driver's modules are loaded. A module of the
        same name imported before (the trusted tree's) is dropped first.
        Raises HarnessError when the module is not in the arm's tree or has no
        such function.
        """
        sys.path[:0] = [p for p in self.kernel_path if p not in sys.path[: len(self.kernel_path)]]
        top = self.module.split(".")[0]
        for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
            del sys.modules[name]
        try:
            mod = importlib.import_module(self.module)
        except ImportError as e:
            raise HarnessError(f"the arm's kernel module {self.module!r} cannot be imported: {e}") from None
        where = Path(getattr(mod, "__file__", "") or "").resolve()
        roots = [Path(p).resolve() for p in self.kernel_path]
        trusted = self.trusted_project.resolve()
        # The trusted tree may lie inside the arm's (a worktree holds the
        # workspace's exports): a module found there is the trusted ref's code,
        # not the arm's, and timing it would measure the wrong thing.
        from_trusted = trusted != self.arm_project.resolve() and where.is_relative_to(trusted)
        if from_trusted or not any(where.is_relative_to(r) for r in roots):
            raise HarnessError(f"module {self.module!r} was loaded from {where}, not from the arm's tree {self.arm_project}")
        fn = getattr(mod, self.function, None)
        if not callable(fn):
            raise HarnessError(f"module {self.module!r} of the arm has no function {self.function!r}")
        self._check_untouched(f"after importing {self.module!r}")
        return fn

    def time(
        self,
        call: Callable[[], object],
        outputs: Callable[[object], Mapping[str, np.ndarray]],
        sync: Callable[[], None] | None = None,
        flush: Callable[[], None] | None = None,
        allow_threads: bool = False,
        inputs: Callable[[Harness], object] | None = None,
    ) -> None:
        """Runs `call` DENSEFEED_WARMUP + DENSEFEED_ITERS times, records every timed one, and ends the process.

        With `inputs` (every bundled driver), each iteration has an input set
        of its own: inputs(harness) builds it from a Harness whose seed is
        that iteration's of DENSEFEED_INPUT_SEEDS (densefeed draws them per
        round, orchestrator/input_sets.h), outside the timed region, and the
        call is call(that set): a kernel never sees the same inputs twice in
        a process, so one that caches its results gains nothing, and
        densefeed gates each timed iteration against the reference of its own
        set. timed.json then records "input_seeds". Without `inputs`, call()
        takes none and every iteration reuses the same inputs: only by hand
        (densefeed sets DENSEFEED_INPUT_SEEDS, and then `inputs` is required:
        HarnessError).

        Each iteration: flush() (outside the timed region, e.g. a cache
        flush) and sync(), so that the device work queued before the call
        ends before densefeed's bracket opens, then the clock around call()
        and sync() (for asynchronous
        devices: the device's synchronisation, so the work is inside the
        timed region); then outputs(result) -> {NAME: array} is hashed and
        kept (outside the timed region). Writes samples.json, timed.json,
        timed/K/ and the last outputs, then exits the process with status 0
        (os._exit: nothing of the arm's runs after it). Raises HarnessError
        (the process exits 1) when the arm's code patched the driver, or left
        Python threads running after its calls (a thread could rewrite these
        files while they are written); a gate whose kernel library keeps
        threads of its own passes allow_threads=True in its frozen driver.
        """
        h = self.harness
        clock = self.clock_fd

        def begin() -> None:
            if clock is not None:
                # The kernel stamps the byte inside this write
                # (orchestrator/outside_clock.h): before call() starts.
                _write(clock, b"b")

        def end() -> None:
            if clock is not None:
                _write(clock, b"e")

        total = h.warmup + h.iters
        if inputs is None and self.input_seeds is not None:
            raise HarnessError("densefeed draws a set of inputs for every iteration (DENSEFEED_INPUT_SEEDS): the gate's driver "
                               "must pass Driver.time(inputs=...), a function building one set from a Harness of that seed")
        seeds = self.input_seeds if inputs is not None else None
        if seeds is not None and len(seeds) != total:
            raise HarnessError(f"DENSEFEED_INPUT_SEEDS has {len(seeds)} seeds for {total} iterations (warm-up and timed)")
        if inputs is not None and seeds is None:
            seeds = [h.seed] * total  # by hand: one set, the run's seed
        # Empty brackets: the driver's clock and sync with nothing between
        # them, so densefeed's figure of the overhead holds what an honest
        # sample is short of its bracket by.
        for _ in range(EMPTY_BRACKETS):
            begin()
            _clock_ns()
            if sync is not None:
                sync()
            _clock_ns()
            end()
        samples: list[float] = []
        iterations: list[dict] = []
        seen: set[str] = set()
        last: Mapping[str, np.ndarray] = {}
        for k in range(total):
            x = inputs(h.with_seed(seeds[k])) if seeds is not None else None
            if flush is not None:
                flush()
            if sync is not None:
                sync()  # the inputs' upload and the flush end before the bracket opens: it holds the call alone
            begin()
            t0 = _clock_ns()
            result = call(x) if seeds is not None else call()
            if sync is not None:
                sync()
            t1 = _clock_ns()
            end()
            if k < h.warmup:
                continue
            samples.append((t1 - t0) / 1e6)
            arrays = {name: np.asarray(a) for name, a in outputs(result).items()}
            blobs = {name: _npy_bytes(a) for name, a in arrays.items()}
            entry = {name: _sha256(b).hexdigest() for name, b in blobs.items()}
            # A set of outputs is kept once per input set: the same outputs
            # for two sets are two things to gate.
            key = json.dumps([seeds[k] if seeds is not None else None, entry], sort_keys=True)
            if key not in seen:
                seen.add(key)
                d = h.out / "timed" / str(k - h.warmup)
                d.mkdir(parents=True, exist_ok=True)
                for name, b in blobs.items():
                    (d / f"{name}.npy").write_bytes(b)
            iterations.append(entry)
            last = arrays
        self._check_untouched("after the timed calls")
        others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
        if others and not allow_threads:
            raise HarnessError(f"the arm's code left {len(others)} thread(s) running after its calls ({', '.join(others[:3])}): "
                               "a thread could rewrite what the driver records, so its timings cannot be trusted")
        strays = stray_processes()
        if strays:
            raise HarnessError(f"the arm's code left {len(strays)} process(es) running after its calls ({', '.join(strays[:3])}): "
                               "a process could rewrite what the driver records, so its timings cannot be trusted")
        for name, a in last.items():
            h.write_output(name, a)
        record: dict = {"iterations": iterations}
        if inputs is not None and self.input_seeds is not None:
            record["input_seeds"] = seeds[h.warmup:]
        (h.out / "timed.json").write_text(json.dumps(record) + "\n")
        h.write_samples(samples)
        _flush()
        sys.stderr.flush()
        _exit(0)
