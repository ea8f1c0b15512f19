#!/usr/bin/env bash
# The fla-intracard-cp gate on a GPU machine, without densefeed: what
# `densefeed run experiments/*.yaml` will do once projects land, plus the
# controls the tolerance is derived from. Run from anywhere; needs python3
# with torch + triton + a CUDA GPU, and the wheels in .whl/ (offline) or PyPI.
#
#   experiments/fla-intracard-cp/device_run.sh            # everything below
#   GATE_JOBS=6 CONTROLS=0 BENCH=0 ./device_run.sh      # only the gate, 6 processes at a time
#   SEED=N GATE_JOBS=6 CONTROL_ARMS=fp64 ./device_run.sh  # what the H200 run of 2026-12-01 (second call) did
#
# Steps: install fla-core 0.5.2 and 0.6.0 (setup.sh); self-test the fp64
# recurrence; the gate's arms (reference, fla-0.5.2, fla-0.6.0), one process
# per case, GATE_JOBS at a time (1 = as a one-GPU executor runs them: the
# gate's wall time); the controls (fp64, fla-0.6.0-off, fla-0.5.2-off),
# CONTROL_JOBS at a time; bench mode on BENCH_CASES for both versions; the
# comparison (compare_direct.py). Results and logs go to $OUT (the device
# tool's folder) or runs/LAST.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
out=${OUT:-$here/runs/last}
mkdir -p "$out"
work=${WORK:-/tmp/fla-intracard-cp-work}
seed=${SEED:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}
GATE_JOBS=${GATE_JOBS:-1}
CONTROLS=${CONTROLS:-1}
CONTROL_JOBS=${CONTROL_JOBS:-3}
CONTROL_ARMS=${CONTROL_ARMS:-fp64,fla-0.6.0-off,fla-0.5.2-off}
BENCH=${BENCH:-1}
BENCH_CASES=${BENCH_CASES:-c06}
BENCH_ARMS=${BENCH_ARMS:-fla-0.5.2,fla-0.6.0}
WARMUP=${WARMUP:-1}
WARMUP_CASES=${WARMUP_CASES:-c02,c10}
export PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$work/triton-cache}
rm -rf "$work"; mkdir -p "$work"

{
  echo "== machine"; date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
  python3 -c 'import sys, torch, triton, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "numpy", numpy.__version__, "gpu", torch.cuda.get_device_name(), "SMs", torch.cuda.get_device_properties(0).multi_processor_count)'
  echo "seed $seed"
  echo "== setup"
  if [ -d "$here/.whl" ]; then ./setup.sh --wheels "$here/.whl"; else ./setup.sh; fi || exit 3
  echo "== fp64 recurrence self-test"
  PYTHONPATH="$here/../../kernels/python" python3 harness/fp64_reference.py --self-test || exit 3
  if [ "$WARMUP" = 1 ]; then
    # Triton compiles (and fla autotunes) every kernel config on first use:
    # about 100 s per fla version and head count on this machine. One process
    # per (arm, heads) fills the shared cache first, so the gate's own
    # processes below run on a warm cache instead of compiling the same
    # kernels side by side.
    echo "== warm-up of the Triton cache: cases $WARMUP_CASES of each gate arm, all at once"
    tw=$(date +%s.%N)
    python3 direct_gate.py run --work "$work/warmup" --seed "$seed" --arms reference,fla-0.5.2,fla-0.6.0 --jobs 6 --cases "$WARMUP_CASES" --label warmup
    echo "warm-up wall time: $(python3 -c "print(round($(date +%s.%N) - $tw, 1))") s"
  fi
  t0=$(date +%s.%N)
  echo "== gate: reference, fla-0.5.2, fla-0.6.0 ($GATE_JOBS at a time)"
  python3 direct_gate.py run --work "$work" --seed "$seed" --arms reference,fla-0.5.2,fla-0.6.0 --jobs "$GATE_JOBS" --label gate
  t1=$(date +%s.%N)
  echo "gate wall time: $(python3 -c "print(round($t1 - $t0, 1))") s (all cases, reference + both candidates, $GATE_JOBS at a time, Triton cache $([ "$WARMUP" = 1 ] && echo warm || echo cold))"
  if [ "$CONTROLS" = 1 ]; then
    echo "== controls: $CONTROL_ARMS ($CONTROL_JOBS at a time)"
    python3 direct_gate.py run --work "$work" --seed "$seed" --arms "$CONTROL_ARMS" --jobs "$CONTROL_JOBS" --label controls
  fi
  if [ "$BENCH" = 1 ]; then
    echo "== bench mode (no NaN fill), cases $BENCH_CASES"
    python3 direct_gate.py run --work "$work" --seed "$seed" --arms "$BENCH_ARMS" --mode bench --iters 20 --cases "$BENCH_CASES" --label bench
  fi
  echo "== compare"
  python3 compare_direct.py "$work" --json "$out/compare.json" | tee "$out/table.txt"
  cp "$work"/gate.json "$out"/ 2>/dev/null; cp "$work"/controls.json "$out"/ 2>/dev/null; cp "$work"/bench.json "$out"/ 2>/dev/null
  cp "$work"/warmup/warmup.json "$out"/ 2>/dev/null
  tar czf "$out/logs.tgz" -C "$work" logs 2>/dev/null
  nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | tee "$out/device_run.log"
