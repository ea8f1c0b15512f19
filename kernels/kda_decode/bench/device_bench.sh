#!/usr/bin/env bash
# The KDA decode step on an sm_90 GPU (the H200), in one go: build check
# (ptxas registers / spills, SASS instruction counts), the timings of v0, v3,
# a D2D copy and an empty kernel (bench/kda_decode_bench), fla-core's Triton
# fused_recurrent_kda beside v0 and v3 with the same timing
# (bench/fla_bench.py), the kda-decode gate against the fp64 reference on the
# CUDA path for v3 and v0 (full profile), compute-sanitizer memcheck and
# racecheck, and densefeed's own benchmark of the experiment on the GPU.
#
#   kernels/kda_decode/bench/device_bench.sh BUNDLE OUTDIR [SECONDS]
#
# BUNDLE holds bin/ (densefeed, kda_decode, kda_decode_reference,
# kda_decode_bench, libkda_decode_capi.so, built on the dev machine with
# -arch=sm_90) and lib/ (the shared libraries densefeed needs that the GPU
# machine lacks); fla-core's wheel is in .whl/ (device README, Notes). Runs
# from the repository root. Steps share a deadline of SECONDS (default 400):
# each gets at most what is left, and a step that fails or runs out is
# reported while the next still runs. Logs go to a work folder, packed at the
# end into OUTDIR/kda_device_logs.tar.gz beside the two JSON files and
# summary.txt (the device returns at most 8 files).
set -u
BUNDLE=$(cd "${1:?bundle folder}" && pwd)
OUTDIR=${2:?output folder}
SECONDS_TOTAL=${3:-400}
mkdir -p "$OUTDIR"
W=$(mktemp -d /tmp/kda-device.XXXXXX)
export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
BIN="$BUNDLE/bin"
T0=$(date +%s)
DEADLINE=$(( T0 + SECONDS_TOTAL ))
step() { echo; echo "=== $1 (t=$(( $(date +%s) - T0 )) s)"; }
# budget N: seconds a step may take, at most N and what is left (>= 1).
budget() { local left=$(( DEADLINE - $(date +%s) )); (( left < 1 )) && left=1; (( left < $1 )) && echo "$left" || echo "$1"; }

{
step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
nvcc --version | tail -2
date -u

step "build check: nvcc -arch=sm_90 -Xptxas -v"
timeout "$(budget 60)" nvcc -std=c++17 -arch=sm_90 -O3 -Xptxas -v -c kernels/kda_decode/kda_kernels.cu \
  -Ikernels/kda_decode -o "$W/kda_kernels.o" > "$W/ptxas.log" 2>&1 || echo "BUILD FAILED"
grep -E "registers|spill" "$W/ptxas.log"
grep -E "Compiling entry" "$W/ptxas.log" | sed -E 's/.*(kda_decode_v[03]).*/\1/'
cuobjdump --dump-sass "$W/kda_kernels.o" > "$W/sass.txt" 2>&1
awk '/Function : /{f=$3} /(LDG|STG|LDS|STS|SHFL|BAR|MUFU)/{for(i=1;i<=NF;i++) if($i ~ /^(LDG|STG|LDS|STS|SHFL|BAR|MUFU)/){op=$i; break} n[f" "op]++} END{for(k in n) print k, n[k]}' \
  "$W/sass.txt" | sed -E 's/[^ ]*(kda_decode_v[03])[^ ]*/\1/' | sort

step "timings: v0, v3, D2D copy, empty kernel (kda_decode_bench)"
timeout "$(budget 120)" "$BIN/kda_decode_bench" --batches 1,8,32,128,512 --json "$OUTDIR/kda_bench.json" 2>&1 \
  | tee "$W/kda_bench.txt"

step "fla-core fused_recurrent_kda beside v0 and v3 (fla_bench.py)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/fla_core-*.whl > "$W/pip.txt" 2>&1 || echo "pip install failed: $(tail -3 "$W/pip.txt")"
PYTHONPATH=/tmp/site timeout "$(budget 180)" python3 kernels/kda_decode/bench/fla_bench.py \
  --lib "$BIN/libkda_decode_capi.so" --batches 1,8,32,128,512 --json "$OUTDIR/fla_bench.json" 2>&1 | tee "$W/fla_bench.txt"

step "gate on the GPU: v3 and v0 against the fp64 reference, full profile (both at once, own ledgers)"
GATE_BUDGET=$(budget 200)
for v in v3 v0; do
  sed -e "s/params: {version: v3}/params: {version: $v, device: cuda}/" \
      -e "s/^experiment: kda-decode-merge-vtiles/experiment: kda-decode-$v-cuda/" \
      experiments/kda-decode-merge-vtiles.yaml > "$W/kda-$v-cuda.yaml"
  ( timeout "$GATE_BUDGET" "$BIN/densefeed" --trust-worktree run "$W/kda-$v-cuda.yaml" --profile full --no-bench \
      --ledger "$W/gate-$v/ledger.db" --jobs 8 > "$W/gate_${v}_cuda.txt" 2>&1
    echo "$v: exit $?" > "$W/gate-$v.rc" ) &
done
wait
for v in v3 v0; do
  cat "$W/gate-$v.rc"
  grep -E "^gate:|batch=|^verdict" "$W/gate_${v}_cuda.txt" | head -24
done

step "compute-sanitizer (B = 3; H = 16: v3 split in 2 blocks per (b, h); H = 64: one block)"
for tool in memcheck racecheck; do
  for vh in v0:16 v3:16 v3:64; do
    v=${vh%%:*}; heads=${vh##*:}
    timeout "$(budget 45)" compute-sanitizer --tool "$tool" --error-exitcode 9 "$BIN/kda_decode" --version "$v" \
      --device cuda --batch 3 --heads "$heads" --seed 7 --out "$W/cs-$tool-$v-$heads" \
      > "$W/sanitizer_${tool}_${v}_h$heads.txt" 2>&1
    echo "$tool $v H=$heads: exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$W/sanitizer_${tool}_${v}_h$heads.txt" | tr '\n' ' ')"
  done
done

step "densefeed benchmark on the GPU: v3 against v0 at B = 8 (quick profile, gate then bench)"
sed -e "s/params: {version: v3}/params: {version: v3, device: cuda}/" \
    -e "s/params: {version: v0}/params: {version: v0, device: cuda}/" \
    -e "s/^experiment: kda-decode-merge-vtiles/experiment: kda-decode-merge-vtiles-cuda/" \
    experiments/kda-decode-merge-vtiles.yaml > "$W/kda-merge-cuda.yaml"
timeout "$(budget 100)" "$BIN/densefeed" --trust-worktree run "$W/kda-merge-cuda.yaml" --profile quick \
  --ledger "$W/bench/ledger.db" --jobs 4 > "$W/densefeed_bench_cuda.txt" 2>&1
echo "exit $?"
grep -E "^gate|^bench|batch=|median|predicted|^verdict" "$W/densefeed_bench_cuda.txt" | head -20
step "done"
} 2>&1 | tee "$W/summary.txt"
cp "$W/summary.txt" "$OUTDIR/summary.txt"
tar czf "$OUTDIR/kda_device_logs.tar.gz" -C "$W" --exclude='cs-*' --exclude='gate-v*' --exclude='bench' \
  --exclude='*.o' . 2>/dev/null
