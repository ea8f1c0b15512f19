"""The densefeed harness protocol for Python harnesses (DESIGN.md, "Harness protocol").

densefeed starts a harness with its arguments rendered from the gate's command
template and this environment:

    DENSEFEED_MODE    gate | bench | trace | acceptance (default gate)
    DENSEFEED_CASE    the case as a JSON object (informational: take the case from argv)
    DENSEFEED_SEED    u64, drawn fresh for every run and recorded; derive every input from it
    DENSEFEED_OUT     an empty folder: the only place a harness writes
    DENSEFEED_WARMUP  bench: iterations to discard (default 1)
    DENSEFEED_ITERS   bench: iterations to time (default 5)

and reads back, from DENSEFEED_OUT:

    gate        NAME.npy for each declared output (write_output)
    bench       samples.json {"unit": "ms", "samples": [...]} (write_samples), and
                the outputs of the last timed iteration (densefeed gates them too)
    trace       trace.json in Chrome Trace Event Format (write_trace / trace_path)
    acceptance  metrics.json {"NAME": number | [samples...]} (write_metrics)

Anything missing, malformed, of the wrong dtype or shape is a red verdict
that names the file. Values are read and checked the way the C++ harnesses'
kernels/common/harness_env.cpp does; a malformed one raises HarnessError
naming the variable. Needs numpy (Debian: python3-numpy).
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

MODES = ("gate", "bench", "trace", "acceptance")
U64_MAX = 2**64 - 1

# Output dtypes densefeed reads from .npy files (orchestrator/tensor_file.h).
NPY_DTYPES = ("float64", "float32", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")


class HarnessError(RuntimeError):
    """A protocol variable or an output that is not what the protocol says."""


def _env(name: str, environ: Mapping[str, str]) -> str | None:
    value = environ.get(name)
    return value if value else None  # set to "" counts as unset, as `VAR= cmd` in a shell


def _decimal(name: str, text: str, low: int, high: int) -> int:
    if not text.isascii() or not text.isdigit():
        raise HarnessError(f"{name}={text!r}: expected a decimal integer from {low} to {high}")
    value = int(text)
    if not low <= value <= high:
        raise HarnessError(f"{name}={text!r}: expected a decimal integer from {low} to {high}")
    return value


class Harness:
    """The protocol as seen from inside a harness process.

    Harness() reads os.environ; Harness(environ={...}) reads a mapping (tests).
    Raises HarnessError for a malformed variable.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        mode = _env("DENSEFEED_MODE", env) or "gate"
        if mode not in MODES:
            raise HarnessError(f"DENSEFEED_MODE={mode!r}: expected one of {', '.join(MODES)}")
        self.mode: str = mode
        seed = _env("DENSEFEED_SEED", env)
        self._seed = None if seed is None else _decimal("DENSEFEED_SEED", seed, 0, U64_MAX)
        out = _env("DENSEFEED_OUT", env)
        self._out = None if out is None else Path(out)
        warmup = _env("DENSEFEED_WARMUP", env)
        self.warmup: int = 1 if warmup is None else _decimal("DENSEFEED_WARMUP", warmup, 0, 2**32 - 1)
        iters = _env("DENSEFEED_ITERS", env)
        self.iters: int = 5 if iters is None else _decimal("DENSEFEED_ITERS", iters, 1, 2**32 - 1)
        case = _env("DENSEFEED_CASE", env)
        try:
            self.case: dict = {} if case is None else json.loads(case)
        except json.JSONDecodeError as e:
            raise HarnessError(f"DENSEFEED_CASE: not JSON ({e})") from None
        if not isinstance(self.case, dict):
            raise HarnessError("DENSEFEED_CASE: expected a JSON object")

    # -- inputs --------------------------------------------------------------

    @property
    def seed(self) -> int:
        """DENSEFEED_SEED. Raises HarnessError when densefeed did not set it."""
        if self._seed is None:
            raise HarnessError("DENSEFEED_SEED is not set: densefeed draws one for every run; pass it to run by hand")
        return self._seed

    def with_seed(self, seed: int) -> "Harness":
        """This harness with DENSEFEED_SEED replaced by `seed` (a u64): the inputs of one of a
        benchmark driver's input sets (densefeed_driver.Driver.time(inputs=...)). Raises
        HarnessError for a seed outside [0, 2^64)."""
        if not isinstance(seed, int) or not 0 <= seed <= U64_MAX:
            raise HarnessError(f"seed {seed!r}: expected an integer in [0, 2^64)")
        other = copy.copy(self)
        other._seed = seed
        return other

    def rng(self, stream: int = 0) -> np.random.Generator:
        """A numpy Generator (PCG64) seeded from DENSEFEED_SEED; `stream` separates independent inputs."""
        return np.random.Generator(np.random.PCG64([self.seed & 0xFFFFFFFF, self.seed >> 32, stream]))

    @property
    def out(self) -> Path:
        """DENSEFEED_OUT (must exist). Raises HarnessError when unset or missing."""
        if self._out is None:
            raise HarnessError("DENSEFEED_OUT is not set: densefeed gives every process an empty folder to write into")
        if not self._out.is_dir():
            raise HarnessError(f"DENSEFEED_OUT={str(self._out)!r}: not a folder")
        return self._out

    # -- gate ----------------------------------------------------------------

    @staticmethod
    def poisoned(shape: Sequence[int], dtype: str | np.dtype = np.float32) -> np.ndarray:
        """An output buffer filled with NaN, so an element the kernel never writes fails the gate."""
        return np.full(tuple(shape), np.nan, dtype=dtype)

    def write_output(self, name: str, array: np.ndarray) -> Path:
        """Writes OUT/NAME.npy (C order, no pickle) and returns its path.

        The dtype must be one densefeed reads; it must match the gate's declared
        dtype for the output (densefeed checks that, and the shape, itself).
        """
        if not name or "/" in name or name.startswith("."):
            raise HarnessError(f"output name {name!r}: expected a plain name such as 'final_state'")
        a = np.asarray(array)
        if a.dtype.name not in NPY_DTYPES:
            raise HarnessError(f"output {name}: dtype {a.dtype.name} is not one densefeed reads ({', '.join(NPY_DTYPES)})")
        path = self.out / f"{name}.npy"
        np.save(path, np.ascontiguousarray(a), allow_pickle=False)
        return path

    # -- bench ---------------------------------------------------------------

    def time_iterations(self, step: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> list[float]:
        """Runs `step` warmup + iters times; returns the timed iterations' durations in ms.

        Uses the steady CPU clock: right for CPU code. For GPU work time each
        iteration with device events (torch.cuda.Event, cupy.cuda.Event) and
        pass those milliseconds to write_samples instead.
        """
        samples = []
        for k in range(self.warmup + self.iters):
            t0 = clock()
            step()
            ms = (clock() - t0) * 1e3
            if k >= self.warmup:
                samples.append(ms)
        return samples

    def write_samples(self, samples_ms: Iterable[float], unit: str = "ms") -> Path:
        """Writes OUT/samples.json (schemas/samples.schema.json): per-iteration times in ms."""
        samples = [float(s) for s in samples_ms]
        if unit != "ms":
            raise HarnessError(f"samples unit {unit!r}: densefeed takes milliseconds ('ms')")
        if not samples:
            raise HarnessError("samples: no timed iteration (DENSEFEED_ITERS >= 1)")
        bad = [s for s in samples if not math.isfinite(s) or s < 0]
        if bad:
            raise HarnessError(f"samples: {len(bad)} value(s) not a finite time >= 0, e.g. {bad[0]}")
        path = self.out / "samples.json"
        path.write_text(json.dumps({"unit": "ms", "samples": samples}) + "\n")
        return path

    # -- trace ---------------------------------------------------------------

    def trace_path(self) -> Path:
        """Where a trace goes: OUT/trace.json (Chrome Trace Event Format, as PyTorch's
        profiler's export_chrome_trace writes it). An `nsys export --type sqlite`
        file goes to OUT/trace.sqlite instead."""
        return self.out / "trace.json"

    def write_trace(self, events: Iterable[Mapping]) -> Path:
        """Writes OUT/trace.json from complete events: {"name", "ts" (µs), "dur" (µs), "tid"[, "pid", "cat", "args"]}."""
        out = []
        for i, e in enumerate(events):
            for key in ("name", "ts", "dur"):
                if key not in e:
                    raise HarnessError(f"trace event {i}: missing {key!r}")
            if not (math.isfinite(float(e["ts"])) and math.isfinite(float(e["dur"])) and float(e["dur"]) >= 0):
                raise HarnessError(f"trace event {i} ({e['name']}): ts and dur must be finite, dur >= 0 (µs)")
            out.append({"ph": "X", "pid": e.get("pid", os.getpid()), "tid": e.get("tid", 0), **dict(e)})
        path = self.trace_path()
        path.write_text(json.dumps({"traceEvents": out, "displayTimeUnit": "ms"}) + "\n")
        return path

    # -- acceptance ----------------------------------------------------------

    def write_metrics(self, metrics: Mapping[str, float | Sequence[float]]) -> Path:
        """Writes OUT/metrics.json: {NAME: number | [samples...]} for acceptance criteria."""
        doc = {}
        for name, value in metrics.items():
            if not isinstance(name, str) or not name:
                raise HarnessError(f"metric name {name!r}: expected a non-empty string")
            values = [float(v) for v in value] if isinstance(value, (list, tuple, np.ndarray)) else [float(value)]
            if not values or not all(math.isfinite(v) for v in values):
                raise HarnessError(f"metric {name}: expected finite numbers, got {value!r}")
            doc[name] = values if isinstance(value, (list, tuple, np.ndarray)) else values[0]
        path = self.out / "metrics.json"
        path.write_text(json.dumps(doc) + "\n")
        return path


# -- sessions (schemas/session-request.schema.json, orchestrator/session.h) --


def serve(handler: Callable[[Harness], object], environ: Mapping[str, str] | None = None,
          requests: "Iterable[str] | None" = None, answer: "Callable[[str], None] | None" = None) -> int:
    """Runs handler(Harness) for each case densefeed asks for; returns how many it handled.

    In a session (DENSEFEED_SESSION=1, a gate with `protocol: session`) it
    reads one JSON request per line from stdin, gives `handler` a Harness for
    that request (mode, case, seed, out, warmup, iters) and, once the handler
    returned (its outputs written), answers {"id": N, "status": "ok"} on
    stdout; an exception in the handler answers {"status": "error",
    "message": ...} and the session goes on. What the handler prints goes to
    stderr, whether through print() or on descriptor 1 (a C extension, a
    child process): stdout carries the answers alone. It returns at the end of input.
    Outside a session it calls `handler` once with Harness() (the case from
    DENSEFEED_CASE and the other variables), so one harness serves both; an
    exception then propagates (the process exits non-zero).
    `requests` and `answer` replace stdin and stdout (tests).
    """
    import sys

    env = dict(os.environ if environ is None else environ)
    if env.get("DENSEFEED_SESSION") != "1":
        handler(Harness(env))
        return 1
    if answer is None:
        channel = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
        sys.stdout.flush()
        sys.stdout = sys.stderr  # print() in a handler must not corrupt the answers
        # Nor what C extensions and child processes write on descriptor 1
        # (torch, Triton, a compiler): it goes to stderr too.
        os.dup2(sys.stderr.fileno(), 1)

        def answer(line: str) -> None:
            channel.write(line + "\n")
            channel.flush()

    if requests is None:
        requests = sys.stdin
    handled = 0
    for line in requests:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            rid = req["id"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise HarnessError(f"session request {line.strip()[:200]!r}: not a densefeed request ({e})") from None
        try:
            h = Harness({**env,
                         "DENSEFEED_MODE": str(req["mode"]), "DENSEFEED_CASE": json.dumps(req["case"]),
                         "DENSEFEED_SEED": str(req["seed"]), "DENSEFEED_OUT": str(req["out"]),
                         "DENSEFEED_WARMUP": str(req.get("warmup", 1)), "DENSEFEED_ITERS": str(max(1, int(req.get("iters", 5))))})
            handler(h)
            answer(json.dumps({"id": rid, "status": "ok"}))
        except Exception as e:  # the case failed; the session serves the next one
            answer(json.dumps({"id": rid, "status": "error", "message": f"{type(e).__name__}: {e}"}))
        handled += 1
    return handled
