#!/usr/bin/env bash
# The affine_chain CUDA path on an sm_90 GPU (the H200 lent by `device`), in one
# call (issue 6). Prints, in order:
#   1. machine; the CUDA kernels built for sm_90 with ptxas -v (registers,
#      spills) and their tensor-core instructions (cuobjdump --dump-sass);
#   2. the TF32 conversion check and the mma low-bit experiment
#      (kernels/affine_chain/tf32_device_check.cu);
#   3. GPU against CPU on a few cases (densefeed compare: ieee must be equal bit
#      for bit, the TF32 precisions within 1e-4 relative, from accumulation
#      order only), and each against the fp64 reference; the TF32 precisions
#      also with --mma-accumulate fp32 and tensor-core (rows "-fp32sum",
#      "-tcsum", for information; the default is residual);
#   4. the cp-affine-chain gate against the CUDA path for both example
#      experiments (copies of experiments/*.yaml with device: cuda on both arms)
#      on PROFILE, with their error tables (shards x T);
#   5. affine_chain_cuda_bench: kernel time of tf32-rn, tf32x3, ieee and
#      ieee-fma relative to tf32 (each TF32 precision with each MMA sum),
#      K = V = 128, shards 8 and 64, T up to 1M;
#   6. if time is left, `densefeed run` of the tf32x3 experiment on cuda with its
#      benchmark (the harness's bench mode: CUDA events), quick profile.
# Logs go to $OUT (or /tmp/affine_chain_device), scratch to a temporary folder.
# Binaries are built beforehand
# on a machine with the dev libraries (the device has none) and carried:
#   [SECTIONS="1 2 3 4 5 6"] tests/perf/device_affine_chain.sh BUNDLE [PROFILE] [BENCH_HEADS]
# BUNDLE holds bin/{densefeed,affine_chain,affine_chain_reference,
# affine_chain_cuda_bench} and lib/ (the shared libraries they need).
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=$(realpath "${1:?usage: device_affine_chain.sh BUNDLE [PROFILE] [BENCH_HEADS]}")
profile=${2:-full}
bench_heads=${3:-16}
out=${OUT:-/tmp/affine_chain_device}
work=$(mktemp -d)
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin="$bundle/bin"
df="$bin/densefeed"
# The gates name their harnesses bare: densefeed looks them up in the
# project's harness_path (build/bin, absent here), then PATH.
export PATH="$bin:$PATH"
# densefeed's own project, its gates as carried here (a copy of the checkout,
# not necessarily a git repository with a main branch).
project=(--project . --trust-worktree)
t0=$(date +%s)
sections=" ${SECTIONS:-1 2 3 4 5 6} "
section() { echo; echo "=== $1 (t = $(( $(date +%s) - t0 )) s)"; }
want() { [[ "$sections" == *" $1 "* ]]; }
status=0

section "1. machine and build"
if want 1; then
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total,temperature.gpu --format=csv
nvcc --version | tail -1
nproc
# The kernels' resource use, per instantiation (precision enum 0 ieee, 1
# ieee-fma, 2 tf32, 3 tf32-rn, 4 tf32x3; slice width W; MMA sum 0 residual,
# 1 fp32, 2 tensor-core).
nvcc -arch=sm_90 -std=c++17 -O3 --ftz=false --prec-div=true --fmad=false -Xptxas -v \
  -c kernels/affine_chain/affine_chain_cuda.cu -o "$work/affine_chain_cuda.o" > "$out/ptxas.log" 2>&1 || status=3
grep -E "Compiling entry|registers|spill" "$out/ptxas.log" \
  | sed -E 's/.*step_kernelILNS1_12GpuPrecisionE([0-9])ELi([0-9]+)ELNS1_13MmaAccumulateE([0-9])E.*/step_kernel<precision \1, W \2, MMA sum \3>/; s/ptxas info *: //' \
  | paste - - - | sed -E 's/Function properties for [^ ]*//' | sort -u
cuobjdump --list-elf "$bin/affine_chain" 2>/dev/null | head -3
echo "tensor-core instructions (HMMA) in affine_chain: $(cuobjdump --dump-sass "$bin/affine_chain" 2>/dev/null | grep -c HMMA)"
nvcc -arch=sm_90 -std=c++17 -O2 --ftz=false --prec-div=true --fmad=false -Xptxas -v \
  -I kernels/affine_chain kernels/affine_chain/tf32_device_check.cu -o "$work/tf32_check" > "$work/ptxas_check.log" 2>&1 || status=3
