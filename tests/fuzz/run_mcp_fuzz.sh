#!/usr/bin/env bash
# Fuzzes the MCP server's line handling (tests/fuzz/mcp_fuzz_main.cpp) for a
# bounded time: not part of CI, which replays the corpus and the crashers in
# McpFuzzRegression instead. Builds build-fuzz/ with clang++-14 and
# DENSEFEED_FUZZ=ON (installing Debian's clang-14 and libclang-rt-14-dev if
# missing), then runs libFuzzer from the seeds in tests/fuzz/corpus/mcp; what
# it learns goes to build-fuzz/corpus-mcp, crashers (crash-*, timeout-*,
# oom-*, leak-*) to tests/fuzz/crashers/mcp/, to be fixed and committed.
#   tests/fuzz/run_mcp_fuzz.sh [SECONDS] [libFuzzer flags...]   (default 300)
#   tests/fuzz/run_mcp_fuzz.sh 0 tests/fuzz/crashers/mcp/*     replay files only
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-300}"
shift || true

cxx=clang++-14
rt="$(ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null | head -1 || true)"
if ! command -v "$cxx" >/dev/null 2>&1 || [ -z "$rt" ]; then
  echo "run_mcp_fuzz: installing clang-14 libclang-rt-14-dev"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends clang-14 libclang-rt-14-dev
fi

build="${DENSEFEED_FUZZ_BUILD:-build-fuzz}"
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DDENSEFEED_FUZZ=ON -DDENSEFEED_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build "$build" --target mcp_fuzz -j "${DENSEFEED_FUZZ_JOBS:-$(nproc)}"

crashers=tests/fuzz/crashers/mcp
mkdir -p "$build/corpus-mcp" "$crashers"
if [ "$seconds" = 0 ]; then
  exec "$build/bin/mcp_fuzz" "$@"
fi
# -max_len: the longest seed (long_line) and then some; lines past 2048 bytes
# are refused unread (mcp_fuzz_input.cpp), so longer inputs add nothing.
# -timeout: one input is at most a few hundred tool calls of a few ms.
exec "$build/bin/mcp_fuzz" "$build/corpus-mcp" tests/fuzz/corpus/mcp \
  -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$crashers/" -print_final_stats=1 "$@"
