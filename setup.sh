#!/usr/bin/env bash
# Sets densefeed up on a fresh Debian 12 machine and runs the main job on the
# bundled example: installs the Debian packages it needs, builds (with the
# CUDA paths where nvcc exists), then runs the context-parallel precision
# experiment both ways (tf32x3: green with a speedup; tf32: red with a table).
#   ./setup.sh            set up, build, run the example
#   ./setup.sh --build    set up and build only (what CI uses before the tests)
# (libjs-vega: the charts `densefeed report` inlines; chromium: the report tests' headless browser;
# libxml2-utils: xmllint, which the JUnit tests validate `audit --junit` with;
# zsh, fish: the completion tests run the generated completions in them; python3-venv, python3-wheel: the pip package test)
set -euo pipefail
cd "$(dirname "$0")"

packages=(cmake make g++ pkg-config libyaml-cpp-dev nlohmann-json3-dev libsqlite3-dev sqlite3 libcli11-dev
          libboost-dev libboost-filesystem-dev libmuparser-dev libfmt-dev libvalijson-dev libgtest-dev libssl-dev bubblewrap zlib1g-dev
          python3 python3-numpy python3-pip git libjs-vega chromium dpkg-dev file libxml2-utils zsh fish python3-venv python3-wheel)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDENSEFEED_CUDA=AUTO
cmake --build build -j "$(nproc)"
build/bin/densefeed gate verify

if [ "${1:-}" = "--build" ]; then exit 0; fi

echo
echo "=== the fix: tf32x3 (expected green, with a benchmark against tf32) ==="
build/bin/densefeed run experiments/cp-affine-chain-tf32x3.yaml
echo
echo "=== the bug: tf32 (expected red, with the error against shards and T) ==="
status=0
build/bin/densefeed run experiments/cp-affine-chain-tf32.yaml || status=$?
if [ "$status" -ne 1 ]; then
  echo "setup: the tf32 experiment should be red (exit 1), got exit $status" >&2
  exit 1
fi
echo
build/bin/densefeed ledger list
echo
echo "setup: done. Both verdicts are as expected; the ledger is .densefeed/ledger.db"