fi

section "2. TF32 conversion check and mma low-bit experiment"
if want 2; then
  [ -x "$work/tf32_check" ] || nvcc -arch=sm_90 -std=c++17 -O2 --ftz=false --prec-div=true --fmad=false \
    -I kernels/affine_chain kernels/affine_chain/tf32_device_check.cu -o "$work/tf32_check" || status=3
  "$work/tf32_check" 4194304 1 || status=1
fi

section "3. GPU against CPU (densefeed compare; ref = CPU path)"
agree() {  # name expect(bitexact|close|info) cuda-only-args args...
  local name=$1 expect=$2 cuda_extra=$3; shift 3
  local d="$work/agree/$name"
  mkdir -p "$d/cpu" "$d/cuda" "$d/ref"
  "$bin/affine_chain" "$@" --device cpu --seed 7 --out "$d/cpu" || { echo "$name: CPU run failed"; status=1; return; }
  "$bin/affine_chain" "$@" --device cuda $cuda_extra --seed 7 --out "$d/cuda" || { echo "$name: CUDA run failed"; status=1; return; }
  local ref_args=() skip=0
  for a in "$@"; do  # the reference takes the layout and input arguments only
    if [ $skip -gt 0 ]; then skip=$((skip - 1)); continue; fi
    case "$a" in --path|--precision|--shards) skip=1;; *) ref_args+=("$a");; esac
  done
  "$bin/affine_chain_reference" "${ref_args[@]}" --seed 7 --out "$d/ref" > /dev/null
  local cmp; cmp=$("$df" compare "$d/cpu/final_state.npy" "$d/cuda/final_state.npy" --rel-l2 1e-4 --max-abs 1 --ulp 0 --json 2>&1)
  local gref; gref=$("$df" compare "$d/ref/final_state.npy" "$d/cuda/final_state.npy" --rel-l2 1 --json 2>&1)
  local cref; cref=$("$df" compare "$d/ref/final_state.npy" "$d/cpu/final_state.npy" --rel-l2 1 --json 2>&1)
  python3 - "$name" "$expect" "$cmp" "$gref" "$cref" <<'EOF' || status=1
import json, sys
name, expect, cmp, gref, cref = sys.argv[1:]
def metrics(text):
    d = json.loads(text)
    out = {}
    def walk(x):
        if isinstance(x, dict):
            if "metric" in x and "value" in x:
                out[x["metric"]] = x["value"]
            for v in x.values(): walk(v)
        elif isinstance(x, list):
            for v in x: walk(v)
    walk(d)
    return out
c, g, r = metrics(cmp), metrics(gref), metrics(cref)
ulp = c.get("max_ulp")
# bitexact: the same bits. close: GPU vs CPU under 1e-5 relative (a fifth of the
# gate's bound). same-error: the GPU's and the CPU's errors against fp64 within
# 5 % of each other (tf32 and tf32-rn re-round every chained product's operands,
# so an accumulation-order difference of one fp32 ulp moves an operand by a TF32
# ulp now and then: reversing the CPU's own summation order moves its tf32
# result by 5.6e-4 relative, kernels/RESULTS.md). info: printed only.
nan = float("nan")
if expect == "bitexact":
    ok = ulp == 0
elif expect == "close":
    ok = c.get("rel_l2", 1) < 1e-5
elif expect == "same-error":
    ok = abs(g.get("rel_l2", nan) - r.get("rel_l2", nan)) <= 0.05 * r.get("rel_l2", nan)
else:
    ok = True
print(f"| {name} | {c.get('rel_l2', float('nan')):.3e} | {c.get('max_abs', float('nan')):.3e} | {ulp} | "
      f"{g.get('rel_l2', float('nan')):.3e} | {r.get('rel_l2', float('nan')):.3e} | {expect} | {'ok' if ok else 'FAIL'} |")
sys.exit(0 if ok else 1)
EOF
}
if want 3; then
echo "| case | GPU vs CPU rel_l2 | max_abs | max ULP | GPU vs fp64 rel_l2 | CPU vs fp64 rel_l2 | expected | |"
echo "|---|---|---|---|---|---|---|---|"
lm=(--regime long-memory --T 8192 --heads 2)
tc="--mma-accumulate tensor-core"
agree "lm-T8192-s8-H2-ieee" bitexact "" --path partitioned --precision ieee --shards 8 "${lm[@]}"
for p in tf32 tf32-rn tf32x3; do
  e=same-error; [ $p = tf32x3 ] && e=close
  agree "lm-T8192-s8-H2-$p" $e "" --path partitioned --precision $p --shards 8 "${lm[@]}"
  agree "lm-T8192-s8-H2-$p-fp32sum" info "--mma-accumulate fp32" --path partitioned --precision $p --shards 8 "${lm[@]}"
  agree "lm-T8192-s8-H2-$p-tcsum" info "$tc" --path partitioned --precision $p --shards 8 "${lm[@]}"
