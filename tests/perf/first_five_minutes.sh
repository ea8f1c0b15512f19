#!/usr/bin/env bash
# The first five minutes of a new user (issue 13's figure): densefeed
# installed into a fresh prefix, a fresh git repository of its own, then
# `densefeed init`, the commit, and the sample's first red verdict. Prints the
# wall time of each step and from init to the red verdict; asserts nothing.
#   tests/perf/first_five_minutes.sh [BUILD]     (default build/)
set -euo pipefail
build=$(realpath "${1:-build}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
t0=$(now); cmake --install "$build" --prefix "$work/prefix" > /dev/null; t1=$(now)
export PATH="$work/prefix/bin:/usr/local/bin:/usr/bin:/bin"
mkdir -p "$work/repo" && cd "$work/repo"
git init -q -b main && git config user.email u@example.org && git config user.name user
echo "# my kernels" > README.md && git add -A && git commit -qm start
t2=$(now); densefeed init > /dev/null; t3=$(now)
git add -A && git commit -qm 'densefeed: sample gate'; t4=$(now)
status=0; densefeed run experiments/scan-merge-float16.yaml > "$work/red.txt" || status=$?; t5=$(now)
[ "$status" -eq 1 ] || { echo "expected red (exit 1), got $status" >&2; cat "$work/red.txt" >&2; exit 1; }
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v e="$t4" -v f="$t5" 'BEGIN {
  printf "cmake --install          %6.2f s\n", b - a
  printf "densefeed init           %6.2f s\n", d - c
  printf "git commit               %6.2f s\n", e - d
  printf "first run (red, exit 1)  %6.2f s\n", f - e
  printf "init -> first red        %6.2f s\n", f - c }'
grep -m1 "^gate:" "$work/red.txt"
