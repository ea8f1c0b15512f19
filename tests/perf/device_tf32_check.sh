#!/usr/bin/env bash
# On a machine with an sm_90 GPU (the H200 lent by `device`): builds the TF32
# conversion check for sm_90 and runs it. Prints the mismatch table; exit 1
# if the device conversion differs from the CPU emulation in tf32.h.
#   tests/perf/device_tf32_check.sh [random_count] [seed]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp}
nvcc --version | tail -1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader || true
nvcc -arch=sm_90 -std=c++17 -O2 --ftz=false --prec-div=true --fmad=false -Xptxas -v \
  -I kernels/affine_chain kernels/affine_chain/tf32_device_check.cu -o "$out/affine_chain_tf32_check" 2>&1 | grep -E "registers|error" || true
cuobjdump --list-elf "$out/affine_chain_tf32_check" 2>/dev/null | head -3 || true
"$out/affine_chain_tf32_check" "${1:-4194304}" "${2:-1}"