done
agree "lm-T8192-unpartitioned-ieee" bitexact "" --path unpartitioned --precision ieee --regime long-memory --T 8192
agree "varlen-T10240-s8-ieee" bitexact "" --path partitioned --precision ieee --shards 8 --regime long-memory --T 10240 --seq-lens 3000,4000,3240
agree "varlen-T10240-s8-tf32" same-error "" --path partitioned --precision tf32 --shards 8 --regime long-memory --T 10240 --seq-lens 3000,4000,3240
agree "lm-T8000-s64-ieee" bitexact "" --path partitioned --precision ieee --shards 64 --regime long-memory --T 8000
agree "lm-T8000-s64-tf32x3" close "" --path partitioned --precision tf32x3 --shards 64 --regime long-memory --T 8000
agree "lm-T32768-s16-tf32x3" close "" --path partitioned --precision tf32x3 --shards 16 --regime long-memory --T 32768
agree "lm-T32768-s16-tf32x3-fp32sum" info "--mma-accumulate fp32" --path partitioned --precision tf32x3 --shards 16 --regime long-memory --T 32768
agree "lm-T32768-s16-tf32x3-tcsum" info "$tc" --path partitioned --precision tf32x3 --shards 16 --regime long-memory --T 32768
agree "fd-T8192-s4-tf32" close "" --path partitioned --precision tf32 --shards 4 --regime fast-decay --T 8192
fi


section "4. gate cp-affine-chain on the CUDA path, profile $profile"
mkdir -p "$work/manifests"
if want 4; then
for e in tf32 tf32x3; do
  m="$work/manifests/cp-affine-chain-$e-cuda.yaml"
  # device: cuda on the candidate and on the base (their params lines).
  sed -E 's/^(  params: \{precision: [a-z0-9-]+)\}/\1, device: cuda}/' "experiments/cp-affine-chain-$e.yaml" > "$m"
  grep -c "device: cuda" "$m" | grep -q 2 || { echo "could not set device: cuda in $m"; status=3; }
  echo "--- $e (manifest $m)"
  timeout 300 "$df" "${project[@]}" run "$m" --profile "$profile" --seed 1 --jobs "$(nproc)" --no-bench \
    --ledger "$work/ledger.db" > "$out/gate-$e.txt" 2>&1
  echo "exit $? (0 green, 1 red); full report in gate-$e.txt"
  # The long-memory relative-L2 tables (the one-sequence grid and the varlen layout).
  awk '/rel_l2 by T .*regime=long-memory/{p=1} p&&/^$/{p=0} p' "$out/gate-$e.txt"
  grep -E "^verdict|cases|green|red" "$out/gate-$e.txt" | tail -3
done
fi

section "5. bench: kernel time per precision (CUDA events)"
if want 5; then
timeout 240 "$bin/affine_chain_cuda_bench" --T 65536,262144,1048576 --shards 8,64 --heads "$bench_heads" \
  --precisions tf32,tf32-rn,tf32x3,ieee,ieee-fma --accumulate residual,fp32,tensor-core --warmup 2 --iters 5 2>&1 | tee "$out/bench.txt"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,temperature.gpu,clocks_throttle_reasons.active --format=csv
fi

section "6. densefeed run with benchmark (tf32x3 vs tf32 on cuda, quick)"
if want 6 && [ $(( $(date +%s) - t0 )) -lt 330 ] && [ -f "$work/manifests/cp-affine-chain-tf32x3-cuda.yaml" ]; then
  timeout 120 "$df" "${project[@]}" run "$work/manifests/cp-affine-chain-tf32x3-cuda.yaml" --profile quick --seed 2 \
    --jobs "$(nproc)" --ledger "$work/ledger.db" > "$out/run-bench.txt" 2>&1
  echo "exit $?"
  grep -iE -A12 "bench|speedup" "$out/run-bench.txt" | tail -25
else
  echo "skipped (not in SECTIONS, no manifests from section 4, or out of time)"
fi
section "done, status $status"
exit $status
